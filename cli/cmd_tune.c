/* cmd_tune.c — `pock tune INPUT --db FILE [...]`: tunes kernels on this device. INPUT is a
 * TE file (one kernel) or a model (.json/.onnx: every distinct kernel of its training graph,
 * weighted by calls per step). Each task's default schedule is measured first (the report's
 * baseline), then the tuner's batches, the next batch going to the task expected to shorten
 * the step most (pk_budget). Every record, good or failed, is committed in its own
 * transaction as soon as it is measured, so a killed run keeps everything it measured and
 * --resume goes on from there. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "pk_driver.h"
#include "pk_measurer.h"
#include "pk_search.h"
#include "pk_tunedb.h"

#define DEFAULT_TRACE "{\"version\":1,\"steps\":[]}"

/* The one piece of process-wide state: a signal handler can only talk through a flag. */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

typedef struct tune_options {
  const char *input, *db, *target, *tuner, *sparse;
  int64_t trials, total_trials, seed, batch, patience, min_ms, model_batch;
  double time_budget_s, timeout_s, build_timeout_s;
  bool resume, inference, model;
} tune_options;

static const char tune_help[] =
    "usage: pock tune INPUT --db DB [options]\n"
    "\n"
    "Autotunes kernels on this device into a SQLite tuning database. INPUT is a TE file\n"
    "(one kernel) or a model (MODEL.json): every distinct kernel of its training graph\n"
    "(forward, backward and optimizer, pruned by --sparse), weighted by calls per step.\n"
    "\n"
    "options:\n"
    "  --db DB               the database (created when missing)\n"
    "  --trials N            trials PER TASK (default 64); with --resume, the total per task\n"
    "                        including records already in the database\n"
    "  --total-trials N      a model's budget for ALL tasks together: split by calls x FLOPs\n"
    "                        (pk_budget_split), each batch going to the task expected to gain\n"
    "                        most; replaces --trials\n"
    "  --tuner evo|random|grid   (default evo)\n"
    "  --time-budget S       stop after S seconds\n"
    "  --timeout S           per candidate (default 10)\n"
    "  --build-timeout S     per candidate build: lowering + compiling (default 120)\n"
    "  --tune-batch N        candidates built and measured per batch (default 16)\n"
    "  --batch N             TE input: as --tune-batch; model input: the model's batch size\n"
    "                        (default 32, as `pock compile`)\n"
    "  --sparse SPEC.json    model input: the sparse-update spec (as `pock compile`)\n"
    "  --inference           model input: tune the forward kernels only\n"
    "  --patience N          stop a task after N batches without a better result\n"
    "  --min-ms M            time each candidate at least M ms (default 50)\n"
    "  --target T            target string (default c)\n"
    "  --resume              go on from the records already in the database\n"
    "  --seed N              (default 1)\n";

static bool is_model_path(const char *p) {
  size_t n = strlen(p);
  return (n > 5 && !strcmp(p + n - 5, ".json")) || (n > 5 && !strcmp(p + n - 5, ".onnx"));
}

