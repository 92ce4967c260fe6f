/* pk_autotune.h — the autotuner's shared vocabulary: tuning tasks, target fingerprints,
 * candidates (a schedule trace or an extern kernel), measurements, and tuning records.
 * The database (pk_tunedb.h), the search (pk_search.h) and the measurer (pk_measurer.h)
 * all speak these types.
 *
 * Usage (what `pock tune` does):
 *   pk_task t;  pk_task_from_program(ctx, prog, "c", &t);        // workload key + name
 *   pk_target_fp fp; pk_target_fp_detect(ctx, "c", &fp);        // this device
 *   pk_space *sp; pk_space_new(ctx, &t, &sp);                    // knobs for its op class
 *   ... search proposes pk_candidate's, the measurer times them, each result becomes a
 *   pk_record committed to the database in its own transaction ...
 */
#ifndef PK_AUTOTUNE_H
#define PK_AUTOTUNE_H

#include "pk_codegen.h"
#include "pk_measure.h"
#include "pk_schedule.h"

#define PK_AUTOTUNE_VERSION 1

/* ---- tasks ---- */
typedef enum pk_task_class {
  PK_TASK_MATMUL,     /* one reduction: sum of a product of two reads (matmul, batched, dense) */
  PK_TASK_CONV,       /* a sum of products over >= 3 reduce axes (conv-like) */
  PK_TASK_REDUCTION,  /* any other reduction */
  PK_TASK_INJECTIVE   /* no reduction */
} pk_task_class;

const char *pk_task_class_name(pk_task_class c);

/* One kernel to tune: (canonical TE text, shapes and dtypes in it, target). */
typedef struct pk_task {
  const pk_te_program *prog;
  const char *canonical;   /* pk_te_print(prog) */
  const char *workload;    /* hex SHA-256 of canonical: the database key */
  const char *name;        /* readable: "matmul_512x128x256_f32" */
  const char *target;      /* target string: "c", "c -march=znver3", later "cuda -arch=sm_90" */
  const pk_target *desc;   /* its description (pk_task_for_target); NULL: parsed when needed */
  pk_task_class cls;
  double flops;            /* per call (pk_te_flops) */
  double weight;           /* calls per training step (1 for a lone TE): budget share */
} pk_task;

pk_status pk_task_from_program(pk_ctx *ctx, const pk_te_program *prog, const char *target,
                               pk_task *out);
/* The same for a parsed target (which must outlive the task): spaces and presets size
 * their vectors by it. */
pk_status pk_task_for_target(pk_ctx *ctx, const pk_te_program *prog, const pk_target *t,
                             pk_task *out);
/* The task's target description: desc, else its target string parsed (with $CC). */
pk_status pk_task_target(pk_ctx *ctx, const pk_task *task, const pk_target **out);

/* ---- target fingerprints ----
 * must-match: what the generated code relies on (ISA features for C; for GPU targets the
 * API and device version, CUDA's arch and driver: docs/tuning-db.md);
 * informative: what explains timings but does not change correctness. */
typedef struct pk_target_fp {
  const char *target;        /* the target string */
  const char *must_match;    /* canonical JSON object, e.g. {"arch":"x86_64","isa":["avx2","fma"]} */
  const char *informative;   /* canonical JSON object: cpu model, cores, MHz, GPU name, driver */
  const char *key;           /* hex SHA-256 of target + must_match: records' target key */
} pk_target_fp;

/* The fingerprint of a target string (pk_target_parse with $CC), or of a description. */
pk_status pk_target_fp_detect(pk_ctx *ctx, const char *target, pk_target_fp *out);
pk_status pk_target_fp_of(pk_ctx *ctx, const pk_target *t, pk_target_fp *out);

/* ---- candidates ---- */
typedef enum pk_cand_kind { PK_CAND_SCHEDULE, PK_CAND_EXTERN } pk_cand_kind;

typedef struct pk_candidate {
  pk_cand_kind kind;
  const char *trace;      /* SCHEDULE: canonical JSON trace (pk_sched_to_json) */
  const char *knobs;      /* canonical JSON object of the knob values that produced it */
  const char *extern_lib; /* EXTERN: "libopenblas.so.0" */
  const char *extern_sym; /* EXTERN: "cblas_sgemm" */
  const char *extern_sig; /* EXTERN: pkrt_extern signature text */
  const char *trace_hash; /* hex SHA-256 of trace (or of "extern:" lib sym sig) */
} pk_candidate;

/* ---- measurements ---- */
typedef enum pk_meas_status {
  PK_MEAS_OK = 0,
  PK_MEAS_ILLEGAL,       /* the schedule was refused (PK_ERR_SCHEDULE) */
  PK_MEAS_COMPILE_ERROR, /* lowering, codegen or the host compiler failed */
  PK_MEAS_CRASH,         /* the measuring process died on a signal */
  PK_MEAS_TIMEOUT,       /* ran past the time limit and was killed */
  PK_MEAS_WRONG,         /* output differs from the interpreter */
  PK_MEAS_RUNTIME_ERROR  /* kernel returned non-zero, or loading failed */
} pk_meas_status;

const char *pk_meas_status_name(pk_meas_status s);

typedef struct pk_measurement {
  pk_meas_status status;
  pk_timing timing;          /* OK only */
  double gflops;             /* OK only: task flops / median */
  const char *error;         /* short message for failures */
  const char *launch;        /* GPU targets, once the kernel was prepared: its launch, JSON
                                {"block":[x,y,z],"grid":[x,y,z]}; NULL otherwise */
} pk_measurement;

/* ---- records: one measured candidate, as stored ---- */
/* A leading candidate re-timed in interleaved rounds beside the task's other leaders, in
 * a fresh process (pk_measurer_confirm): a timing one lucky sample cannot make. */
typedef struct pk_confirmation {
  double median_ns; /* median over the rounds of each round's median */
  double min_ns;    /* the fastest round */
  int rounds;       /* 0: not confirmed */
} pk_confirmation;

typedef struct pk_record {
  const char *id;            /* content hash: workload, target key, trace hash, compiler,
                                codegen version (stable across merge) */
  const char *workload;
  const char *target_key;
  pk_candidate cand;
  pk_measurement meas;
  int64_t trial;             /* trial number within its tuning run */
  int64_t run_id;            /* the tuning run (database row) */
  const char *compiler;      /* compiler + version */
  const char *flags;
  int codegen_version;
  const char *pock_version;
  int64_t time_unix;
  const char *host;
  const char *features;      /* JSON array of the cost model's features for this candidate */
  const char *measure_settings; /* JSON: repeats, min_ns, pinned cpu, timeout */
  pk_confirmation confirmed; /* the re-timing beside the task's other leaders (rounds 0: none) */
  /* GPU records (NULL for C): the target's arch ("sm_87", "opencl") and the timer ("device
   * events"); the launch is meas.launch (column launch_dims) */
  const char *arch, *timing_method;
} pk_record;

/* Fills r->id from the content fields (call after filling them). */
void pk_record_make_id(pk_ctx *ctx, pk_record *r);

#endif
