/* pk_search.h — the tuner's search: config spaces (knobs per task class that generate a
 * schedule trace, plus extern kernels), loop features of a candidate, the cost model, the
 * tuners (random, grid, evo) and the budget split across the tasks of a model.
 * docs/tuning.md describes every knob, feature and rule.
 *
 * Usage (what `pock tune` does for one task):
 *   pk_space *sp;  pk_space_new(ctx, &task, &sp);          // knobs for task.cls
 *   printf("%llu configs\n", (unsigned long long)pk_space_size(sp));
 *   pk_tuner *t = pk_tuner_new(ctx, PK_TUNER_EVO, &task, sp, seed);
 *   pk_tuner_seed_history(t, old_records, n_old);          // --resume: never re-proposed
 *   while (!pk_tuner_done(t) && trials < budget) {
 *     pk_candidate c[16]; int got;
 *     pk_tuner_next_batch(t, 16, c, &got);                 // legal, never seen before
 *     if (!got) break;                                     // space exhausted
 *     ... measure c[0..got), commit records ...
 *     for (i...) pk_tuner_update(t, &c[i], &meas[i]);
 *   }
 *   pk_tuner_free(t); pk_space_free(sp);
 *
 * A config is a vector of knob value indices; pk_space_build turns one into a candidate
 * (canonical trace JSON, canonical knobs JSON, trace hash) or refuses it with
 * PK_ERR_SCHEDULE when the knobs make an illegal schedule — the tuners count and skip
 * those. Everything random takes an explicit pk_rng: there is no global state.
 */
#ifndef PK_SEARCH_H
#define PK_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "pk_autotune.h"
#include "pock/pkrt_gpu.h" /* PKRT_CUBLAS_*: the CUDA extern */

/* ---- random numbers (splitmix64): the state lives in whoever draws ---- */
typedef struct pk_rng {
  uint64_t state;
} pk_rng;

void pk_rng_seed(pk_rng *r, uint64_t seed);
uint64_t pk_rng_next(pk_rng *r);
uint32_t pk_rng_below(pk_rng *r, uint32_t n); /* uniform in [0, n); 0 when n == 0 */
double pk_rng_unit(pk_rng *r);                /* uniform in [0, 1) */

/* ---- config spaces ---- */
#define PK_SPACE_MAX_KNOBS 16
#define PK_SPACE_MAX_VALUES 32

/* One knob: a name (the key in knobs JSON) and its finite list of values. What a value
 * means is per knob (docs/tuning.md); 0 means "off" for on/off knobs. */
typedef struct pk_knob {
  const char *name;
  int nvalues;
  int64_t values[PK_SPACE_MAX_VALUES];
  bool added_later; /* older records' knobs lack it: they read as values[0], the old behaviour */
} pk_knob;

/* A point of the space: idx[i] indexes knob i's values. Plain data: copy, compare freely. */
typedef struct pk_config {
  int n;
  int idx[PK_SPACE_MAX_KNOBS];
} pk_config;

typedef struct pk_space_options {
  bool allow_parallel; /* offer parallel loops (default false: the tuner measures on one
                          thread, where a parallel loop only costs) */
  int vector_bytes;    /* widest hardware vector the code is built for; 0: the task's
                          target's (pk_task_target) */
  int64_t l2_bytes;    /* the L2 cache a core has, which the presets order their tile loops
                          by; 0: the task's target's (0 there too: not known) */
} pk_space_options;

void pk_space_options_default(pk_space_options *o);

typedef struct pk_space pk_space;

/* The space of task->cls for task->prog. Keeps task (it must outlive the space); results
 * and messages go to ctx. PK_ERR_UNSUPPORTED when the program has nothing to tune. */
pk_status pk_space_new(pk_ctx *ctx, const pk_task *task, pk_space **out);
pk_status pk_space_new_opts(pk_ctx *ctx, const pk_task *task, const pk_space_options *opts,
                            pk_space **out);
void pk_space_free(pk_space *sp); /* NULL is ok */

const pk_task *pk_space_task(const pk_space *sp);
int pk_space_nknobs(const pk_space *sp);
const pk_knob *pk_space_knob(const pk_space *sp, int i);
int pk_space_knob_index(const pk_space *sp, const char *name); /* -1 when absent */
/* Number of knob combinations (legal or not), saturating at UINT64_MAX. */
uint64_t pk_space_size(const pk_space *sp);

/* Mixed radix, knob 0 varying fastest: index in [0, size) <-> config. */
void pk_space_config_at(const pk_space *sp, uint64_t index, pk_config *out);
uint64_t pk_space_index_of(const pk_space *sp, const pk_config *c);
void pk_space_sample(const pk_space *sp, pk_rng *rng, pk_config *out);
/* Changes one knob (sometimes two), to a neighbouring value more often than a far one. */
void pk_space_mutate(const pk_space *sp, const pk_config *in, pk_rng *rng, pk_config *out);
/* Each knob from a or b at random (uniform crossover). */
void pk_space_crossover(const pk_space *sp, const pk_config *a, const pk_config *b, pk_rng *rng,
                        pk_config *out);
