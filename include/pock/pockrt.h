/* pockrt.h — the public C API of libpockrt: open a compiled model (an artifact written by
 * `pock compile`), feed batches, run training steps, evaluation and inference, save weights.
 *
 * Usage:
 *   pkrt_model *m;
 *   char err[256];
 *   if (pkrt_model_open("model.pock", NULL, &m, err, sizeof err) != PKRT_OK) { puts(err); ... }
 *   int64_t b = pkrt_model_batch(m);                // batch size fixed at compile time
 *   float *x = pkrt_model_input(m, NULL);           // (b, features...) of the model dtype
 *   ... fill x, then the labels ...
 *   pkrt_model_set_labels(m, labels, b);            // class ids; rows >= valid are padding
 *   double loss;
 *   if (pkrt_model_train_step(m, &loss) != PKRT_OK) puts(pkrt_model_error(m));
 *   pkrt_model_save_weights(m, "w.pkw");
 *   pkrt_model_close(m);
 *
 * Thread safety: a pkrt_model is used by one thread at a time (its own pool runs the
 * kernels); distinct models are independent. Nothing is allocated per step.
 */
#ifndef POCKRT_H
#define POCKRT_H

#include <stddef.h>
#include <stdint.h>

#include "pock/pkrt_kernel.h"

/* Calls returning int return 0 (PKRT_OK) on success, else a pkrt_status code. */

typedef struct pkrt_model pkrt_model;

typedef struct pkrt_open_options {
  int nthreads;          /* 0 or 1: run kernels on the calling thread */
  void *arena;           /* optional caller-provided activation arena (64-byte aligned) */
  size_t arena_bytes;    /* its size; must be >= pkrt_model_arena_bytes() */
} pkrt_open_options;

/* Opens an artifact: checks the format version and section checksums, loads the kernel
 * object from memory, allocates its arenas once. On failure returns non-zero and writes a
 * message naming the problem into err (when errcap > 0); *out is NULL. opts may be NULL. */
int pkrt_model_open(const char *path, const pkrt_open_options *opts, pkrt_model **out,
                    char *err, size_t errcap);
void pkrt_model_close(pkrt_model *m);
const char *pkrt_model_error(const pkrt_model *m); /* message of the last failure */

/* ---- what the model is ---- */
int64_t pkrt_model_batch(const pkrt_model *m);
int pkrt_model_dtype(const pkrt_model *m);        /* a pkrt_dtype: F32 or F64 */
int pkrt_model_can_train(const pkrt_model *m);    /* 0 for inference-only artifacts */
/* Shape of the input (features) and of the output (predictions), batch dim included. */
int pkrt_model_input_shape(const pkrt_model *m, int64_t *shape /* [8] */);
int pkrt_model_output_shape(const pkrt_model *m, int64_t *shape /* [8] */);
int64_t pkrt_model_arena_bytes(const pkrt_model *m); /* the planned activation arena */
int64_t pkrt_model_steps(const pkrt_model *m);       /* training steps taken so far */

/* ---- feeding a batch ----
 * The input buffer (batch rows, row-major, model dtype) is written in place; name NULL
 * means the model's one input. Labels: class ids in [0, classes) for classification
 * models (turned into one-hot targets), or pkrt_model_targets() for regression. Rows
 * valid..batch-1 are padding: they get weight 0 in the loss, which averages over the
 * valid rows only. */
void *pkrt_model_input(pkrt_model *m, const char *name);
int pkrt_model_set_labels(pkrt_model *m, const int32_t *labels, int64_t valid);
void *pkrt_model_targets(pkrt_model *m);        /* regression targets, (batch, ...) */
int pkrt_model_set_valid_rows(pkrt_model *m, int64_t valid);

/* ---- running ---- */
int pkrt_model_set_lr(pkrt_model *m, double lr); /* base lr; the schedule scales it */
/* Forward, backward and the optimizer updates; *loss gets the batch's mean loss. */
int pkrt_model_train_step(pkrt_model *m, double *loss);
/* Forward and loss (no update). */
int pkrt_model_eval_step(pkrt_model *m, double *loss);
/* Forward only. */
int pkrt_model_infer(pkrt_model *m);
/* Predictions of the last step: (batch, ...) of the model dtype. */
const void *pkrt_model_output(const pkrt_model *m);

/* ---- weights ----
 * The weights file format (.pkw, docs/graph-format.md): named tensors. Save writes every
 * parameter atomically (temp file, fsync, rename); load reads those whose names match
 * (shape and dtype must agree), others stay. */
int pkrt_model_save_weights(pkrt_model *m, const char *path);
int pkrt_model_load_weights(pkrt_model *m, const char *path);

#endif
