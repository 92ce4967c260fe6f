/* pockrt.h — the public C API of libpockrt: open a compiled model (an artifact written by
 * `pock compile`), feed batches, run training steps, evaluation and inference, save weights;
 * load datasets (CSV, .npy pairs) and run the training loop `pock train` and `pock-rt train`
 * share.
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
 *   // or the whole loop:
 *   pkrt_dataset *d;
 *   pkrt_data_options dopt = {.scale = 0.0625, .label_column = -1, .model = m};
 *   if (pkrt_dataset_load("train.csv", &dopt, &d, err, sizeof err) != PKRT_OK) ...
 *   pkrt_train_options t = {.epochs = 10, .seed = 1, .save_path = "w.pkw"};
 *   pkrt_train_result r;
 *   pkrt_train_run(m, d, &t, &r);                   // prints one line per epoch
 *   pkrt_dataset_free(d);
 *
 * Thread safety: a pkrt_model is used by one thread at a time (its own pool runs the
 * kernels); distinct models are independent. Nothing is allocated per step. The queries
 * of what a model is (batch, dtype, can_train, classes, features, shapes, arena bytes,
 * id) never change after open and may be called from any thread; a loaded dataset is
 * read-only and may be shared. Details: docs/runtime.md, "Thread safety of the C API".
 */
#ifndef POCKRT_H
#define POCKRT_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "pock/pkrt_kernel.h"
#include "pock/pkrt_status.h"

/* Calls returning int return 0 (PKRT_OK) on success, else a pkrt_status code
 * (pock/pkrt_status.h; pkrt_status_name() names it). */

typedef struct pkrt_model pkrt_model;

/* The most inputs a model may have (io.inputs of the manifest). */
#define PKRT_MAX_INPUTS 16

typedef struct pkrt_open_options {
  int nthreads;          /* 0 or 1: run kernels on the calling thread */
  void *arena;           /* optional caller-provided activation arena (64-byte aligned);
                            it also keeps the artifact's folded results between steps, so
                            it belongs to this model alone */
  size_t arena_bytes;    /* its size; must be >= pkrt_model_arena_bytes() */
  /* Non-zero: do not compare the artifact's target fingerprint with this device (for
   * tests and for devices whose /proc/cpuinfo hides features). */
  int skip_fingerprint;
  /* The trusted signing key (docs/signing.md): its text ("pock-ed25519-public <base64>")
   * or the path of its .pub file. NULL: the environment variable POCK_TRUSTED_KEY (text
   * or path), else /etc/pock/trusted.pub if it exists, else none. With a key, open refuses
   * unsigned, differently signed and tampered artifacts before parsing their manifest or
   * loading their code; with none (the default), unsigned artifacts load, and a signed one
   * still loads only if its signature verifies under the key it names. */
  const char *trusted_key;
} pkrt_open_options;

/* Opens an artifact: checks the format version and section checksums, the signature
 * against the trusted key when one is configured (trusted_key above), validates the
 * manifest against itself and against the kernel object (loaded from memory), checks the
 * target fingerprint, allocates its regions once and copies the initial weights. A GPU
 * artifact (docs/runtime.md, "GPU artifacts") also opens its device, where one arena holds
 * the regions and the kernels run; the host regions stay as the mirror the accessors give.
 * On failure returns non-zero and writes a message naming the problem into err (when
 * errcap > 0); *out is NULL. opts may be NULL. */
int pkrt_model_open(const char *path, const pkrt_open_options *opts, pkrt_model **out,
                    char *err, size_t errcap);
void pkrt_model_close(pkrt_model *m);
const char *pkrt_model_error(const pkrt_model *m); /* message of the last failure */

/* ---- what the model is ---- */
int64_t pkrt_model_batch(const pkrt_model *m);
int pkrt_model_dtype(const pkrt_model *m);        /* a pkrt_dtype: F32 or F64 */
int pkrt_model_can_train(const pkrt_model *m);    /* 0 for inference-only artifacts */
int64_t pkrt_model_classes(const pkrt_model *m);  /* one-hot width; 0 for regression */
int64_t pkrt_model_features(const pkrt_model *m); /* input elements per row */
/* Shape of the input (features) and of the output (predictions), batch dim included;
 * the return value is the rank. */