/* The config closest to the class's hand schedule (bench/hand_schedules.c for matmul and
 * conv); false when the class has none. */
bool pk_space_preset(const pk_space *sp, pk_config *out);
/* The schedule a kernel gets without a tuning record (docs/tuning.md, "Default schedules"):
 * its space's preset, built in ctx, when the task has a space with a preset that schedules;
 * else NULL, the default loop nest, and *why (may be NULL) says why. Never fails: a task
 * that cannot be scheduled falls back, and ctx's error is left clear. */
pk_schedule *pk_space_default_schedule(pk_ctx *ctx, const pk_task *task, const char **why);
/* The same choice as a candidate (in ctx): what tuning measures first as the task's
 * baseline and reports call "default" — the preset's, else the trace with no steps. */
void pk_task_baseline(pk_ctx *ctx, const pk_task *task, pk_candidate *out);
#define PK_EMPTY_TRACE "{\"version\":1,\"steps\":[]}" /* the default loop nest */
bool pk_config_equal(const pk_config *a, const pk_config *b);
uint64_t pk_config_hash(const pk_config *c);

/* The schedule for a config, built in ctx (any context: the tuner uses a scratch one).
 * PK_ERR_SCHEDULE, message in ctx, when a step is refused (lowering is not tried here:
 * pk_space_build does that too). */
pk_status pk_space_schedule(const pk_space *sp, pk_ctx *ctx, const pk_config *c,
                            pk_schedule **out);
/* The candidate for a config: trace, knobs and trace hash in the space's ctx. Checks that
 * the schedule lowers. PK_ERR_SCHEDULE (message in the space's ctx) when it is illegal. */
pk_status pk_space_build(pk_space *sp, const pk_config *c, pk_candidate *out);
/* Canonical knobs JSON: {"name":value,...}, keys sorted, no whitespace. */
char *pk_space_knobs_json(pk_ctx *ctx, const pk_space *sp, const pk_config *c);
/* The config whose knobs JSON this is (another space of the same class and shape gives
 * the same names); PK_ERR_CHECK when a knob is missing (unless added_later), a value is not
 * in its list, or a name is not a knob. */
pk_status pk_space_config_from_knobs(const pk_space *sp, const char *knobs_json, pk_config *out);

/* Extern candidates of the task (PK_CAND_EXTERN), measured like any config. */
int pk_space_nexterns(const pk_space *sp);
const pk_candidate *pk_space_extern(const pk_space *sp, int i);

/* ---- cblas_sgemm as an extern kernel ----
 * The candidate's knobs JSON carries the call, e.g. for C[32,256] = A[32,784]·B[256,784]^T:
 *   {"a":0,"b":1,"c":2,"extern":"sgemm","k":784,"lda":784,"ldb":784,"ldc":256,"m":32,
 *    "n":256,"trans_a":0,"trans_b":1}
 * a, b, c are tensor ids (kernel parameters); the call is row-major,
 * cblas_sgemm(101, trans_a ? 112 : 111, trans_b ? 112 : 111, m, n, k, 1.0f, A, lda, B, ldb,
 *             0.0f, C, ldc). */
#define PK_SGEMM_LIB "libopenblas.so.0"
#define PK_SGEMM_SYM PKRT_SGEMM_SYM             /* runtime/pkrt.h: what artifacts call */
#define PK_SGEMM_SIGNATURE PKRT_SGEMM_SIGNATURE
/* CUDA targets: cuBLAS's sgemm on device memory (runtime/gpu_cublas.c); the library is
 * the list of sonames the runtime tries. The GPU measurer checks and times this candidate
 * with pk_gpu_cublas_check_timed (below), which calls it as artifacts do
 * (pkrt_gpu_blas_sgemm). */
#define PK_CUBLAS_LIB PKRT_CUBLAS_LIBRARIES
#define PK_CUBLAS_SYM PKRT_CUBLAS_SGEMM_SYM
#define PK_CUBLAS_SIGNATURE PKRT_CUBLAS_SGEMM_SIGNATURE

typedef struct pk_sgemm_shape {
  int a, b, c;           /* tensor ids of A, B and C */
  bool trans_a, trans_b; /* A stored (K, M); B stored (N, K) */
  int32_t m, n, k, lda, ldb, ldc;
} pk_sgemm_shape;

/* C = sum_k A[.,.] * B[.,.]: 2-D f32, placeholders read at bare axes, the reduction over
 * the whole contracted dimension, every extent within int32. */
