/* pk_driver.h — `pock compile`: model file → forward graph → sparse spec → training graph
 * → kernel tasks → tuned or default schedules → one C kernel object → the artifact.
 * The pipeline is a flat list of named stages; --dump-after STAGE prints the IR after one.
 *
 * Usage:
 *   pk_compile_options o = pk_compile_defaults();
 *   o.model = "cnn.json"; o.sparse = "head.json"; o.batch = 32; o.out = "cnn.pock";
 *   pk_compile_result r;
 *   if (pk_compile(ctx, &o, &r) != PK_OK) fprintf(stderr, "%s\n", pk_ctx_error(ctx));
 */
#ifndef PK_DRIVER_H
#define PK_DRIVER_H

#include <signal.h>
#include <stdio.h>

#include "pk_frontend.h"

/* Stages, in order (names for --dump-after). */
#define PK_DRIVER_STAGES \
  "load, sparse, train, fold, share_stats, copy_elim, layout, fuse, reorder, frozen, memplan, tasks, schedule, " \
  "codegen, artifact"

typedef struct pk_measurer pk_measurer;

typedef struct pk_compile_options {
  const char *model;        /* graph JSON or ONNX (.onnx); with `graph`: a label, may be NULL */
  /* Instead of loading `model`: a validated forward graph built with the graph API (in
   * the same ctx), and what the model file would say about training. The sparse stage
   * marks its params; nothing else changes it. */
  pk_graph *graph;
  const pk_model_info *info;
  const char *sparse;       /* sparse-update spec JSON; NULL: full update */
  const char *weights;      /* .pkw to load over the model's initial values; NULL: none */
  const char *reinit;       /* glob of params that keep the model's initial values */
  int64_t batch;            /* >= 1 (default 32); ignored with `graph` (its own batch) */
  const char *db;           /* tuning database; NULL: hand presets or default schedules */
  const char *target;       /* target string (docs/targets.md; NULL: "c"); C targets build */
  const char *cc;           /* the compiler for it (NULL: $CC, else cc): a cross compiler
                               makes a cross build */
  double build_timeout_s;   /* limit on building the kernel object; 0: PK_BUILD_TIMEOUT_S */
  int build_jobs;           /* compilers at once (kernel objects); 0: this machine's CPUs */
  bool inference;           /* forward only, no loss, no backward */
  const char *out;          /* artifact path (may be NULL with dump_after: nothing written) */
  bool print_memory;        /* print the memory table to `log` */
  const char *dump_after;   /* a stage name or NULL: print its structure to stdout, stop */
  /* graph passes (graph/passes/pk_passes.h): NULL or "all", "none", or a comma list of
   * pass names; each pass is a stage, so it can be measured alone */
  const char *passes;
  const char *disable_passes; /* NULL or a comma list: these off, whatever `passes` says */
  /* the layout pass (pk_layout_mode_parse): NULL or "auto" (each conv chain NHWC when the
   * tuning records of --db say its kernels are faster so), "nchw", "nhwc" */
  const char *layout;
  pk_measurer *measurer;    /* with layout auto: times once each kernel the layout pass
                               costs and --db has no record of; NULL: records only */
  bool verbose;             /* a line per pass stage to `log` */
  /* the frozen prefix (pk_graph_frozen_prefix) runs first and the artifact says which
   * tensors the runtime may cache per sample (`--cache-frozen`); refused with the reason
   * when the model has none */
  bool cache_frozen;
  /* OpenCL targets: leave out the device binary (the artifact's "kernels.clbin", built on
   * this machine's OpenCL device 0 for exactly that device); the source is always there */
  bool no_device_binary;
  /* overrides of the model file's training object (NAN/negative: keep) */
  double lr;
  const char *optimizer;    /* "sgd", "adam", "adamw" or NULL */
  double momentum, weight_decay;
  int64_t warmup_steps;     /* linear lr warmup, optimizer steps (negative: keep) */
  int64_t accum_steps;      /* gradient accumulation, >= 1 (0: keep) */
  double clip_global;       /* > 0: global-norm clipping to this norm; 0: off (NAN: keep) */
  FILE *log;                /* progress and tables; NULL: stderr */
  /* ---- issue 17 (cli helper): options for ONNX models, which have no training object ----
   * loss overrides the model's (an ONNX model's training JSON beside it, or the graph
   * JSON's "training"); classes checks the class count of softmax_cross_entropy against
   * the model's output (the loss trains on integer labels over the output's last dim). */
  const char *loss;         /* "softmax_cross_entropy", "mse" or NULL: keep */
  int64_t classes;          /* > 0: the output must have this many classes; 0: no check */
  /* --input-shape: bindings of an ONNX model's symbolic input dims (pk_frontend_opts) */
  const pk_input_shape *input_shapes;
  int ninput_shapes;
} pk_compile_options;

pk_compile_options pk_compile_defaults(void);  /* batch 32, target "c", no overrides */

typedef struct pk_compile_result {
  int nkernels;             /* distinct kernels in the artifact */
  int ntuned;               /* of which with a tuned schedule from the database */
  pk_train_stats stats;
  pk_memplan *memplan;
  pk_graph *graph;          /* the graph the artifact runs: manifest tensor i = tensor i */
  int64_t workspace_bytes;  /* the largest kernel workspace */
  int64_t artifact_bytes;
} pk_compile_result;

