/* model_impl.h — libpockrt-private layout of a loaded model: the validated manifest
 * (tensors, kernels, plans, optimizer) and the executor state built from it at open. */
#ifndef PKRT_MODEL_IMPL_H
#define PKRT_MODEL_IMPL_H

#include <stdbool.h>

#include "pkrt.h"
#include "rt_file.h"
#include "pock/pkrt_gpu.h"
#include "pock/pockrt.h"

#define RT_MAX_DIMS 8

/* BUFFERS (batch norm's running stats, constant tables) is optional in a manifest (0). */
typedef enum rt_region { RT_REGION_ARENA, RT_REGION_PARAMS, RT_REGION_STATE, RT_REGION_IO,
                         RT_REGION_BUFFERS, RT_REGION_COUNT_ } rt_region;
/* Roles, in pk_graph's order (the manifest spells them as pk_role_name does). */
typedef enum rt_role { RT_ROLE_INPUT, RT_ROLE_LABEL, RT_ROLE_PARAM, RT_ROLE_ACTIVATION,
                       RT_ROLE_TEMP, RT_ROLE_GRADIENT, RT_ROLE_OPT_STATE, RT_ROLE_HYPER,
                       RT_ROLE_BUFFER, RT_ROLE_CONSTANT, RT_ROLE_FOLDED, RT_ROLE_COUNT_ } rt_role;
/* LOAD (optional; `pock compile`'s fold pass): computes the FOLDED tensors from the
 * weights, once before the first step and again after the weights change. */
typedef enum rt_plan_kind { RT_PLAN_TRAIN, RT_PLAN_EVAL, RT_PLAN_INFER, RT_PLAN_LOAD,
                            RT_PLAN_COUNT_ } rt_plan_kind;
typedef enum rt_sched_kind { RT_SCHED_CONSTANT, RT_SCHED_STEP, RT_SCHED_COSINE } rt_sched_kind;

RT_INTERNAL extern const char *const rt_role_names[RT_ROLE_COUNT_];
RT_INTERNAL extern const char *const rt_region_names[RT_REGION_COUNT_];
RT_INTERNAL extern const char *const rt_plan_names[RT_PLAN_COUNT_];

/* Inputs a model may have (io.inputs): as many as a dataset can name. */
#define RT_MAX_INPUTS PKRT_MAX_INPUTS

typedef struct rt_tensor {
  const char *name;
  rt_role role;
  pkrt_dtype dtype;
  int ndim;
  int64_t shape[RT_MAX_DIMS];
  int64_t strides[RT_MAX_DIMS]; /* elements; row-major unless the manifest gave strides */
  int64_t elem_offset;          /* elements from `offset` */
  rt_region region;
  int64_t offset;               /* bytes from the region start */
  int base;                     /* the tensor whose storage this one aliases, or -1 */
  bool view;                    /* has explicit strides */
  bool trainable;
  bool weight;                  /* saved in .pkw: a param with storage of its own */
  bool no_batch;                /* an input without the batch dim ("batch": false) */
  int64_t numel;
  int64_t lo, hi;               /* bytes of the region it may touch: [lo, hi) */
} rt_tensor;

/* Backend switching: an extern kernel the artifact calls ("externs"), opened by library
 * name at load (dlopen: in no DT_NEEDED); the only call known is cblas_sgemm's. */
typedef struct rt_extern {
  const char *library, *symbol, *signature;
  pkrt_extern *fn;              /* opened at load */
} rt_extern;
/* A kernel's sgemm call: A, B and C are its buffers a, b, c (dense f32), row-major. */
typedef struct rt_sgemm {
  int a, b, c;
  int32_t m, n, k, lda, ldb, ldc;
  bool trans_a, trans_b;
} rt_sgemm;
typedef struct rt_kernel {
  const char *name;
  int nbufs;
  int64_t workspace;
  const pkrt_kernel_desc *desc; /* set at open, once the object is loaded */
  int first_step_plan, first_step; /* the step that fixed its buffer signature, or -1 */
  int ext;                      /* index into externs: its steps call that (with sgemm), or -1 */
  rt_sgemm sgemm;
  pkrt_gpu_kernel_desc gdesc;   /* GPU artifacts: the launch ("nscalars", "grid", "block") */
} rt_kernel;

typedef struct rt_step {
  int kernel;
  int nbufs;
  int *tensors;                 /* nbufs tensor indices */
  int nscalars;
  int64_t *scalars;
  const char *node;             /* for messages; may be "" */
  pkrt_buffer *bufs;            /* built at open */
  pkrt_kernel_fn fn;
  pkrt_gpu_ptr *views;          /* GPU artifacts: the buffers as device views, built at open */
} rt_step;

typedef struct rt_plan {
  bool present;
  int n;
  rt_step *steps;
} rt_plan;

typedef struct rt_optimizer {
  const char *kind;             /* "sgd", "adam", "adamw" */
  double lr, beta1, beta2;
  rt_sched_kind sched;
  int64_t step_size, total_steps, warmup_steps;
  double gamma, min_lr;
  int64_t accum_steps;          /* >= 1: training steps per optimizer step */
} rt_optimizer;