static int parse_options(int argc, char **argv, tune_options *o) {
  *o = (tune_options){.target = "c", .tuner = "evo", .trials = 64, .seed = 1, .batch = -1,
                      .min_ms = 50, .timeout_s = 10, .build_timeout_s = 120, .model_batch = 32};
  int64_t batch = -1, tune_batch = -1;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    bool val = i + 1 < argc;
    int64_t n;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(tune_help, stdout);
      return -1;
    }
    if (!strcmp(a, "--resume")) { o->resume = true; continue; }
    if (!strcmp(a, "--inference")) { o->inference = true; continue; }
    if (a[0] != '-') {
      if (o->input) return pk_cli_usage("tune: one INPUT expected, got '%s' and '%s'", o->input, a);
      o->input = a;
      continue;
    }
    if (!val) return pk_cli_usage("tune: %s needs a value", a);
    const char *v = argv[++i];
    if (!strcmp(a, "--db")) o->db = v;
    else if (!strcmp(a, "--target")) o->target = v;
    else if (!strcmp(a, "--tuner")) o->tuner = v;
    else if (!strcmp(a, "--sparse")) o->sparse = v;
    else if (!strcmp(a, "--time-budget") || !strcmp(a, "--timeout") || !strcmp(a, "--build-timeout")) {
      double d;
      if (!pkrt_cli_parse_double(v, &d) || !(d > 0) || d > 1e7) return pk_cli_usage("tune: %s needs a positive number of seconds", a);
      *(!strcmp(a, "--timeout") ? &o->timeout_s
        : !strcmp(a, "--build-timeout") ? &o->build_timeout_s : &o->time_budget_s) = d;
    } else if (!strcmp(a, "--trials") || !strcmp(a, "--seed") || !strcmp(a, "--batch") ||
               !strcmp(a, "--patience") || !strcmp(a, "--min-ms") || !strcmp(a, "--total-trials") ||
               !strcmp(a, "--tune-batch")) {
      if (!pkrt_cli_parse_i64(v, &n) || n < 0 || n > 100000000)
        return pk_cli_usage("tune: %s needs a non-negative integer", a);
      int64_t *slot = !strcmp(a, "--trials") ? &o->trials : !strcmp(a, "--seed") ? &o->seed
                      : !strcmp(a, "--batch") ? &batch : !strcmp(a, "--tune-batch") ? &tune_batch
                      : !strcmp(a, "--total-trials") ? &o->total_trials
                      : !strcmp(a, "--patience") ? &o->patience : &o->min_ms;
      *slot = n;
    } else {
      return pk_cli_usage("tune: unknown option '%s'", a);
    }
  }
  if (!o->input) return pk_cli_usage("tune: expected INPUT (a TE file or a model)");
  if (!o->db) return pk_cli_usage("tune: --db FILE is required");
  o->model = is_model_path(o->input);
  if (o->model) {
    if (batch >= 0) o->model_batch = batch;
    if (o->model_batch < 1) return pk_cli_usage("tune: --batch (the model's batch size) must be >= 1");
    o->batch = tune_batch >= 0 ? tune_batch : 16;
  } else {
    if (o->sparse || o->inference || o->total_trials)
      return pk_cli_usage("tune: --sparse, --inference and --total-trials go with a model INPUT");
    o->batch = tune_batch >= 0 ? tune_batch : batch >= 0 ? batch : 16;
  }
  if (o->batch < 1 || o->batch > 256) return pk_cli_usage("tune: --tune-batch must be in 1..256");
  pk_tuner_kind k;
  if (!pk_tuner_kind_from_name(o->tuner, &k)) return pk_cli_usage("tune: unknown tuner '%s' (random, grid, evo)", o->tuner);
  return PK_EXIT_OK;
}

/* One task being tuned. */
typedef struct task_run {
  pk_task task;
  const char *label;     /* "matmul(fc)" for a model's kernel, else the task name */
  pk_space *space;       /* NULL: nothing to tune beyond the default */
  pk_tuner *tuner;
  int64_t done, cap;     /* trials counted against the cap (old ones with --resume) */
  int64_t committed, failed;
  double best_gflops;
  bool baseline;         /* the default schedule was tried */
  bool finished;
} task_run;

/* What the measurer's callback needs to commit each record the moment it is measured. */
typedef struct tuning {
  pk_ctx *ctx;
  pk_tunedb *db;
  pk_measurer *measurer;
  task_run *cur;           /* the task whose batch is being measured */
  const pk_target_fp *fp;
  int64_t run_id, trial;
  pk_record *pending;      /* the batch being measured, indexed like the candidates */
  pk_status commit_status; /* first failure to commit (the run stops after the batch) */
  int64_t committed, failed;
  const char *host;
  int ntasks, cur_index;
} tuning;

static void prepare_record(tuning *T, const pk_candidate *c, pk_record *r) {
  memset(r, 0, sizeof *r);
  r->workload = T->cur->task.workload;
  r->target_key = T->fp->key;
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
  task_run *R = T->cur;
  pk_record *r = &T->pending[index];
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
  T->committed += inserted;
  R->committed += inserted;
  if (meas->status != PK_MEAS_OK) {
    T->failed++;
    R->failed++;
  } else if (meas->gflops > R->best_gflops) {
    R->best_gflops = meas->gflops;
  }
}

static void progress(const tuning *T, const task_run *R, double elapsed_s, bool final) {
  double eta = R->done > 0 && R->cap > R->done ? elapsed_s / (double)R->done * (double)(R->cap - R->done) : 0;
  if (isatty(STDERR_FILENO)) {
    fprintf(stderr, "\r[tune] task %d/%d %-28.28s trial %lld/%lld  best %7.2f GFLOP/s  failed %lld  ETA %4.0fs ",
            T->cur_index + 1, T->ntasks, R->label, (long long)R->done, (long long)R->cap, R->best_gflops,
            (long long)R->failed, eta);
    if (final) fputc('\n', stderr);
  } else {
    fprintf(stderr, "[tune] task %d/%d %s trial %lld/%lld best %.2f GFLOP/s failed %lld elapsed %.0fs\n",
            T->cur_index + 1, T->ntasks, R->label, (long long)R->done, (long long)R->cap, R->best_gflops,
            (long long)R->failed, elapsed_s);
  }
}