int pkrt_model_input_shape(const pkrt_model *m, int64_t *shape /* [8] */);
int pkrt_model_output_shape(const pkrt_model *m, int64_t *shape /* [8] */);
/* Several inputs (graph format version 2): their count, and input i's (0-based, the model
 * file's order) name, dtype (a pkrt_dtype: the model's float dtype, I32 or I64; 0 when i is
 * out of range) and whether it has the batch dim (0: one value per step shared by every
 * row). pkrt_model_input(m, name) gives each buffer; input 0 is the one of
 * pkrt_model_input(m, NULL), pkrt_model_features and pkrt_model_input_shape. */
int pkrt_model_ninputs(const pkrt_model *m);
const char *pkrt_model_input_name(const pkrt_model *m, int i);
int pkrt_model_input_dtype(const pkrt_model *m, int i);
int pkrt_model_input_batched(const pkrt_model *m, int i);
int64_t pkrt_model_arena_bytes(const pkrt_model *m); /* the planned activation arena */
int64_t pkrt_model_steps(const pkrt_model *m);       /* training steps taken so far */
/* How a GPU artifact's kernels were loaded, for a log line; NULL for C and CUDA artifacts.
 * OpenCL: "OpenCL binary for DEVICE (used)", "... (device differs: built from source)",
 * "... (refused: built from source)" or "OpenCL source (the artifact has no device binary)". */
const char *pkrt_model_gpu_image(const pkrt_model *m);

/* A named tensor of the manifest (parameters, optimizer state, ...): its storage and
 * layout, for inspection and tests. Element (i0, ...) is at
 * ((T *)data)[offset + sum(i_d * strides[d])]. The storage of a param, buffer or constant
 * may be written: what the artifact computes from the weights once (its "load" plan, the
 * compiler's fold pass) is computed again before the next step. */
typedef struct pkrt_tensor_info {
  void *data;
  int64_t offset;
  int dtype;
  int ndim;
  int64_t shape[8];
  int64_t strides[8];
  const char *role;      /* "param", "opt_state", "input", ... */
} pkrt_tensor_info;
int pkrt_model_tensor(pkrt_model *m, const char *name, pkrt_tensor_info *out);

/* ---- feeding a batch ----
 * The input buffer (batch rows, row-major, model dtype) is written in place; name NULL
 * means the model's one input. Labels: class ids in [0, classes) for classification
 * models (or the model's ignore_index: that row weighs nothing), valid x label width of
 * them (1, or T for per-token labels: row-major (valid, T)); they are stored as i64
 * integers, never as one-hot targets (old artifacts: one-hot). Regression:
 * pkrt_model_targets(). Rows valid..batch-1 are padding: classification gives them label
 * -1, which the loss ignores; regression weight 0. Either way the loss averages over the
 * counted rows only. */
void *pkrt_model_input(pkrt_model *m, const char *name);
int pkrt_model_set_labels(pkrt_model *m, const int32_t *labels, int64_t valid);
void *pkrt_model_targets(pkrt_model *m);        /* regression targets, (batch, ...); for
                                                   integer-label models the i64 labels */
int pkrt_model_set_valid_rows(pkrt_model *m, int64_t valid);

/* ---- running ---- */
int pkrt_model_set_lr(pkrt_model *m, double lr); /* base lr; the schedule scales it */
/* Dropout's seed (default 0; pkrt_train_run sets its options' seed): with io.rng in the
 * manifest, training step t writes (seed, t) there and eval/infer steps (seed, -1), so a
 * run's masks repeat exactly for one seed and evaluation drops nothing. */
int pkrt_model_set_seed(pkrt_model *m, uint64_t seed);
double pkrt_model_lr(const pkrt_model *m);       /* the base lr */
/* Forward, backward and the optimizer updates; *loss (may be NULL) gets the batch's mean
 * loss over its valid rows. Step t (1, 2, ...) writes H = (lr_t, 1 - beta1^t, 1 - beta2^t,
 * 0) first, lr_t being the manifest's schedule applied to the base lr. */
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

/* ---- checkpoints (format: docs/runtime.md) ----
 * A checkpoint holds what training changes: the parameters, the optimizer state, the step
 * count and the base lr (and, written by the training loop, its position: epoch, step in
 * it, shuffling PRNG, row order). It belongs to one artifact (its manifest's SHA-256) and
 * any other refuses it. Save is atomic (temp file in the same directory, fsync, rename,
 * directory fsync) and allocates nothing, so a kill at any moment leaves the previous
 * file intact; load verifies the whole file (SHA-256 trailer) before changing anything. */