typedef struct rt_manifest {
  int format;                   /* 1, or 2: several inputs, integer or batch-less ones; 3: GPU */
  const char *target;
  pkrt_gpu_api gpu_api;         /* "gpu" (format 3): the device's API; 0 for C targets */
  int64_t gpu_align;            /* the plan's buffer alignment; a device needing more is refused */
  const char *gpu_arch;         /* CUDA: the cubin's "sm_NN" */
  pkrt_gpu_binary_for gpu_binary; /* OpenCL: what "kernels.clbin" is for (device NULL: none) */
  bool train;                   /* mode "train" */
  pkrt_dtype dtype;
  int64_t batch, classes;
  int64_t region_bytes[RT_REGION_COUNT_];
  int64_t workspace_bytes;
  int ntensors;
  rt_tensor *tensors;
  /* io.*: tensor indices, -1 when absent */
  int input, target_t, row_weight, output, loss, hyper;
  /* io.inputs: every input the executor feeds, in the model file's order; inputs[0] ==
   * input. Without the key, the one io.input. */
  int ninputs;
  int inputs[RT_MAX_INPUTS];
  /* Classification artifacts label rows with integers: target is i64, (batch) or
   * (batch, T) for per-token labels (label_width = T), and has no row_weight: padding rows
   * get label -1, which the loss ignores. Old one-hot artifacts: int_labels false. */
  bool int_labels;
  int64_t label_width;          /* labels per row: 1, or T */
  bool has_ignore_index;        /* "ignore_index": a label value that is allowed and ignored */
  int64_t ignore_index;
  int rng;                      /* io.rng: i64 (seed, step) of dropout masks; -1 when absent */
  int nkernels;
  rt_kernel *kernels;
  int nexterns;
  rt_extern *externs;
  rt_optimizer opt;
  rt_plan plans[RT_PLAN_COUNT_];
  /* "cache" (`pock compile --cache-frozen`): the train plan's steps [0, cache_prefix) are
   * the frozen prefix (0: no section); cache_tensors[i] the results of it later steps
   * read, cache_per_row[i] when they hold one row per sample (dim 0 is the batch) */
  int cache_prefix;
  int ncache;
  int *cache_tensors;
  bool *cache_per_row;
  /* fingerprint.must_match */
  const char *arch;             /* NULL when absent */
  int nisa;
  const char **isa;
} rt_manifest;

/* Parses and validates manifest JSON (len bytes) into arena a: everything that can be
 * checked without the kernel object. weights_bytes is the size of the weights section.
 * Errors are PKRT_ERR_INPUT with "manifest: <key path>: <problem>". */
RT_INTERNAL
pkrt_status rt_manifest_parse(pkrt_ctx *rt, pkrt_arena *a, const char *json, size_t len,
                              size_t weights_bytes, rt_manifest *out);
/* This device's ISA features as /proc/cpuinfo text (AArch64: its hardware capabilities,
 * hwcap.c), malloc'd; NULL when they cannot be known (ctx left clear). */
RT_INTERNAL char *rt_device_features(pkrt_ctx *rt);
/* Checks must_match against this device: the same arch, every ISA feature present. */
RT_INTERNAL pkrt_status rt_fingerprint_check(pkrt_ctx *rt, const rt_manifest *mf);
/* The same against a described device: machine is `uname -m` (NULL: not checked), cpuinfo
 * the text of /proc/cpuinfo (NULL: features not checked). Errors name the must_match key. */
RT_INTERNAL pkrt_status rt_fingerprint_match(pkrt_ctx *rt, const rt_manifest *mf,
                                             const char *machine, const char *cpuinfo);
/* What pkrt_model_open checks before it loads the kernel object (artifact_check.c): the
 * manifest, kernels and weights sections exist, the manifest is valid (into arena a) and
 * agrees with the weights section's size, and the fingerprint matches (o may be NULL: this
 * device). The sections are returned for the loader. */
RT_INTERNAL pkrt_status rt_artifact_check(pkrt_ctx *rt, pkrt_arena *a, const char *what,
                                          const pkrt_artifact *art,
                                          const pkrt_check_options *o, rt_manifest *mf,
                                          const pkrt_section **man, const pkrt_section **ker,
                                          const pkrt_section **wts);

struct pkrt_model {
  pkrt_ctx *rt;
  pkrt_arena *arena;            /* everything with the model's lifetime */
  pkrt_module *module;
  rt_manifest mf;
  unsigned char *region[RT_REGION_COUNT_];
  unsigned char *region_owned[RT_REGION_COUNT_]; /* what close frees (not the caller's) */
  void *workspace;
  unsigned char *workspace_owned;
  int64_t steps;                /* training steps taken */
  int64_t seed;                 /* dropout's seed, written to io.rng (pkrt_model_set_seed) */
  double lr;                    /* base lr */
  int64_t valid;                /* rows of the current batch that are real */
  int64_t features;             /* input elements per row */
  uint8_t manifest_sha[PKRT_SHA256_BYTES]; /* the model's identity, for checkpoints */
  struct rt_gpu_model *gpu;     /* GPU artifacts (model_gpu.c); NULL: kernels run on the host */
  bool fold_stale;              /* the load plan must run before the next step: set at open
                                   and whenever the weights may have changed */
};

