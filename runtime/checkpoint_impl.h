/* checkpoint_impl.h — libpockrt-private checkpoint interface shared by checkpoint.c and the
 * training loop: the loop's position travels with the model's state so a resumed run
 * repeats the uninterrupted one bit for bit. The file format is in docs/runtime.md. */
#ifndef PKRT_CHECKPOINT_IMPL_H
#define PKRT_CHECKPOINT_IMPL_H

#include "model_impl.h"

/* Where a training run stands between two steps. */
typedef struct rt_loop_state {
  int64_t epochs_done;     /* epochs completed (and reported) */
  int64_t in_epoch;        /* 1: epoch epochs_done + 1 is shuffled and `pos` steps ran */
  int64_t pos;             /* steps of that epoch already taken */
  uint64_t rng[4];         /* the shuffling PRNG, after the running epoch's shuffle */
  double loss_sum;         /* the running epoch's sums over the labels the loss counts
                              (rows, or tokens): loss x labels, correct, labels seen */
  int64_t correct, seen;
  int64_t rows;            /* the training set: row count and SHA-256 of its rows */
  uint8_t data_sha[PKRT_SHA256_BYTES];
  int64_t *perm;           /* rows entries: the visiting order (shuffles accumulate) */
} rt_loop_state;

/* Writes the model's params and state regions, step count and base lr, with the loop
 * state when ls is non-NULL, atomically (temp file, fsync, rename, directory fsync).
 * Allocates nothing, so it may run between training steps. */
RT_INTERNAL pkrt_status rt_checkpoint_write(pkrt_model *m, const char *path,
                                            const rt_loop_state *ls);
/* Reads and verifies a checkpoint, then restores the model from it. With ls non-NULL the
 * file must hold loop state for the dataset ls describes (rows, data_sha, set by the
 * caller); ls->perm (rows entries) receives the order. Nothing changes on failure. */
RT_INTERNAL pkrt_status rt_checkpoint_read(pkrt_model *m, const char *path, rt_loop_state *ls);
/* The SHA-256 of a dataset's features and labels: a resume on other data is refused. */
RT_INTERNAL void rt_dataset_digest(const pkrt_dataset *d, uint8_t out[PKRT_SHA256_BYTES]);

#endif
