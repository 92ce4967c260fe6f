/* tune_loop.c — the tuning loop behind pk_tune: the measurer forked first, then per task
 * its history, space and tuner; the baseline and the tuner's batches handed out by
 * pk_budget; each record committed the moment it is measured (docs/tuning.md). */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pk_tune.h"

void pk_tune_options_default(pk_tune_options *o) {
  memset(o, 0, sizeof *o);
  o->tuner = "evo";
  o->trials = 64;
  o->batch = 16;
  o->seed = 1;
  o->confirm_top = 3;
  o->confirm_rounds = 5;
  o->transfer = true;
  pk_measure_settings_default(&o->measure);
}

/* One task being tuned: its report row and what drives it. */
typedef struct task_run {
  pk_tune_task_report *rep;
  pk_space *space;       /* NULL: nothing to tune beyond the default */
  pk_tuner *tuner;
  pk_candidate base;     /* what the kernel gets untuned: the space's preset, else the
                            default loop nest (pk_space_default_schedule's choice) */
  bool baseline;         /* the baseline was tried */
  bool finished;
  double s_per_cand;     /* wall seconds per candidate in its last batch (0: none yet) */
} task_run;

/* What the measurer's callback needs to commit each record the moment it is measured. */
typedef struct tuning {
  pk_ctx *ctx;
  const pk_tune_options *o;
  pk_tune_report *rep;
  pk_tunedb *db;
  pk_measurer *measurer;
  task_run *cur;           /* the task whose batch is being measured */
  int64_t run_id, trial;
  int64_t start_ns;        /* the budget's clock */
  pk_record *pending;      /* the batch being measured, indexed like the candidates */
  bool *pending_done;      /* ... and which of them were measured (not cut off) */
  int npending;
  pk_status commit_status; /* first failure to commit (the run stops after the batch) */
  const char *host;
} tuning;

static void prepare_record(tuning *T, const pk_candidate *c, pk_record *r) {
  memset(r, 0, sizeof *r);
  r->workload = T->cur->rep->task.workload;
  r->target_key = T->rep->fp.key;
  r->cand = *c;
  r->run_id = T->run_id;
  r->codegen_version = PK_CGEN_C_VERSION;
  r->pock_version = POCK_VERSION;
  r->host = T->host;
  pk_measurer_fill_record(T->measurer, r);
  pk_record_make_id(T->ctx, r);
}

static void commit_measured(void *arg, int index, const pk_measurement *meas) {
  tuning *T = arg;
  pk_tune_task_report *R = T->cur->rep;
  pk_record *r = &T->pending[index];
  T->pending_done[index] = true;
  r->meas = *meas;
  r->trial = ++T->trial;
  r->time_unix = (int64_t)time(NULL);
  double f[PK_FEATURE_COUNT];
  if (pk_features_of(T->ctx, &R->task, &r->cand, f, PK_FEATURE_COUNT) == PK_OK)
    r->features = pk_features_json(T->ctx, f, PK_FEATURE_COUNT);
  else
    pk_ctx_clear_error(T->ctx);
  /* Another tuner on the same file may have stored this very record meanwhile: the
   * database keeps one, and only the one that inserted it counts it as new. */
  bool inserted = false;
  if (T->commit_status == PK_OK) T->commit_status = pk_db_record_commit(T->db, r, &inserted);
  T->rep->committed += inserted;
  R->committed += inserted;
  if (meas->status != PK_MEAS_OK) {
    T->rep->failed++;
    R->failed++;
  } else {
    if (meas->gflops > R->best_gflops) R->best_gflops = meas->gflops;
    if (!strcmp(r->cand.trace_hash, T->cur->base.trace_hash))
      R->default_gflops = meas->gflops;
  }
}

/* Measures the candidates whose records are not in the database yet; *measured counts
 * those measured (T->pending[0..], T->pending_done says which: the deadline may cut some). */
static pk_status measure_batch(tuning *T, const pk_candidate *cands, int n, int *measured) {
  pk_candidate *to_measure = pk_alloc(T->ctx, sizeof *to_measure * (size_t)n);
  T->pending = pk_alloc(T->ctx, sizeof *T->pending * (size_t)n);
  T->pending_done = pk_alloc(T->ctx, sizeof *T->pending_done * (size_t)n);
  memset(T->pending_done, 0, sizeof *T->pending_done * (size_t)n);
  int m = 0;
  for (int i = 0; i < n; i++) {
    pk_record r;
    prepare_record(T, &cands[i], &r);
    bool have;
    pk_status s = pk_db_record_has(T->db, r.id, &have);
    if (s != PK_OK) return s;
    if (have) continue; /* measured before with this compiler: never again */
    T->pending[m] = r;
    to_measure[m++] = cands[i];
  }
  *measured = 0;
  T->npending = m;
  if (!m) return PK_OK;
  pk_measurement *out = pk_alloc(T->ctx, sizeof *out * (size_t)m);
  pk_status s = pk_measurer_run(T->measurer, &T->cur->rep->task, to_measure, m, out);
  for (int i = 0; i < m; i++) *measured += T->pending_done[i];
  return s != PK_OK ? s : T->commit_status;
}