/* model.c: a step of an sgemm kernel (C or cuBLAS extern): A, B, C must be dense f32
 * tensors of the call's sizes. */
RT_INTERNAL pkrt_status rt_check_sgemm_step(pkrt_model *m, int p, int s);

/* ---- model_gpu.c: GPU artifacts (docs/runtime.md, "GPU artifacts") ----
 * The host regions stay as the mirror the API hands out (inputs, labels, output, weights);
 * the device holds one arena with every region at the plan's offsets. */
typedef struct rt_gpu_model rt_gpu_model;
/* Opens the device, makes the arena, uploads the host regions, loads the image (ker, and
 * CUDA's PTX in "kernels.ptx" when art has it) and builds every step's views. */
RT_INTERNAL pkrt_status rt_gpu_model_open(pkrt_model *m, const pkrt_artifact *art,
                                          const pkrt_section *ker);
RT_INTERNAL void rt_gpu_model_close(pkrt_model *m);
/* Steps [from, to) of plan p on the device: from 0, the io region, hyper and rng go up
 * first; to the end, the loss and output come back. */
RT_INTERNAL pkrt_status rt_gpu_run_steps(pkrt_model *m, rt_plan_kind p, int from, int to);
/* Copies the persistent regions (params, state, buffers) to the device (up) or back. */
RT_INTERNAL pkrt_status rt_gpu_sync_weights(pkrt_model *m, bool up);
/* Copies tensor t's bytes from the device into the host mirror. */
RT_INTERNAL pkrt_status rt_gpu_sync_tensor(pkrt_model *m, int t);

/* A tensor's first element (data + offset in elements gives element 0). */
static inline unsigned char *rt_tensor_base(const pkrt_model *m, const rt_tensor *t) {
  return m->region[t->region] + t->offset;
}
/* lr_t for optimizer step t (1, 2, ...) from the schedule: linear warmup from 0 over
 * warmup_steps (transformers' get_*_schedule_with_warmup: optimizer step t uses
 * base * (t - 1) / warmup_steps), then the schedule over the steps after the warmup. */
RT_INTERNAL double rt_lr_at(const rt_optimizer *o, double base_lr, int64_t t);
/* Runs one plan's steps; errors name the plan, step, node and kernel. */
RT_INTERNAL pkrt_status rt_plan_run(pkrt_model *m, rt_plan_kind p);
/* Steps [from, to) of plan p (present); first rt_model_fold. */
RT_INTERNAL pkrt_status rt_plan_run_steps(pkrt_model *m, rt_plan_kind p, int from, int to);
/* The weights may have changed (open, loaded, restored, handed out writable): the load
 * plan runs again before the next step. */
RT_INTERNAL void rt_model_weights_changed(pkrt_model *m);
/* Runs the load plan if the folded results are stale. It uses the arena as scratch, so
 * it runs before anything is put there for a step (the frozen-prefix cache's rows). */
RT_INTERNAL pkrt_status rt_model_fold(pkrt_model *m);
/* A training step in parts (pkrt_model_train_step is begin, the train plan, end; the
 * frozen-prefix cache runs the plan in two ranges): begin writes H and the dropout step,
 * end counts the step and reads the loss. */
RT_INTERNAL void rt_train_begin(pkrt_model *m);
RT_INTERNAL void rt_train_end(pkrt_model *m, double *loss);

/* ---- frozen_cache.c: `--cache-frozen` (docs/runtime.md, "Caching the frozen prefix") ----
 * The artifact's "cache" section says the train plan's first cache_prefix steps are the
 * frozen prefix and which of its results the later steps read. The cache keeps those per
 * dataset row (and once for results that do not depend on the rows); a step whose rows
 * are all cached copies them in and runs only the rest of the plan. */
typedef struct rt_frozen_cache rt_frozen_cache;
/* For a dataset of `rows` rows, within budget bytes (0: PKRT_CACHE_DEFAULT_BUDGET). Refuses
 * an artifact without the section and a cache over the budget, naming both sizes. */
RT_INTERNAL pkrt_status rt_frozen_cache_new(pkrt_model *m, int64_t rows, int64_t budget,
                                            rt_frozen_cache **out);
/* One training step on rows idx[first .. first + valid) (idx NULL: first.. in order), fed
 * already: as pkrt_model_train_step, the prefix taken from the cache or computed and kept. */
RT_INTERNAL pkrt_status rt_frozen_cache_step(rt_frozen_cache *c, const int64_t *idx,
                                             int64_t first, int64_t valid, double *loss);
RT_INTERNAL int64_t rt_frozen_cache_bytes(const rt_frozen_cache *c);
RT_INTERNAL int64_t rt_frozen_cache_hits(const rt_frozen_cache *c); /* steps from the cache */
RT_INTERNAL void rt_frozen_cache_free(rt_frozen_cache *c);

#endif