int pkrt_model_save_checkpoint(pkrt_model *m, const char *path);
int pkrt_model_load_checkpoint(pkrt_model *m, const char *path);
/* The model's identity, which checkpoints carry: the lower-case hex SHA-256 of the
 * artifact's manifest (hex holds 65 bytes). */
void pkrt_model_id(const pkrt_model *m, char hex[65]);

/* ---- datasets ----
 * path is a CSV file, or "X.npy:Y.npy":
 *   CSV: numbers separated by commas, one row per line; a first line that is not all
 *     numbers is a header and skipped; blank lines are skipped; the label is column
 *     label_column (0-based, negative counts from the end: -1 = last) and must be an
 *     integer; every other column is a feature, multiplied by scale.
 *   npy: X float32/float64 (rows, ...), C order, features = product of the other dims;
 *     Y int32/int64/uint8 (rows,) or (rows, 1) class ids, or (rows, T) for a model
 *     whose output is (batch, T, classes) (a label per token: CSV cannot carry those).
 *     Versions 1-3 of the format.
 *   Labels are class ids in [0, classes), or the model's ignore_index (graph JSON
 *   training.ignore_index), which the loss ignores.
 *   "X1.npy,X2.npy,...:Y.npy" (needs .model): one file per model input, in the model's
 *     order; an integer input (i32/i64) takes an integer file, a float input a float one;
 *     an input without the batch dim takes exactly its shape's values, fed every step.
 * Features are stored in the dtype the model uses, so a batch is one copy per row. */
typedef struct pkrt_dataset pkrt_dataset;
typedef struct pkrt_data_options {
  double scale;          /* features are multiplied by this; 0 means 1 */
  int label_column;      /* CSV only; 0 means column 0, so pass -1 for "last" */
  int dtype;             /* pkrt_dtype of the stored features: F32 (0 = F32) or F64 */
  /* When set, dtype, classes and features come from the model and are checked: labels in
   * [0, classes), feature count equal to the model's input size. */
  const pkrt_model *model;
  int64_t classes;       /* > 0 without a model: labels must be in [0, classes) */
  int64_t features;      /* > 0 without a model: required feature count */
  /* without a model (with one they come from it): */
  int64_t label_width;   /* > 1: labels per row (Y.npy is (rows, label_width)); 0 means 1 */
  int has_ignore_index;  /* non-zero: ignore_index is a label allowed besides class ids */
  int64_t ignore_index;
} pkrt_data_options;
int pkrt_dataset_load(const char *path, const pkrt_data_options *opts, pkrt_dataset **out,
                      char *err, size_t errcap);
void pkrt_dataset_free(pkrt_dataset *d);
int64_t pkrt_dataset_rows(const pkrt_dataset *d);
int64_t pkrt_dataset_features(const pkrt_dataset *d);
int pkrt_dataset_dtype(const pkrt_dataset *d);
const void *pkrt_dataset_x(const pkrt_dataset *d);        /* rows x features, row-major */
const int32_t *pkrt_dataset_labels(const pkrt_dataset *d); /* rows x label width */
int64_t pkrt_dataset_label_width(const pkrt_dataset *d);  /* 1, or T per-token labels */

/* ---- the training loop ----
 * Each epoch visits every row once in an order drawn from a PRNG seeded by `seed`
 * (xoshiro256**, seeded through splitmix64; the same seed gives the same order). Batches
 * have the compiled batch size; the LAST PARTIAL BATCH is padded: its padding rows are
 * zeros with label -1 (ignored; old one-hot artifacts: weight 0), so the loss averages
 * over its real rows only. Per epoch it
 * prints (to `out`, stdout when NULL)
 *   epoch 3/30 loss 0.1234 acc 0.9512 val_loss 0.2 val_acc 0.93 ms/step 0.123 median 0.120
 * (val_* only with a validation set; ms/step is the mean and median the median step time
 * over the run's steps so far), with a progress bar in between when `out` is a
 * terminal; loss and accuracy are the means over the epoch's counted labels (its rows;
 * its tokens for per-token labels; labels equal to ignore_index do not count), accuracy
 * the argmax of the output against the label, measured during the step (before its
 * update). At the end it prints "trained N steps, ms/step X median Y, peak RSS K kB" (the
 * peak RSS is the process's VmHWM; left out where /proc/self/status has none). When *stop
 * becomes non-zero (a SIGINT handler) the loop ends after the current step, saves the
 * weights (save_path), prints
 * "interrupted after N steps" and returns 0 with result->interrupted set. A step whose
 * loss is not finite (inf or NaN: the learning rate or the data's scale is too large) ends
 * the run with PKRT_ERR_INPUT naming the step; its update already ran in place, so neither
 * save_path nor checkpoint_path is written then: the files from before (an earlier
 * checkpoint) stay the last good state. */