/* History, space and tuner of one task. */
static pk_status prepare_task(tuning *T, task_run *R, int64_t cap) {
  const pk_tune_options *o = T->o;
  pk_tune_task_report *rep = R->rep;
  pk_record *old = NULL;
  int64_t nold = 0;
  pk_status s = pk_db_workload_add(T->db, &rep->task);
  if (s == PK_OK) s = pk_db_history(T->db, rep->task.workload, T->rep->fp.key, &old, &nold);
  if (s != PK_OK) return s;
  rep->done = o->resume ? nold : 0; /* trials is the total per task with resume */
  rep->cap = cap;
  if (nold > T->trial) T->trial = nold;
  s = pk_space_new(T->ctx, &rep->task, &R->space);
  if (s == PK_ERR_UNSUPPORTED && o->allow_untunable) {
    pk_ctx_clear_error(T->ctx);
    R->space = NULL;
    s = PK_OK;
  }
  if (s != PK_OK) return s;
  pk_task_baseline(T->ctx, &rep->task, &R->base);
  for (int64_t i = 0; i < nold; i++) {
    if (old[i].meas.status != PK_MEAS_OK) continue;
    if (old[i].meas.gflops > rep->best_gflops) rep->best_gflops = old[i].meas.gflops;
    if (!strcmp(old[i].cand.trace_hash, R->base.trace_hash)) rep->default_gflops = old[i].meas.gflops;
  }
  if (!R->space) return PK_OK;
  rep->space_size = pk_space_size(R->space);
  pk_tuner_kind kind;
  pk_tuner_kind_from_name(o->tuner, &kind);
  pk_tuner_options topts;
  pk_tuner_options_default(&topts);
  topts.patience = (int)o->patience;
  R->tuner = pk_tuner_new_opts(T->ctx, kind, &rep->task, R->space, (uint64_t)o->seed, &topts);
  pk_tuner_seed_history(R->tuner, old, (int)nold);
  return o->transfer ? pk_tune_transfer(T->db, &rep->task, &T->rep->fp, R->space, R->tuner, rep)
                     : PK_OK;
}

static bool stopped(const pk_tune_options *o) { return o->stop && *o->stop; }

/* The share of a time budget kept for confirming the leaders at the end. */
#define CONFIRM_SHARE 0.15

/* Seconds left of the run's budget for tuning (a large number without one). */
static double budget_left_s(const tuning *T) {
  if (!(T->o->time_budget_s > 0)) return 1e300;
  double budget = T->o->time_budget_s * (T->o->confirm_top > 0 ? 1 - CONFIRM_SHARE : 1);
  return budget - (double)(pkrt_now_ns() - T->start_ns) * 1e-9;
}

/* Leaders first: the faster OK record (ties: id) of two. */
static int by_median(const void *a, const void *b) {
  const pk_record *x = *(const pk_record *const *)a, *y = *(const pk_record *const *)b;
  if (x->meas.timing.median_ns != y->meas.timing.median_ns)
    return x->meas.timing.median_ns < y->meas.timing.median_ns ? -1 : 1;
  return strcmp(x->id, y->id);
}

/* Re-times a task's leaders side by side: its fastest OK records built as this measurer
 * builds (or extern), old ones included, and stores each confirmation. */
