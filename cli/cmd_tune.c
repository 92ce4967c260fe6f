/* cmd_tune.c — `pock tune INPUT --db FILE [...]`: tunes the kernel of a TE file on this
 * device. The default schedule is measured first (the report's baseline), then the tuner's
 * batches; every record, good or failed, is committed in its own transaction as soon as it
 * is measured, so a killed run keeps everything it measured and --resume goes on from there. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "pk_measurer.h"
#include "pk_search.h"
#include "pk_tunedb.h"

#define DEFAULT_TRACE "{\"version\":1,\"steps\":[]}"

/* The one piece of process-wide state: a signal handler can only talk through a flag. */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

typedef struct tune_options {
  const char *input, *db, *target, *tuner;
  int64_t trials, seed, batch, patience, min_ms;
  double time_budget_s, timeout_s;
  bool resume;
} tune_options;

static int parse_options(int argc, char **argv, tune_options *o) {
  *o = (tune_options){.target = "c", .tuner = "evo", .trials = 64, .seed = 1, .batch = 16,
                      .min_ms = 50, .timeout_s = 10};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    bool val = i + 1 < argc;
    int64_t n;
    if (!strcmp(a, "--resume")) { o->resume = true; continue; }
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
    else if (!strcmp(a, "--time-budget") || !strcmp(a, "--timeout")) {
      char *end;
      double d = strtod(v, &end);
      if (*end || !(d > 0) || d > 1e7) return pk_cli_usage("tune: %s needs a positive number of seconds", a);
      *(!strcmp(a, "--timeout") ? &o->timeout_s : &o->time_budget_s) = d;
    } else if (!strcmp(a, "--trials") || !strcmp(a, "--seed") || !strcmp(a, "--batch") ||
               !strcmp(a, "--patience") || !strcmp(a, "--min-ms")) {
      if (!pk_cli_parse_i64(v, &n) || n < 0 || n > 100000000)
        return pk_cli_usage("tune: %s needs a non-negative integer", a);
      int64_t *slot = !strcmp(a, "--trials") ? &o->trials : !strcmp(a, "--seed") ? &o->seed
                      : !strcmp(a, "--batch") ? &o->batch : !strcmp(a, "--patience") ? &o->patience
                                                                                      : &o->min_ms;
      *slot = n;
    } else {
      return pk_cli_usage("tune: unknown option '%s'", a);
    }
  }
  if (!o->input) return pk_cli_usage("tune: expected INPUT (a TE file)");
  if (!o->db) return pk_cli_usage("tune: --db FILE is required");
  if (o->batch < 1 || o->batch > 256) return pk_cli_usage("tune: --batch must be in 1..256");
  pk_tuner_kind k;
  if (!pk_tuner_kind_from_name(o->tuner, &k)) return pk_cli_usage("tune: unknown tuner '%s' (random, grid, evo)", o->tuner);
  return PK_EXIT_OK;
}

/* What the measurer's callback needs to commit each record the moment it is measured. */
typedef struct tuning {
  pk_ctx *ctx;
  pk_tunedb *db;
  pk_measurer *measurer;
  const pk_task *task;
  const pk_target_fp *fp;
  int64_t run_id, trial;
  pk_record *pending;      /* the batch being measured, indexed like the candidates */
  pk_status commit_status; /* first failure to commit (the run stops after the batch) */
  int64_t committed, failed;
  double best_gflops;
  const char *host;
} tuning;

static void prepare_record(tuning *T, const pk_candidate *c, pk_record *r) {
  memset(r, 0, sizeof *r);
  r->workload = T->task->workload;
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
  pk_record *r = &T->pending[index];
  r->meas = *meas;
  r->trial = ++T->trial;
  r->time_unix = (int64_t)time(NULL);
  double f[PK_FEATURE_COUNT];
  if (pk_features_of(T->ctx, T->task, &r->cand, f, PK_FEATURE_COUNT) == PK_OK)
    r->features = pk_features_json(T->ctx, f, PK_FEATURE_COUNT);
  else
    pk_ctx_clear_error(T->ctx);
  /* Another tuner on the same file may have stored this very record meanwhile: the
   * database keeps one, and only the one that inserted it counts it as new. */
  bool inserted = false;
  if (T->commit_status == PK_OK) T->commit_status = pk_db_record_commit(T->db, r, &inserted);
  T->committed += inserted;
  if (meas->status != PK_MEAS_OK) T->failed++;
  else if (meas->gflops > T->best_gflops) T->best_gflops = meas->gflops;
}