bool pk_match_sgemm_compute(const pk_te_tensor *c, pk_sgemm_shape *out);
/* The program is exactly one such compute (sgemm must compute every output). */
bool pk_match_sgemm(const pk_te_program *prog, pk_sgemm_shape *out);
/* Reads the shape back from an extern candidate's knobs JSON; PK_ERR_CHECK when malformed. */
pk_status pk_sgemm_shape_from_knobs(pk_ctx *ctx, const char *knobs_json, pk_sgemm_shape *out);
/* The GPU measurer's one check and timing of a cuBLAS candidate on the CUDA device g
 * (opened with rt), the way it checks and times a generated kernel (pk_gpu_device_check_op,
 * codegen/pk_gpu.h): prog's tensors in one device allocation, inputs from ref (NULL: filled
 * from seed and interpreted here), C filled with NaN; cuBLAS loaded from library (a
 * space-separated list of sonames, the first that loads; NULL: PK_CUBLAS_LIB) with a
 * handle on g's stream and called once as artifacts call it, with shape (from
 * pk_match_sgemm of prog); C compared with the interpreter's; then, timing not NULL, calls
 * timed with device events until they add up to min_ns and number at least 5. Everything
 * is freed before it returns. PK_ERR_MISMATCH names the element; PK_ERR_RUNTIME a device
 * or cuBLAS failure (a missing libcublas named); PK_ERR_CHECK a shape whose A, B, C are not
 * f32 inputs and a compute of prog. */
pk_status pk_gpu_cublas_check_timed(pk_ctx *ctx, pkrt_ctx *rt, pkrt_gpu *g,
                                    const pk_te_program *prog, const char *library,
                                    const pk_sgemm_shape *shape, uint64_t seed,
                                    const pk_te_ref *ref, int64_t min_ns,
                                    pk_kernel_check_result *res, pk_timing *timing);

/* ---- loop features (what the cost model sees; the database stores them) ----
 * PK_FEATURE_LOOP_COUNT features of the lowered loop nest (loops, vector lanes, unrolling,
 * accesses by stride, footprints, guards, ...), then one per knob: log2(1 + |value|) in
 * the knobs JSON's key order, zero-padded to PK_SPACE_MAX_KNOBS. An extern candidate has
 * feature 0 ("extern") set and zeros elsewhere. */
#define PK_FEATURE_LOOP_COUNT 36
#define PK_FEATURE_COUNT (PK_FEATURE_LOOP_COUNT + PK_SPACE_MAX_KNOBS)

const char *pk_feature_name(int i); /* "log2_flops", ..., "knob3"; "?" out of range */
/* Writes min(max, PK_FEATURE_COUNT) features; replays the candidate's trace in ctx.
 * PK_ERR_SCHEDULE / PK_ERR_SYNTAX when the trace does not replay on task->prog. */
pk_status pk_features_of(pk_ctx *ctx, const pk_task *task, const pk_candidate *cand,
                         double *out, int max);
/* The features of an already lowered kernel (loop part only: PK_FEATURE_LOOP_COUNT). */
void pk_features_of_lfunc(pk_ctx *ctx, const pk_task *task, const pk_lfunc *f, double *out);
/* Knob part from a knobs JSON (PK_SPACE_MAX_KNOBS values). */
void pk_features_of_knobs(const char *knobs_json, double *out);
/* JSON array (9 significant digits) for pk_record.features, and back. */
char *pk_features_json(pk_ctx *ctx, const double *f, int n);
int pk_features_from_json(const char *json, double *out, int max); /* count; -1 malformed */

/* ---- the cost model: small gradient-boosted regression trees ---- */
typedef struct pk_cost_model pk_cost_model;

typedef struct pk_cost_model_options {
  int trees;        /* boosting rounds (default 60) */
  int depth;        /* tree depth (default 4) */
  double shrinkage; /* learning rate (default 0.2) */
  int min_leaf;     /* fewest rows in a leaf (default 2) */
} pk_cost_model_options;

void pk_cost_model_options_default(pk_cost_model_options *o);
/* opts NULL: the defaults. Owns malloc'd memory: pk_cost_model_free. */
pk_cost_model *pk_cost_model_new(int nfeatures, const pk_cost_model_options *opts);
void pk_cost_model_free(pk_cost_model *m);
/* Refits from scratch on n rows of x (row-major, nfeatures each). n == 0 predicts 0. */
void pk_cost_model_fit(pk_cost_model *m, const double *x, const double *y, int n);
double pk_cost_model_predict(const pk_cost_model *m, const double *x);

/* ---- tuners ---- */
typedef enum pk_tuner_kind { PK_TUNER_RANDOM, PK_TUNER_GRID, PK_TUNER_EVO } pk_tuner_kind;