static pk_status confirm_task(tuning *T, task_run *R) {
  pk_tune_task_report *rep = R->rep;
  pk_record *recs;
  int64_t n;
  pk_status s = pk_db_history(T->db, rep->task.workload, T->rep->fp.key, &recs, &n);
  if (s != PK_OK) return s;
  const pk_record **lead = pk_alloc(T->ctx, sizeof *lead * (size_t)(n + 1));
  int nlead = 0;
  const char *cc = pk_measurer_compiler(T->measurer), *flags = pk_measurer_flags(T->measurer);
  for (int64_t i = 0; i < n; i++) {
    const pk_record *r = &recs[i];
    if (r->meas.status != PK_MEAS_OK) continue;
    if (r->cand.kind != PK_CAND_EXTERN &&
        (!r->compiler || strcmp(r->compiler, cc) || !r->flags || strcmp(r->flags, flags) ||
         r->codegen_version != pk_measurer_codegen_version(T->measurer)))
      continue; /* rebuilt now, it would be another kernel than the record's */
    lead[nlead++] = r;
  }
  if (nlead < 2) return PK_OK; /* nothing to compare */
  qsort(lead, (size_t)nlead, sizeof *lead, by_median);
  int k = nlead < T->o->confirm_top ? nlead : T->o->confirm_top;
  if (k > PK_CONFIRM_MAX) k = PK_CONFIRM_MAX;
  pk_candidate *cands = pk_alloc(T->ctx, sizeof *cands * (size_t)k);
  pk_confirmation *out = pk_alloc(T->ctx, sizeof *out * (size_t)k);
  for (int i = 0; i < k; i++) cands[i] = lead[i]->cand;
  s = pk_measurer_confirm(T->measurer, &rep->task, cands, k, T->o->confirm_rounds, out);
  for (int i = 0; i < k && s == PK_OK; i++) {
    if (!out[i].rounds) continue;
    s = pk_db_record_confirm(T->db, lead[i]->id, &out[i]);
    rep->confirmed += s == PK_OK;
  }
  return s;
}

/* A task and the time its best costs per step, to confirm the costliest first. */
typedef struct task_share {
  double ns;
  int task;
} task_share;

static int by_share(const void *a, const void *b) {
  const task_share *x = a, *y = b;
  return x->ns != y->ns ? (x->ns < y->ns) - (x->ns > y->ns) : x->task - y->task;
}

/* The end of a run: tasks that gained records this run, costliest first, until the
 * deadline (the measurer's) or a stop. */
static pk_status confirm_leaders(tuning *T, task_run *R) {
  const pk_tune_report *rep = T->rep;
  if (T->o->confirm_top < 1) return PK_OK;
  task_share *order = pk_alloc(T->ctx, sizeof *order * (size_t)(rep->ntasks + 1));
  int n = 0;
  for (int i = 0; i < rep->ntasks; i++) {
    const pk_tune_task_report *t = &rep->tasks[i];
    if (t->committed > 0 && t->best_gflops > 0)
      order[n++] = (task_share){t->task.weight * t->task.flops / t->best_gflops, i};
  }
  qsort(order, (size_t)n, sizeof *order, by_share);
  pk_status s = PK_OK;
  for (int i = 0; i < n && s == PK_OK && !stopped(T->o); i++) {
    if (T->o->time_budget_s > 0 &&
        pkrt_now_ns() >= T->start_ns + (int64_t)(T->o->time_budget_s * 1e9))
      break;
    s = confirm_task(T, &R[order[i].task]);
  }
  return s;
}

/* One batch of a task: its default schedule first (the baseline), then the tuner's, no
 * larger than the candidates that fit in the budget's time left at this task's pace. */
static pk_status tune_batch(tuning *T, task_run *R, bool *progressed) {
  pk_ctx *ctx = T->ctx;
  pk_tune_task_report *rep = R->rep;
  int measured = 0;
  pk_status s = PK_OK;
  *progressed = false;
  if (!R->baseline) {
    R->baseline = true;
    int64_t t0 = pkrt_now_ns();
    s = measure_batch(T, &R->base, 1, &measured);
    if (measured) R->s_per_cand = (double)(pkrt_now_ns() - t0) * 1e-9;
    rep->done += measured;
    *progressed = measured > 0;
    if (!R->tuner) R->finished = true;
    if (s != PK_OK || !R->tuner || rep->done >= rep->cap) return s;
  }
  int64_t left = rep->cap - rep->done;
  int want = (int)(left < T->o->batch ? left : T->o->batch), got;
  double fit = R->s_per_cand > 0 ? budget_left_s(T) / R->s_per_cand : want;
  if (fit < want) want = fit >= 1 ? (int)fit : 1;
  pk_candidate *cands = pk_alloc(ctx, sizeof *cands * (size_t)want);
  pk_tuner_next_batch(R->tuner, want, cands, &got);
  if (!got) {
    R->finished = true;
    return PK_OK;
  }
  int64_t t0 = pkrt_now_ns();
  s = measure_batch(T, cands, got, &measured);
  if (measured) R->s_per_cand = (double)(pkrt_now_ns() - t0) * 1e-9 / measured;
  for (int i = 0; i < T->npending && s == PK_OK; i++)
    if (T->pending_done[i]) pk_tuner_update(R->tuner, &T->pending[i].cand, &T->pending[i].meas);
  rep->done += measured;
  *progressed = *progressed || measured > 0;
  if (pk_tuner_done(R->tuner)) R->finished = true;
  return s;
}