/* Measures the candidates whose records are not in the database yet. */
static pk_status measure_batch(tuning *T, const pk_candidate *cands, int n, int *measured) {
  pk_candidate *to_measure = pk_alloc(T->ctx, sizeof *to_measure * (size_t)n);
  T->pending = pk_alloc(T->ctx, sizeof *T->pending * (size_t)n);
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
  *measured = m;
  if (!m) return PK_OK;
  pk_measurement *out = pk_alloc(T->ctx, sizeof *out * (size_t)m);
  pk_status s = pk_measurer_run(T->measurer, &T->cur->task, to_measure, m, out);
  return s != PK_OK ? s : T->commit_status;
}

/* The tasks: the TE file's one program, or the model's distinct kernels. */
static pk_status load_tasks(pk_ctx *ctx, const tune_options *o, task_run **out, int *n) {
  pk_te_program **progs;
  double *calls = NULL;
  const char **names = NULL;
  pk_status s;
  if (o->model) {
    pk_compile_options co = pk_compile_defaults();
    co.model = o->input;
    co.sparse = o->sparse;
    co.batch = o->model_batch;
    co.target = o->target;
    co.inference = o->inference;
    pk_model_tasks mt;
    if ((s = pk_model_tasks_of(ctx, &co, &mt)) != PK_OK) return s;
    *n = mt.n;
    progs = mt.progs;
    calls = mt.calls;
    names = mt.names;
  } else {
    char *text;
    size_t len;
    progs = pk_alloc(ctx, sizeof *progs);
    s = pk_read_file(ctx, o->input, &text, &len);
    if (s == PK_OK) s = pk_te_parse(ctx, text, len, o->input, &progs[0]);
    if (s != PK_OK) return s;
    *n = 1;
  }
  task_run *R = pk_alloc(ctx, sizeof *R * (size_t)(*n + 1));
  for (int i = 0; i < *n; i++) {
    if ((s = pk_task_from_program(ctx, progs[i], o->target, &R[i].task)) != PK_OK) return s;
    R[i].task.weight = calls ? calls[i] : 1;
    R[i].label = names ? names[i] : R[i].task.name;
  }
  *out = R;
  return PK_OK;
}

/* History, space and tuner of one task. A model's kernel with nothing to tune gets only
 * its default measured; a TE file's is an error, as it always was. */
static pk_status prepare_task(tuning *T, const tune_options *o, task_run *R, int64_t cap) {
  pk_record *old = NULL;
  int64_t nold = 0;
  pk_status s = pk_db_workload_add(T->db, &R->task);
  if (s == PK_OK) s = pk_db_history(T->db, R->task.workload, T->fp->key, &old, &nold);
  if (s != PK_OK) return s;
  for (int64_t i = 0; i < nold; i++)
    if (old[i].meas.status == PK_MEAS_OK && old[i].meas.gflops > R->best_gflops) R->best_gflops = old[i].meas.gflops;
  R->done = o->resume ? nold : 0; /* --trials is the total per task with --resume */
  R->cap = cap;
  if (nold > T->trial) T->trial = nold;
  s = pk_space_new(T->ctx, &R->task, &R->space);
  if (s == PK_ERR_UNSUPPORTED && o->model) {
    pk_ctx_clear_error(T->ctx);
    R->space = NULL;
    return PK_OK;
  }
  if (s != PK_OK) return s;
  pk_tuner_kind kind;
  pk_tuner_kind_from_name(o->tuner, &kind);
  pk_tuner_options topts;
  pk_tuner_options_default(&topts);
  topts.patience = (int)o->patience;
  R->tuner = pk_tuner_new_opts(T->ctx, kind, &R->task, R->space, (uint64_t)o->seed, &topts);
  pk_tuner_seed_history(R->tuner, old, (int)nold);
  return PK_OK;
}

