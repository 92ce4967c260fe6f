/* pk_tune.h — the tuning loop as one call: tasks on a target, measured on this device into
 * a tuning database. Each task's default schedule is measured first (the report's
 * baseline), then the tuner's batches, the next batch going to the task expected to
 * shorten the step most (pk_budget); --trials per task or a total split by calls x FLOPs;
 * --resume counts the records already there; patience and a time budget stop early. Every
 * record, good or failed, is committed in its own transaction as soon as it is measured,
 * so a killed run keeps what it measured. `pock tune FILE`, `pock tune MODEL` (and a remote
 * tuner) call this; they only parse options and print.
 *
 * Usage:
 *   pk_tune_options o; pk_tune_options_default(&o);
 *   o.db = "tune.db"; o.trials = 64;
 *   pk_tune_input in = {.n = 1, .progs = &prog};
 *   pk_tune_report rep;
 *   pk_status s = pk_tune(ctx, &o, &in, &rep);   // forks the measurer first: call it before
 *                                                // any thread or database is opened
 *   rep.tasks[0].best.meas.gflops ...
 */
#ifndef PK_TUNE_H
#define PK_TUNE_H

#include <signal.h>

#include "pk_measurer.h"
#include "pk_search.h"
#include "pk_tunedb.h"

/* What one task did (filled as the run goes; best at the end). */
typedef struct pk_tune_task_report {
  pk_task task;
  const char *label;       /* "matmul(fc)" for a model's kernel, else the task name */
  uint64_t space_size;     /* configs in its space; 0: nothing to tune beyond the default */
  int64_t cap, done;       /* trials allowed and counted (old ones too with resume) */
  int64_t committed, failed;
  double best_gflops;      /* the best so far, old records included */
  double default_gflops;   /* the default schedule's (0: not measured, in this run or before) */
  int confirmed;           /* leaders re-timed side by side at the end of this run */
  int transfer_records;    /* other shapes' records its cost model learnt from (transfer) */
  int transfer_shapes;     /* how many other workloads those are of */
  int transfer_same;       /* of which the same program at other sizes (seeds come from these) */
  int transfer_targets;    /* other targets whose records of this very workload are among them */
  int transfer_seeds;      /* nearest shapes' best configs proposed first */
  bool has_best;           /* at the end: best holds the database's best for the target
                              (confirmed records first: pk_db_best) */
  pk_record best;
} pk_tune_task_report;

typedef struct pk_tune_report {
  pk_target_fp fp;         /* the records' target */
  int ntasks;
  pk_tune_task_report *tasks;
  int64_t existing;        /* the most records any task had before the run */
  int64_t committed, failed;
  bool interrupted;        /* *stop was set */
} pk_tune_report;

typedef struct pk_tune_options {
  const char *db;          /* the database (created when missing) */
  const pk_target *target; /* NULL: "c" (this machine) */
  const char *tuner;       /* "evo" (default), "random", "grid" */
  int64_t trials;          /* per task (default 64); with resume, the total per task */
  int64_t total_trials;    /* > 0: for all tasks together, split by calls x FLOPs */
  int64_t batch;           /* candidates built and measured per batch (default 16) */
  int64_t patience;        /* stop a task after this many batches without a better result */
  int64_t seed;
  double time_budget_s;    /* > 0: stop after this long, counted from start_ns: nothing is
                              built or measured past it (the measurer's deadline_ns) */
  int64_t start_ns;        /* pkrt_now_ns() when the budget's clock started (0: pk_tune's
                              entry); the CLI passes its own start, so loading counts */
  int confirm_top;         /* at the end, each task that gained records has its best this
                              many (default 3; 0: none, 1: the best alone) re-timed side by
                              side (pk_measurer_confirm), and db best prefers those timings;
                              with a time budget, the last 15 % of it is kept for this */
  int confirm_rounds;      /* interleaved rounds of the re-timing (default 5) */
  bool transfer;           /* learn from and start at the nearest shapes tuned on this
                              target (pk_tune_transfer; default true) */
  bool resume;
  bool allow_untunable;    /* a task with no space gets only its default measured (models);
                              otherwise it is an error, as for a lone TE file */
  pk_measure_settings measure; /* timeouts, min time, seed, compiler; callbacks are the loop's */
  volatile sig_atomic_t *stop; /* set (e.g. by a signal handler): stop after the batch at hand */
  /* Output, all optional: the plan once the tasks are prepared (before any measuring),
   * and a line after each batch that measured something (final: the run is over). */
  void (*on_plan)(void *arg, const pk_tune_report *r);
  void (*on_progress)(void *arg, const pk_tune_report *r, int task, double elapsed_s, bool final);
  void *arg;
} pk_tune_options;

void pk_tune_options_default(pk_tune_options *o);

/* The programs to tune, with their calls per step (NULL: 1 each) and labels (NULL: the
 * task names). */
typedef struct pk_tune_input {
  int n;
  pk_te_program *const *progs;
  const double *calls;
  const char *const *labels;
} pk_tune_input;

/* Transfer for one task about to be tuned: the tuner's cost model also learns from the
 * records of the other workloads of the task's class on fp's target, and of the task's
 * own workload on the other CPU targets of its arch (pk_tuner_add_transfer, each
 * (workload, target) centred on its own mean),
 * and the best configs of the TRANSFER_SEEDS nearest shapes of the same program (canonical
 * TE text equal but for its numbers: an NT matmul is not an NN one; distance by the
 * workload names' dims, log; the task itself on another target: distance 0), mapped into
 * this space knob by knob, are proposed first
 * (pk_tuner_seed_configs). rep (may be NULL): its transfer_* counts are set. */
pk_status pk_tune_transfer(pk_tunedb *db, const pk_task *task, const pk_target_fp *fp,
                           pk_space *sp, pk_tuner *tuner, pk_tune_task_report *rep);

/* The step time the report predicts: the sum over tasks of calls x FLOPs / GFLOP/s with
 * each task's default schedule (*default_ms) and its best so far (*best_ms), over the
 * *covered tasks whose default has been measured (the others are not in either sum). */
void pk_tune_step_estimate(const pk_tune_report *r, double *default_ms, double *best_ms,
                           int *covered);

/* Runs the loop; *out (in ctx) says what happened, also after an error or a stop. */
pk_status pk_tune(pk_ctx *ctx, const pk_tune_options *o, const pk_tune_input *in,
                  pk_tune_report *out);

#endif