/* Caps: trials each, or total_trials split by calls x FLOPs. */
static int64_t *task_caps(pk_ctx *ctx, const pk_tune_options *o, const pk_tune_report *rep) {
  int n = rep->ntasks;
  int64_t *caps = pk_alloc(ctx, sizeof *caps * (size_t)(n + 1));
  pk_task *tasks = pk_alloc(ctx, sizeof *tasks * (size_t)(n + 1));
  for (int i = 0; i < n; i++) tasks[i] = rep->tasks[i].task;
  if (o->total_trials > 0) {
    int64_t min_each = o->total_trials / n < o->batch ? o->total_trials / n : o->batch;
    pk_budget_split(tasks, n, o->total_trials, min_each > 0 ? min_each : 1, caps);
  } else {
    for (int i = 0; i < n; i++) caps[i] = o->trials;
  }
  return caps;
}

/* The run itself, once the measurer, the database and the tasks exist. */
static pk_status run_loop(tuning *T, task_run *R) {
  const pk_tune_options *o = T->o;
  pk_tune_report *rep = T->rep;
  int n = rep->ntasks;
  pk_status s = PK_OK;
  int64_t *caps = task_caps(T->ctx, o, rep), maxcap = 0;
  for (int i = 0; i < n && s == PK_OK; i++) {
    s = prepare_task(T, &R[i], caps[i]);
    if (caps[i] > maxcap) maxcap = caps[i];
  }
  rep->existing = T->trial;
  const char *settings = pk_sprintf(T->ctx,
      "{\"batch\":%lld,\"min_ms\":%lld,\"patience\":%lld,\"resume\":%s,\"seed\":%lld,"
      "\"tasks\":%d,\"time_budget_s\":%g,\"timeout_s\":%g,\"total_trials\":%lld,\"trials\":%lld,"
      "\"tuner\":\"%s\"}",
      (long long)o->batch, (long long)(o->measure.min_ns / 1000000), (long long)o->patience,
      o->resume ? "true" : "false", (long long)o->seed, n, o->time_budget_s, o->measure.timeout_s,
      (long long)o->total_trials, (long long)o->trials, o->tuner);
  if (s == PK_OK) s = pk_db_run_begin(T->db, o->tuner, settings, &T->run_id);
  if (s != PK_OK) return s;
  if (o->on_plan) o->on_plan(o->arg, rep);

  pk_task *tasks = pk_alloc(T->ctx, sizeof *tasks * (size_t)(n + 1));
  for (int i = 0; i < n; i++) tasks[i] = rep->tasks[i].task;
  pk_budget *budget = pk_budget_new(tasks, n, maxcap, (int)o->batch);
  for (int i = 0; i < n; i++) {
    pk_tune_task_report *t = &rep->tasks[i];
    if (t->done > 0 || t->best_gflops > 0 || t->done >= t->cap)
      pk_budget_report(budget, i, t->done, t->best_gflops, t->done >= t->cap);
  }
  int64_t t0 = T->start_ns;
  int last = -1;
  while (s == PK_OK && !stopped(o)) {
    if (budget_left_s(T) <= 0) break;
    int i = pk_budget_next(budget);
    if (i < 0) break;
    T->cur = &R[i];
    last = i;
    bool progressed;
    s = tune_batch(T, &R[i], &progressed);
    pk_tune_task_report *t = &rep->tasks[i];
    bool fin = R[i].finished || t->done >= t->cap || (!progressed && !R[i].tuner);
    pk_budget_report(budget, i, t->done > 0 ? t->done : 1, t->best_gflops, fin);
    if (progressed && o->on_progress)
      o->on_progress(o->arg, rep, i, (double)(pkrt_now_ns() - t0) * 1e-9, false);
  }
  pk_budget_free(budget);
  if (s == PK_OK) s = confirm_leaders(T, R);
  if (last >= 0 && o->on_progress) o->on_progress(o->arg, rep, last, (double)(pkrt_now_ns() - t0) * 1e-9, true);
  rep->interrupted = stopped(o);

  pk_db_run_status end = rep->interrupted || s != PK_OK ? PK_DB_RUN_INTERRUPTED : PK_DB_RUN_FINISHED;
  pk_status fs = pk_db_run_finish(T->db, T->run_id, end);
  if (s == PK_OK) s = fs;
  for (int i = 0; i < n && s == PK_OK; i++) { /* the best for the target, old records included */
    pk_tune_task_report *t = &rep->tasks[i];
    pk_db_match match;
    if (pk_db_best(T->db, t->task.workload, rep->fp.key, NULL, &t->best, &match) != PK_OK)
      pk_ctx_clear_error(T->ctx);
    else
      t->has_best = match != PK_DB_MATCH_NONE;
  }
  return s;
}