/* One batch of task i: its default schedule first (the baseline), then the tuner's. */
static pk_status tune_batch(tuning *T, const tune_options *o, task_run *R, bool *progressed) {
  pk_ctx *ctx = T->ctx;
  int measured = 0;
  pk_status s = PK_OK;
  *progressed = false;
  if (!R->baseline) {
    R->baseline = true;
    pk_candidate def = {.kind = PK_CAND_SCHEDULE, .trace = DEFAULT_TRACE, .knobs = "{}"};
    char hex[2 * PKRT_SHA256_BYTES + 1];
    pkrt_sha256_hex(def.trace, strlen(def.trace), hex);
    def.trace_hash = pk_strdup(ctx, hex);
    s = measure_batch(T, &def, 1, &measured);
    R->done += measured;
    *progressed = measured > 0;
    if (!R->tuner) R->finished = true;
    if (s != PK_OK || !R->tuner || R->done >= R->cap) return s;
  }
  int want = (int)(R->cap - R->done < o->batch ? R->cap - R->done : o->batch), got;
  pk_candidate *cands = pk_alloc(ctx, sizeof *cands * (size_t)want);
  pk_tuner_next_batch(R->tuner, want, cands, &got);
  if (!got) {
    R->finished = true;
    return PK_OK;
  }
  s = measure_batch(T, cands, got, &measured);
  for (int i = 0; i < measured && s == PK_OK; i++) pk_tuner_update(R->tuner, &T->pending[i].cand, &T->pending[i].meas);
  R->done += measured;
  *progressed = *progressed || measured > 0;
  if (pk_tuner_done(R->tuner)) R->finished = true;
  return s;
}

static void summary(tuning *T, task_run *R) {
  pk_record best;
  pk_db_match match;
  pk_status s = pk_db_best(T->db, R->task.workload, T->fp->key, NULL, &best, &match);
  const char *prefix = T->ntasks > 1 ? pk_sprintf(T->ctx, "  %s: ", R->label) : "";
  if (s != PK_OK) {
    pk_ctx_clear_error(T->ctx);
    return;
  }
  if (T->ntasks > 1) {
    if (match != PK_DB_MATCH_NONE)
      printf("%s%lld new records (%lld failed); best %.2f GFLOP/s (%s%s)\n", prefix, (long long)R->committed,
             (long long)R->failed, best.meas.gflops, best.cand.kind == PK_CAND_EXTERN ? "extern " : "generated",
             best.cand.kind == PK_CAND_EXTERN ? best.cand.extern_sym : "");
    else
      printf("%s%lld new records; none measured successfully\n", prefix, (long long)R->committed);
    return;
  }
  if (match != PK_DB_MATCH_NONE)
    printf("%s: %lld new records (%lld failed); best %.2f GFLOP/s (%s%s%s)\n",
           interrupted ? "interrupted" : "done", (long long)T->committed, (long long)T->failed,
           best.meas.gflops, best.cand.kind == PK_CAND_EXTERN ? "extern " : "generated",
           best.cand.kind == PK_CAND_EXTERN ? best.cand.extern_sym : "",
           best.cand.kind == PK_CAND_EXTERN ? "" : " kernel");
  else
    printf("%s: no candidate measured successfully\n", interrupted ? "interrupted" : "done");
}