static void progress(const tuning *T, const tune_options *o, int64_t done, int64_t total,
                     double elapsed_s, bool final) {
  double eta = done > 0 && total > done ? elapsed_s / (double)done * (double)(total - done) : 0;
  if (isatty(STDERR_FILENO)) {
    fprintf(stderr, "\r[tune] task 1/1 %-28.28s trial %lld/%lld  best %7.2f GFLOP/s  failed %lld  ETA %4.0fs ",
            T->task->name, (long long)done, (long long)total, T->best_gflops, (long long)T->failed, eta);
    if (final) fputc('\n', stderr);
  } else {
    fprintf(stderr, "[tune] %s trial %lld/%lld best %.2f GFLOP/s failed %lld elapsed %.0fs\n",
            T->task->name, (long long)done, (long long)total, T->best_gflops, (long long)T->failed,
            elapsed_s);
  }
  (void)o;
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
  pk_status s = pk_measurer_run(T->measurer, T->task, to_measure, m, out);
  return s != PK_OK ? s : T->commit_status;
}

/* T is the measurer's callback state: allocated before the measurer, filled in here. */
static pk_status tune(pk_ctx *ctx, const tune_options *o, pk_measurer *measurer, tuning *T_out) {
  char *text;
  size_t len;
  pk_te_program *prog;
  pk_task task;
  pk_target_fp fp;
  pk_tunedb *db = NULL;
  pk_status s = pk_read_file(ctx, o->input, &text, &len);
  if (s == PK_OK) s = pk_te_parse(ctx, text, len, o->input, &prog);
  if (s == PK_OK) s = pk_task_from_program(ctx, prog, o->target, &task);
  if (s == PK_OK) s = pk_target_fp_detect(ctx, o->target, &fp);
  if (s == PK_OK) s = pk_db_open(ctx, o->db, PK_DB_OPEN_CREATE, &db);
  if (s == PK_OK) s = pk_db_target_add(db, &fp);
  if (s == PK_OK) s = pk_db_workload_add(db, &task);
  if (s != PK_OK) {
    if (db) pk_db_close(db);
    return s;
  }
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  *T_out = (tuning){.ctx = ctx, .db = db, .measurer = measurer, .task = &task, .fp = &fp,
                    .host = pk_strdup(ctx, host)};
  tuning *T = T_out;

  pk_record *old = NULL;
  int64_t nold = 0;
  s = pk_db_history(db, task.workload, fp.key, &old, &nold);
  for (int64_t i = 0; i < nold && s == PK_OK; i++)
    if (old[i].meas.status == PK_MEAS_OK && old[i].meas.gflops > T->best_gflops) T->best_gflops = old[i].meas.gflops;
  int64_t done = o->resume ? nold : 0; /* --trials is the total per task with --resume */
  T->trial = nold;

  const char *settings = pk_sprintf(ctx,
      "{\"batch\":%lld,\"min_ms\":%lld,\"patience\":%lld,\"resume\":%s,\"seed\":%lld,"
      "\"time_budget_s\":%g,\"timeout_s\":%g,\"trials\":%lld,\"tuner\":\"%s\"}",
      (long long)o->batch, (long long)o->min_ms, (long long)o->patience, o->resume ? "true" : "false",
      (long long)o->seed, o->time_budget_s, o->timeout_s, (long long)o->trials, o->tuner);
  if (s == PK_OK) s = pk_db_run_begin(db, o->tuner, settings, &T->run_id);

  pk_space *space = NULL;
  pk_tuner *tuner = NULL;
  if (s == PK_OK) s = pk_space_new(ctx, &task, &space);
  if (s == PK_OK) {
    pk_tuner_kind kind;
    pk_tuner_kind_from_name(o->tuner, &kind);
    pk_tuner_options topts;
    pk_tuner_options_default(&topts);
    topts.patience = (int)o->patience;
    tuner = pk_tuner_new_opts(ctx, kind, &task, space, (uint64_t)o->seed, &topts);
    pk_tuner_seed_history(tuner, old, (int)nold);
  }
  printf("tuning %s (%s) on %s: %llu configs in the space, %lld records already\n", task.name,
         pk_task_class_name(task.cls), fp.target,
         space ? (unsigned long long)pk_space_size(space) : 0ULL, (long long)nold);
  fflush(stdout); /* before the progress lines on stderr */

  int64_t t0 = pkrt_now_ns();
  /* The default schedule first: the baseline every report compares with. */
  if (s == PK_OK && done < o->trials) {
    pk_candidate def = {.kind = PK_CAND_SCHEDULE, .trace = DEFAULT_TRACE, .knobs = "{}"};
    char hex[2 * PKRT_SHA256_BYTES + 1];
    pkrt_sha256_hex(def.trace, strlen(def.trace), hex);
    def.trace_hash = pk_strdup(ctx, hex);
    int measured;
    s = measure_batch(T, &def, 1, &measured);
    done += measured;
  }
  while (s == PK_OK && !interrupted && done < o->trials && !pk_tuner_done(tuner)) {
    double elapsed = (double)(pkrt_now_ns() - t0) * 1e-9;
    if (o->time_budget_s > 0 && elapsed >= o->time_budget_s) break;
    int want = (int)(o->trials - done < o->batch ? o->trials - done : o->batch), got, measured;
    pk_candidate *cands = pk_alloc(ctx, sizeof *cands * (size_t)want);
    pk_tuner_next_batch(tuner, want, cands, &got);
    if (!got) break;
    s = measure_batch(T, cands, got, &measured);
    for (int i = 0; i < measured && s == PK_OK; i++) pk_tuner_update(tuner, &T->pending[i].cand, &T->pending[i].meas);
    done += measured;
    progress(T, o, done, o->trials, (double)(pkrt_now_ns() - t0) * 1e-9, false);
  }
  if (isatty(STDERR_FILENO)) progress(T, o, done, o->trials, (double)(pkrt_now_ns() - t0) * 1e-9, true);

  pk_db_run_status end = interrupted || s != PK_OK ? PK_DB_RUN_INTERRUPTED : PK_DB_RUN_FINISHED;
  pk_status fs = pk_db_run_finish(db, T->run_id, end);
  if (s == PK_OK) s = fs;
  if (s == PK_OK) {
    pk_record best;
    pk_db_match match;
    s = pk_db_best(db, task.workload, fp.key, NULL, &best, &match);
    if (s == PK_OK && match != PK_DB_MATCH_NONE)
      printf("%s: %lld new records (%lld failed); best %.2f GFLOP/s (%s%s%s)\n",
             interrupted ? "interrupted" : "done", (long long)T->committed, (long long)T->failed,
             best.meas.gflops, best.cand.kind == PK_CAND_EXTERN ? "extern " : "generated",
             best.cand.kind == PK_CAND_EXTERN ? best.cand.extern_sym : "",
             best.cand.kind == PK_CAND_EXTERN ? "" : " kernel");
    else if (s == PK_OK)
      printf("%s: no candidate measured successfully\n", interrupted ? "interrupted" : "done");
  }
  pk_tuner_free(tuner);
  pk_space_free(space);
  pk_db_close(db);
  return s;
}

int pk_cmd_tune(int argc, char **argv) {
  tune_options o;
  int rc = parse_options(argc, argv, &o);
  if (rc != PK_EXIT_OK) return rc;
  pk_ctx *ctx = pk_ctx_new();
  /* The measurement worker is forked before anything else exists (no threads, no open
   * database): forking a process that has threads can hang. */
  pk_measure_settings set;
  pk_measure_settings_default(&set);
  set.timeout_s = o.timeout_s;
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