/* The report's task rows: one task per program, for the target. */
static pk_status make_tasks(pk_ctx *ctx, const pk_target *t, const pk_tune_input *in,
                            pk_tune_report *rep) {
  rep->ntasks = in->n;
  rep->tasks = pk_alloc(ctx, sizeof *rep->tasks * (size_t)(in->n + 1));
  memset(rep->tasks, 0, sizeof *rep->tasks * (size_t)(in->n + 1));
  for (int i = 0; i < in->n; i++) {
    pk_tune_task_report *r = &rep->tasks[i];
    pk_status s = pk_task_for_target(ctx, in->progs[i], t, &r->task);
    if (s != PK_OK) return s;
    r->task.weight = in->calls ? in->calls[i] : 1;
    r->label = in->labels ? in->labels[i] : r->task.name;
  }
  return PK_OK;
}

void pk_tune_step_estimate(const pk_tune_report *r, double *default_ms, double *best_ms,
                           int *covered) {
  *default_ms = *best_ms = 0;
  *covered = 0;
  for (int i = 0; i < r->ntasks; i++) {
    const pk_tune_task_report *t = &r->tasks[i];
    if (!(t->default_gflops > 0)) continue;
    double work = t->task.weight * t->task.flops * 1e-6; /* GFLOP/s = FLOP/ns: this is ms */
    double best = t->best_gflops > t->default_gflops ? t->best_gflops : t->default_gflops;
    *default_ms += work / t->default_gflops;
    *best_ms += work / best;
    ++*covered;
  }
}

pk_status pk_tune(pk_ctx *ctx, const pk_tune_options *o, const pk_tune_input *in,
                  pk_tune_report *out) {
  memset(out, 0, sizeof *out);
  if (in->n < 1) return pk_ctx_fail(ctx, PK_ERR_USAGE, "tune: no tasks");
  pk_tuner_kind kind;
  if (!o->tuner || !pk_tuner_kind_from_name(o->tuner, &kind))
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "tune: unknown tuner '%s' (random, grid, evo)",
                       o->tuner ? o->tuner : "(none)");
  if (o->batch < 1 || o->batch > 256) return pk_ctx_fail(ctx, PK_ERR_USAGE, "tune: batch must be in 1..256");
  tuning *T = pk_alloc(ctx, sizeof *T);
  memset(T, 0, sizeof *T);
  *T = (tuning){.ctx = ctx, .o = o, .rep = out, .start_ns = o->start_ns > 0 ? o->start_ns : pkrt_now_ns()};
  /* The measurement worker is forked before anything else exists (no threads, no open
   * database): forking a process that has threads can hang. */
  pk_measure_settings set = o->measure;
  set.seed = (uint64_t)o->seed;
  set.on_measured = commit_measured;
  set.on_measured_arg = T;
  if (o->time_budget_s > 0) set.deadline_ns = T->start_ns + (int64_t)(o->time_budget_s * 1e9);
  const pk_target *target = o->target;
  pk_target *parsed;
  pk_status s = PK_OK;
  if (!target && (s = pk_target_native(ctx, &parsed)) == PK_OK) target = parsed;
  set.target = target;
  if (s == PK_OK) s = pk_measurer_new(ctx, &set, &T->measurer);
  if (s == PK_OK) s = make_tasks(ctx, target, in, out);
  if (s == PK_OK) /* remote: the device's fingerprint, once it is known to run the target */
    s = o->measure.remote ? pk_remote_fingerprint(ctx, o->measure.remote, target, &out->fp)
                          : pk_target_fp_of(ctx, target, &out->fp);
  if (s == PK_OK) s = pk_db_open(ctx, o->db, PK_DB_OPEN_CREATE, &T->db);
  if (s == PK_OK) s = pk_db_target_add(T->db, &out->fp);
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  T->host = pk_strdup(ctx, host);
  task_run *R = pk_alloc(ctx, sizeof *R * (size_t)(in->n + 1));
  memset(R, 0, sizeof *R * (size_t)(in->n + 1));
  for (int i = 0; i < in->n; i++) R[i].rep = out->tasks ? &out->tasks[i] : NULL;
  if (s == PK_OK) s = run_loop(T, R);
  for (int i = 0; i < in->n; i++) {
    pk_tuner_free(R[i].tuner);
    pk_space_free(R[i].space);
  }
  if (T->db) pk_db_close(T->db);
  pk_measurer_free(T->measurer);
  return s;
}