const char *pk_tuner_kind_name(pk_tuner_kind k); /* "random", "grid", "evo" */
bool pk_tuner_kind_from_name(const char *name, pk_tuner_kind *out);

typedef struct pk_tuner_options {
  int patience;      /* early stop after this many updates without a > 0.5 % better
                        result; 0 (default): never */
  bool externs;      /* propose the space's extern candidates first (default true) */
  double epsilon;    /* evo: share of each batch drawn at random (default 0.1) */
  int population;    /* evo: configs kept per generation (default 128) */
  int generations;   /* evo: rounds of mutation + crossover per batch (default 4) */
  int pool;          /* evo: extra random configs ranked per batch (default 256) */
  int warmup;        /* evo: measured configs before the model is used (default 16) */
  bool preset;       /* evo: start from the class's hand-schedule config (default true) */
} pk_tuner_options;

void pk_tuner_options_default(pk_tuner_options *o);

typedef struct pk_tuner pk_tuner;

/* The tuner keeps task and space (both must outlive it); candidates it hands out live in
 * ctx. opts NULL: the defaults. */
pk_tuner *pk_tuner_new(pk_ctx *ctx, pk_tuner_kind kind, const pk_task *task, pk_space *space,
                       uint64_t seed);
pk_tuner *pk_tuner_new_opts(pk_ctx *ctx, pk_tuner_kind kind, const pk_task *task,
                            pk_space *space, uint64_t seed, const pk_tuner_options *opts);
void pk_tuner_free(pk_tuner *t); /* NULL is ok */

/* Up to n new candidates: legal, none proposed or seeded before. *got < n only when the
 * tuner found no more (grid: end of the space; others: a long run of illegal or already
 * seen configs). Always PK_OK today; the status is for future tuners. */
pk_status pk_tuner_next_batch(pk_tuner *t, int n, pk_candidate *out, int *got);
/* One measured candidate (any proposed one, in any order). */
void pk_tuner_update(pk_tuner *t, const pk_candidate *c, const pk_measurement *m);
/* Records measured before (this task, --resume): never proposed again, and the model of
 * evo trains on them. Records of other workloads are ignored. */
void pk_tuner_seed_history(pk_tuner *t, const pk_record *records, int n);
/* Records of other tasks of the same class, or of this task on other targets (their
 * features JSON; never this task's on its own target): evo's model also trains on them,
 * each (workload, target)'s log GFLOP/s centred on its own mean. */
void pk_tuner_add_transfer(pk_tuner *t, const pk_record *records, int n);
/* Configs to propose first, in order, before the tuner's own (after the externs): the
 * best configs of the nearest shapes tuned before (transfer). Illegal or already seen
 * ones are skipped. Copied; n <= 0 clears them. */
void pk_tuner_seed_configs(pk_tuner *t, const pk_config *c, int n);
/* Early stop (patience reached) or nothing left to propose. */
bool pk_tuner_done(const pk_tuner *t);

typedef struct pk_tuner_stats {
  int64_t proposed;        /* candidates handed out */
  int64_t updates;         /* measurements received (seeded history not counted) */
  int64_t illegal;         /* configs refused by the schedule (skipped, never measured) */
  int64_t duplicates;      /* configs whose trace was already seen (skipped) */
  int64_t since_improvement;
  double best_gflops;      /* 0 until a measurement succeeded */
  const char *best_trace_hash;
  bool exhausted;
} pk_tuner_stats;

void pk_tuner_get_stats(const pk_tuner *t, pk_tuner_stats *out);

/* ---- splitting a trial budget across the tasks of a model ----
 * Each call to pk_budget_next names the task whose next batch is expected to shorten the
 * training step most (docs/tuning.md, "Budget"): every task first gets one batch (largest
 * weight × FLOPs first); then the largest
 *   weight × best_ns × max(recent relative gain per trial, 0.5 / (1 + trials / batch))
 * wins, among tasks below their trial cap and not done. */
typedef struct pk_budget pk_budget;

/* trials_per_task: each task's cap (--trials). Keeps tasks. */
pk_budget *pk_budget_new(const pk_task *tasks, int ntasks, int64_t trials_per_task, int batch);
void pk_budget_free(pk_budget *b);
int pk_budget_next(pk_budget *b); /* task index, or -1 when every task is at its cap or done */
/* After a batch of task i: its trials so far, its best GFLOP/s (0: none yet), done (early
 * stopped or exhausted). */
void pk_budget_report(pk_budget *b, int task, int64_t trials, double best_gflops, bool done);
/* A static split of total trials by weight × FLOPs (at least min_each per task). */
void pk_budget_split(const pk_task *tasks, int ntasks, int64_t total, int64_t min_each,
                     int64_t *out);

#endif