typedef struct pkrt_train_options {
  int epochs;                      /* >= 1 */
  uint64_t seed;
  int no_shuffle;                  /* non-zero: rows in file order every epoch */
  double lr;                       /* > 0: overrides the manifest's base lr */
  const pkrt_dataset *val;         /* optional validation set (eval plan, in order) */
  /* Outputs follow the file rules (docs/runtime.md, "Files") and are checked before the
   * first step: a device, FIFO, directory or dangling link is refused, and so is a path
   * two outputs share or that is resume_path (checkpoint_path excepted: in place). */
  const char *save_path;           /* optional .pkw written at the end (and on interrupt) */
  const char *metrics_path;        /* optional JSONL file, one object per epoch; may be a
                                      pipe; a failed write makes the run return an error
                                      after training (weights and checkpoint still saved) */
  FILE *out;                       /* NULL: stdout */
  int progress;                    /* 0: auto (a bar when out is a terminal), 1: always a
                                      bar, -1: never */
  int quiet;                       /* non-zero: print nothing */
  volatile sig_atomic_t *stop;     /* optional stop flag, checked between steps */
  /* Checkpoints: checkpoint_path is written at the end of every epoch, every
   * checkpoint_every steps when that is > 0, and when the run stops early. resume_path
   * continues from such a file: model state, epoch, step in the epoch and row order come
   * from it (seed is unused), so the losses and weights equal the uninterrupted run's.
   * epochs counts from the first epoch, before the checkpoint too. */
  const char *checkpoint_path;
  int64_t checkpoint_every;
  const char *resume_path;
  int64_t max_steps;               /* > 0: stop after this many steps of this run, as the
                                      stop flag does (result->interrupted is set) */
  int64_t warmup_steps;            /* > 0: overrides the manifest's linear lr warmup
                                      (optimizer steps; a cosine schedule's total_steps must
                                      exceed it) */
  /* Non-zero: cache the frozen prefix (an artifact compiled with `pock compile
   * --cache-frozen`; docs/runtime.md): each row's prefix results are kept the first time
   * it is trained on, and later steps on cached rows run only the rest of the step. The
   * cache is allocated before the first step, at most cache_budget bytes (0: the default,
   * PKRT_CACHE_DEFAULT_BUDGET); a bigger one is refused. */
  int cache_frozen;
  int64_t cache_budget;
} pkrt_train_options;

#define PKRT_CACHE_DEFAULT_BUDGET ((int64_t)1 << 30) /* 1 GiB */

typedef struct pkrt_train_result {
  int64_t steps;                   /* training steps of this run */
  int epochs;                      /* epochs completed (with resume_path: counted from
                                      the run's first epoch) */
  double loss, acc;                /* of the last completed epoch */
  double val_loss, val_acc;        /* NAN without a validation set */
  double ms_per_step;              /* mean wall time of a training step (data copy included) */
  int interrupted;
  double ms_median;                /* median wall time of a training step (the same steps) */
  int64_t peak_rss_kb;             /* the process's peak RSS at the end (VmHWM, KiB); -1
                                      where the system does not report it */
} pkrt_train_result;

int pkrt_train_run(pkrt_model *m, const pkrt_dataset *train, const pkrt_train_options *opts,
                   pkrt_train_result *result);
/* Copies rows [first, first + valid) of every input of d into the model's inputs (rows
 * valid..batch-1 zero; a batch-less input whole); labels untouched. valid <= batch. For
 * running a dataset through pkrt_model_infer, whatever the number of inputs. */
int pkrt_model_feed(pkrt_model *m, const pkrt_dataset *d, int64_t first, int64_t valid);
/* Mean loss and accuracy of the model over a dataset (eval plan, batches in row order,
 * last batch padded). */
int pkrt_eval_run(pkrt_model *m, const pkrt_dataset *d, double *loss, double *acc);

#endif