/* Runs the stages; errors are PK_ERR_USAGE for bad options (unknown stage, no output),
 * otherwise the failing stage's status with a message naming the file and the thing. The
 * artifact's plans: "train" = every node of the training graph in order, "eval" = its
 * forward and loss nodes, "infer" = its forward nodes (inference artifacts: only "infer"),
 * "load" = the fold pass's load-phase nodes, which the others leave out (run once when the
 * weights are in place); all run on the one memory plan. Progress goes to o->log. out may be NULL. */
pk_status pk_compile(pk_ctx *ctx, const pk_compile_options *o, pk_compile_result *out);

/* The distinct kernel tasks of a model's training (or inference) graph, for `pock tune
 * MODEL`: each TE program once (kernels that differ only in buffer strides are one task:
 * a schedule serves both), with its calls per step as weight. Runs load, sparse, train and
 * the passes that change the kernels (fold, share_stats, copy_elim, layout, fuse); a kernel
 * only the load plan calls (once, not per step) is not a task. */
typedef struct pk_model_tasks {
  int n;
  pk_te_program **progs;
  double *calls;            /* calls per step */
  const char **names;       /* readable: "conv2d_grad1(conv3)" */
} pk_model_tasks;
pk_status pk_model_tasks_of(pk_ctx *ctx, const pk_compile_options *o, pk_model_tasks *out);

/* ---- `pock sparse-search` (issue 22; search*.c, docs/sparse-search.md) ----
 * Finds the sparse-update scheme with the best validation accuracy that fits a budget of
 * backward-pass memory (and optionally of step time):
 *   1. contribution analysis: fine-tune the head alone, then the head with each candidate
 *      alone (each non-head layer's bias; its weight at 1/8, 1/4, 1/2 and all of its input
 *      channels), all from the same start; a candidate's gain is its validation accuracy
 *      minus head-only's. Runs are kept in the cache file (keyed by the model, weights,
 *      data and settings), so a rerun trains nothing;
 *   2. cost of a scheme from the compiler's own stages: BP memory as --print-memory prints
 *      it, the planned peak, and step time from the tuning database's records, else from
 *      one timing of each distinct kernel's schedule (the measurer; cached too);
 *   3. search: every scheme when the space is small, else a seeded evolutionary search,
 *      for the best summed gain within the budgets; the top `verify` are fine-tuned for
 *      real and the best measured validation accuracy wins.
 * Usage:
 *   pk_search_options so = pk_search_defaults();
 *   so.compile.model = "cnn.json"; so.data = "train.csv"; so.val = "val.csv";
 *   so.budget_bytes = 100000; so.cache = "search.cache.json";
 *   pk_search_result r;
 *   if (pk_sparse_search(ctx, &so, &r) == PK_OK) ... write r.spec, r.report, r.html
 */

typedef struct pk_search_options {
  pk_compile_options compile; /* model, weights, reinit, batch, db, target, optimizer; sparse,
                                 out, dump_after and print_memory are the search's own */
  const char *data, *val;     /* training and validation data (as `pock train --data`) */
  double scale;               /* every feature times this (1: none) */
  int label_column;           /* as `pock train --label-column` (-1: last) */
  int64_t budget_bytes;       /* BP memory (saved activations + gradients + optimizer state) */
  double budget_step_ms;      /* <= 0: no time budget */
  int epochs;                 /* each contribution run (default 10) */
  int verify_epochs;          /* each verification run (0: epochs) */
  int verify;                 /* schemes verified by fine-tuning (default 3) */
  const double *verify_lrs;   /* each verified scheme is fine-tuned at each of these learning
                                 rates and keeps its best (NULL: the one lr of the training
                                 object), as a user would tune a hand-written spec's */
  int nverify_lrs;
  uint64_t seed;              /* shuffling and the evolutionary search */
  int64_t exact_max;          /* spaces of up to this many schemes are searched exhaustively,
                                 larger ones evolutionarily (0: 4096) */
  const char *cache;          /* the cache file (read if present, rewritten after each run) */
  bool html;                  /* also make the one-file HTML report */
  pk_measurer *measurer;      /* times kernels without a tuning record; NULL: step time is
                                 unknown where a record is missing (and --budget-step-ms is
                                 refused) */
  volatile sig_atomic_t *stop; /* set (Ctrl-C): stop after the current step; the cache stays */
  FILE *log;                  /* progress lines and the report; NULL: stderr */
} pk_search_options;

pk_search_options pk_search_defaults(void);

typedef struct pk_search_result {
  int64_t head_bp_bytes;      /* the smallest BP memory of any scheme (head only) */
  int64_t full_bp_bytes;      /* every candidate on */
  int runs_trained;           /* fine-tunes this call ran (0 when the cache had them all) */
  int runs_cached;            /* fine-tunes found in the cache */
  int schemes;                /* schemes costed */
  double chosen_val_acc;      /* measured */
  double chosen_lr;           /* the learning rate it was measured with (0: the default) */
  int64_t chosen_bp_bytes;
  const char *chosen;         /* readable: "conv3.weight[:8] conv3.bias" ("head only") */
  const char *spec;           /* the chosen scheme's sparse-update spec (JSON text) */
  const char *report;         /* the text report (also printed to log) */
  const char *html;           /* the HTML report (o->html), else NULL */
} pk_search_result;

/* PK_ERR_CHECK when no scheme fits (the message names the smallest budget that would),
 * PK_ERR_IO for the files, a compile's status for a bad model or data; interrupted:
 * PK_ERR_RUNTIME "interrupted", the cache written. */
pk_status pk_sparse_search(pk_ctx *ctx, const pk_search_options *o, pk_search_result *out);

#endif