/* T is the measurer's callback state: allocated before the measurer, filled in here. */
static pk_status tune(pk_ctx *ctx, const tune_options *o, pk_measurer *measurer, tuning *T) {
  task_run *R = NULL;
  int n = 0;
  pk_target_fp fp;
  pk_tunedb *db = NULL;
  pk_status s = load_tasks(ctx, o, &R, &n);
  if (s == PK_OK) s = pk_target_fp_detect(ctx, o->target, &fp);
  if (s == PK_OK) s = pk_db_open(ctx, o->db, PK_DB_OPEN_CREATE, &db);
  if (s == PK_OK) s = pk_db_target_add(db, &fp);
  if (s != PK_OK) {
    if (db) pk_db_close(db);
    return s;
  }
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  *T = (tuning){.ctx = ctx, .db = db, .measurer = measurer, .fp = &fp, .host = pk_strdup(ctx, host),
                .ntasks = n};

  /* Caps: --trials each, or --total-trials split by calls x FLOPs. */
  int64_t *caps = pk_alloc(ctx, sizeof *caps * (size_t)(n + 1)), maxcap = 0;
  pk_task *tasks = pk_alloc(ctx, sizeof *tasks * (size_t)(n + 1));
  for (int i = 0; i < n; i++) tasks[i] = R[i].task;
  if (o->total_trials > 0) {
    int64_t min_each = o->total_trials / n < o->batch ? o->total_trials / n : o->batch;
    pk_budget_split(tasks, n, o->total_trials, min_each > 0 ? min_each : 1, caps);
  } else {
    for (int i = 0; i < n; i++) caps[i] = o->trials;
  }
  for (int i = 0; i < n && s == PK_OK; i++) {
    s = prepare_task(T, o, &R[i], caps[i]);
    if (caps[i] > maxcap) maxcap = caps[i];
  }

  const char *settings = pk_sprintf(ctx,
      "{\"batch\":%lld,\"min_ms\":%lld,\"patience\":%lld,\"resume\":%s,\"seed\":%lld,"
      "\"tasks\":%d,\"time_budget_s\":%g,\"timeout_s\":%g,\"total_trials\":%lld,\"trials\":%lld,"
      "\"tuner\":\"%s\"}",
      (long long)o->batch, (long long)o->min_ms, (long long)o->patience, o->resume ? "true" : "false",
      (long long)o->seed, n, o->time_budget_s, o->timeout_s, (long long)o->total_trials,
      (long long)o->trials, o->tuner);
  if (s == PK_OK) s = pk_db_run_begin(db, o->tuner, settings, &T->run_id);

  if (n == 1) {
    printf("tuning %s (%s) on %s: %llu configs in the space, %lld records already\n", R[0].task.name,
           pk_task_class_name(R[0].task.cls), fp.target,
           R[0].space ? (unsigned long long)pk_space_size(R[0].space) : 0ULL, (long long)T->trial);
  } else {
    printf("tuning %s on %s: %d distinct kernels\n", o->input, fp.target, n);
    for (int i = 0; i < n; i++)
      printf("  task %d %-32s %-9s calls/step %-3g trials %lld  %s\n", i + 1, R[i].label,
             pk_task_class_name(R[i].task.cls), R[i].task.weight, (long long)caps[i], R[i].task.name);
  }
  fflush(stdout); /* before the progress lines on stderr */

  pk_budget *budget = pk_budget_new(tasks, n, maxcap, (int)o->batch);
  for (int i = 0; i < n; i++)
    if (R[i].done > 0 || R[i].best_gflops > 0 || R[i].done >= R[i].cap)
      pk_budget_report(budget, i, R[i].done, R[i].best_gflops, R[i].done >= R[i].cap);
  int64_t t0 = pkrt_now_ns();
  while (s == PK_OK && !interrupted) {
    double elapsed = (double)(pkrt_now_ns() - t0) * 1e-9;
    if (o->time_budget_s > 0 && elapsed >= o->time_budget_s) break;
    int i = pk_budget_next(budget);
    if (i < 0) break;
    T->cur = &R[i];
    T->cur_index = i;
    bool progressed;
    s = tune_batch(T, o, &R[i], &progressed);
    bool fin = R[i].finished || R[i].done >= R[i].cap || (!progressed && !R[i].tuner);
    pk_budget_report(budget, i, R[i].done > 0 ? R[i].done : 1, R[i].best_gflops, fin);
    if (progressed) progress(T, &R[i], (double)(pkrt_now_ns() - t0) * 1e-9, false);
  }
  pk_budget_free(budget);
  if (isatty(STDERR_FILENO) && T->cur) progress(T, T->cur, (double)(pkrt_now_ns() - t0) * 1e-9, true);

  pk_db_run_status end = interrupted || s != PK_OK ? PK_DB_RUN_INTERRUPTED : PK_DB_RUN_FINISHED;
  pk_status fs = pk_db_run_finish(db, T->run_id, end);
  if (s == PK_OK) s = fs;
  if (s == PK_OK) {
    for (int i = 0; i < n; i++) summary(T, &R[i]);
    if (n > 1)
      printf("%s: %lld new records (%lld failed) over %d tasks\n", interrupted ? "interrupted" : "done",
             (long long)T->committed, (long long)T->failed, n);
  }
  for (int i = 0; i < n; i++) {
    pk_tuner_free(R[i].tuner);
    pk_space_free(R[i].space);
  }
  pk_db_close(db);
  return s;
}

int pk_cmd_tune(int argc, char **argv) {
  tune_options o;
  int rc = parse_options(argc, argv, &o);
  if (rc < 0) return PK_EXIT_OK; /* --help */
  if (rc != PK_EXIT_OK) return rc;
  pk_ctx *ctx = pk_ctx_new();
  /* The measurement worker is forked before anything else exists (no threads, no open
   * database): forking a process that has threads can hang. */
  pk_measure_settings set;
  pk_measure_settings_default(&set);
  set.timeout_s = o.timeout_s;
  set.build_timeout_s = o.build_timeout_s;
  set.min_ns = o.min_ms * 1000000;
  set.seed = (uint64_t)o.seed;
  tuning *T = pk_alloc(ctx, sizeof *T);
  set.on_measured = commit_measured;
  set.on_measured_arg = T;
  pk_measurer *m = NULL;
  pk_status s = pk_measurer_new(ctx, &set, &m);
  if (s == PK_OK) {
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    s = tune(ctx, &o, m, T);
  }
  rc = s == PK_OK ? PK_EXIT_OK : pk_cli_fail(ctx, s);
  pk_measurer_free(m);
  pk_ctx_free(ctx);
  return rc;
}
