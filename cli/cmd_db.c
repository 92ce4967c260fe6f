/* cmd_db.c — `pock db best|history|stats|merge|export|import`: reading and moving the
 * tuning database (docs/tuning-db.md). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "pk_tunedb.h"
#include "rt_file.h"

typedef struct db_options {
  const char *verb;
  const char *db;
  const char *files[64]; /* merge: OTHER...; import: FILE */
  int nfiles;
  const char *workload;  /* --workload HEX (a unique prefix will do) */
  const char *te;        /* --te FILE: the workload of a TE file */
  const char *target;    /* --target T: this device's fingerprint for T */
  int64_t top;           /* export --top N: the N fastest OK records of each kind (0: all) */
} db_options;

static const char *const verbs[] = {"best", "history", "stats", "merge", "export", "import"};

static int parse_options(int argc, char **argv, db_options *o) {
  memset(o, 0, sizeof *o);
  if (argc < 1) return pk_cli_usage("db: expected a verb: best, history, stats, merge, export or import");
  o->verb = argv[0];
  bool known = false;
  for (size_t i = 0; i < sizeof verbs / sizeof verbs[0]; i++) known |= !strcmp(o->verb, verbs[i]);
  if (!known)
    return pk_cli_usage("db: unknown verb '%s' (expected best, history, stats, merge, export or import)",
                        o->verb);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--workload") || !strcmp(a, "--te") || !strcmp(a, "--target")) {
      if (i + 1 >= argc) return pk_cli_usage("db: %s needs a value", a);
      const char **slot = !strcmp(a, "--workload") ? &o->workload : !strcmp(a, "--te") ? &o->te : &o->target;
      *slot = argv[++i];
    } else if (!strcmp(a, "--top")) {
      if (i + 1 >= argc || !pkrt_cli_parse_i64(argv[i + 1], &o->top) || o->top < 1)
        return pk_cli_usage("db: --top needs a count >= 1");
      i++;
    } else if (a[0] == '-' && a[1]) {
      return pk_cli_usage("db %s: unknown option '%s'", o->verb, a);
    } else if (!o->db) {
      o->db = a;
    } else if (o->nfiles < (int)(sizeof o->files / sizeof o->files[0])) {
      o->files[o->nfiles++] = a;
    } else {
      return pk_cli_usage("db %s: too many files", o->verb);
    }
  }
  if (!o->db) return pk_cli_usage("db %s: expected DB (a tuning database file)", o->verb);
  bool lookup = !strcmp(o->verb, "best") || !strcmp(o->verb, "history");
  if (!lookup && (o->workload || o->te || o->target))
    return pk_cli_usage("db %s: --workload, --te and --target go with best and history", o->verb);
  if (o->top && strcmp(o->verb, "export")) return pk_cli_usage("db %s: --top goes with export", o->verb);
  if (o->workload && o->te) return pk_cli_usage("db %s: give --workload or --te, not both", o->verb);
  if (!strcmp(o->verb, "history") && !o->workload && !o->te)
    return pk_cli_usage("db history: expected --workload HEX or --te FILE");
  if (!strcmp(o->verb, "merge") && o->nfiles == 0) return pk_cli_usage("db merge: expected DB OTHER...");
  if (!strcmp(o->verb, "import") && o->nfiles != 1) return pk_cli_usage("db import: expected DB FILE");
  if (strcmp(o->verb, "merge") && strcmp(o->verb, "import") && o->nfiles)
    return pk_cli_usage("db %s: one DB expected, got '%s' too", o->verb, o->files[0]);
  return PK_EXIT_OK;
}

/* The workload the options name (NULL: all), as a full key. */
static pk_status selected_workload(pk_ctx *ctx, pk_tunedb *db, const db_options *o,
                                   const char **key) {
  *key = NULL;
  if (o->workload) return pk_db_workload_resolve(db, o->workload, key);
  if (!o->te) return PK_OK;
  char *text;
  size_t len;
  pk_te_program *prog;
  pk_task task;
  pk_status s = pk_read_file(ctx, o->te, &text, &len);
  if (s == PK_OK) s = pk_te_parse(ctx, text, len, o->te, &prog);
  if (s == PK_OK) s = pk_task_from_program(ctx, prog, o->target, &task);
  if (s == PK_OK) *key = task.workload;
  return s;
}

static void print_best_header(void) {
  printf("%-12s  %-28s  %-18s  %-12s  %-7s  %-8s  %9s  %11s  %5s  %s\n", "workload", "name", "target",
         "target key", "match", "kind", "GFLOP/s", "median us", "trial", "record");
}

static void print_best(const pk_db_stats_row *w, const char *target, const pk_record *r,
                       pk_db_match m) {
  printf("%-12.12s  %-28s  %-18s  %-12.12s  %-7s  %-8s  %9.2f  %11.2f  %5lld  %.12s\n", w->workload,
         w->name, target, r->target_key, m == PK_DB_MATCH_EXACT ? "exact" : "generic",
         r->cand.kind == PK_CAND_EXTERN ? "extern" : "schedule", r->meas.gflops,
         r->meas.timing.median_ns * 1e-3, (long long)r->trial, r->id);
}

/* best: per workload (and, without --target, per fingerprint) the fastest OK record. */
static int db_best(pk_ctx *ctx, pk_tunedb *db, const db_options *o) {
  const char *workload;
  pk_target_fp fp;
  pk_db_stats_row *rows;
  int64_t nrows;
  pk_status s = selected_workload(ctx, db, o, &workload);
  if (s == PK_OK && o->target) s = pk_target_fp_detect(ctx, o->target, &fp);
  if (s == PK_OK && o->target) {
    /* for a device, answer as `pock compile --db` would: this build's records first */
    pk_cc *cc;
    if (pk_cc_new(ctx, NULL, &cc) == PK_OK) pk_db_prefer_cc(db, cc);
    else pk_ctx_clear_error(ctx);
  }
  if (s == PK_OK) s = pk_db_stats(db, &rows, &nrows);
  if (s != PK_OK) return pk_cli_fail(ctx, s);
  int printed = 0;
  for (int64_t i = 0; i < nrows; i++) {
    const pk_db_stats_row *w = &rows[i];
    if (workload && strcmp(w->workload, workload)) continue;
    /* with --target, each workload once: the first of its rows stands for it */
    if (o->target && i > 0 && !strcmp(rows[i - 1].workload, w->workload)) continue;
    pk_record r;
    pk_db_match m;
    s = o->target ? pk_db_best(db, w->workload, fp.key, fp.target, &r, &m)
                  : pk_db_best(db, w->workload, w->target_key, NULL, &r, &m);
    if (s != PK_OK) return pk_cli_fail(ctx, s);
    if (m == PK_DB_MATCH_NONE) continue;
    if (printed++ == 0) print_best_header();
    print_best(w, o->target ? fp.target : w->target, &r, m);
  }
  if (printed) return PK_EXIT_OK;
  fprintf(stderr, "pock: error: %s: no successful record%s%s%s%s\n", pk_db_path(db),
          workload ? " for workload " : "", workload ? workload : "", o->target ? " on target " : "",
          o->target ? o->target : "");
  return PK_EXIT_ERROR;
}

/* history: the tuning curve, one line per record, with the best so far. */
static int db_history(pk_ctx *ctx, pk_tunedb *db, const db_options *o) {
  const char *workload;
  pk_target_fp fp;
  pk_record *recs;
  int64_t n;
  pk_status s = selected_workload(ctx, db, o, &workload);
  if (s == PK_OK && o->target) s = pk_target_fp_detect(ctx, o->target, &fp);
  if (s == PK_OK) s = pk_db_history(db, workload, o->target ? fp.key : NULL, &recs, &n);
  if (s != PK_OK) return pk_cli_fail(ctx, s);
  if (n == 0) {
    fprintf(stderr, "pock: error: %s: no records for workload %s%s%s\n", pk_db_path(db), workload,
            o->target ? " on target " : "", o->target ? o->target : "");
    return PK_EXIT_ERROR;
  }
  printf("%5s  %4s  %-12s  %-13s  %-8s  %11s  %9s  %9s  %-12s  %s\n", "trial", "run", "target key",
         "status", "kind", "median us", "GFLOP/s", "best", "record", "error");
  double best = 0;
  for (int64_t i = 0; i < n; i++) {
    const pk_record *r = &recs[i];
    bool ok = r->meas.status == PK_MEAS_OK;
    if (ok && r->meas.gflops > best) best = r->meas.gflops;
    printf("%5lld  %4lld  %-12.12s  %-13s  %-8s  ", (long long)r->trial, (long long)r->run_id,
           r->target_key, pk_meas_status_name(r->meas.status),
           r->cand.kind == PK_CAND_EXTERN ? "extern" : "schedule");
    if (ok) printf("%11.2f  %9.2f  ", r->meas.timing.median_ns * 1e-3, r->meas.gflops);
    else printf("%11s  %9s  ", "-", "-");
    printf("%9.2f  %.12s  %s\n", best, r->id, r->meas.error ? r->meas.error : "");
  }
  return PK_EXIT_OK;
}

/* stats: per workload and fingerprint, records by status and the best of each kind. */
static int db_stats(pk_ctx *ctx, pk_tunedb *db) {
  pk_db_stats_row *rows;
  int64_t n;
  pk_status s = pk_db_stats(db, &rows, &n);
  if (s != PK_OK) return pk_cli_fail(ctx, s);
  printf("%-12s  %-28s  %-18s  %-12s  %7s  %5s  %9s  %9s  %9s  %-9s  %s\n", "workload", "name",
         "target", "target key", "records", "ok", "GFLOP/s", "generated", "extern", "winner",
         "failures");
  for (int64_t i = 0; i < n; i++) {
    const pk_db_stats_row *r = &rows[i];
    const char *winner = r->best_gflops == 0                                   ? "-"
                         : r->best_extern_gflops > r->best_generated_gflops ? "extern"
                                                                                : "generated";
    printf("%-12.12s  %-28s  %-18s  %-12.12s  %7lld  %5lld  %9.2f  %9.2f  %9.2f  %-9s  ", r->workload,
           r->name, r->target, r->target_key, (long long)r->records,
           (long long)r->by_status[PK_MEAS_OK], r->best_gflops, r->best_generated_gflops,
           r->best_extern_gflops, winner);
    int listed = 0;
    for (int st = PK_MEAS_OK + 1; st < PK_DB_NSTATUS; st++)
      if (r->by_status[st])
        printf("%s%s=%lld", listed++ ? " " : "", pk_meas_status_name((pk_meas_status)st),
               (long long)r->by_status[st]);
    printf("%s\n", listed ? "" : "-");
  }
  printf("%lld workload/target pair%s\n", (long long)n, n == 1 ? "" : "s");
  return PK_EXIT_OK;
}

static void print_counts(const char *from, const pk_db_counts *c) {
  printf("%s: %lld new records (of %lld), %lld new runs, %lld new targets, %lld new workloads\n",
         from, (long long)c->records, (long long)c->records_seen, (long long)c->runs,
         (long long)c->targets, (long long)c->workloads);
}

static int db_merge(pk_ctx *ctx, pk_tunedb *db, const db_options *o) {
  for (int i = 0; i < o->nfiles; i++) {
    pk_db_counts c;
    pk_status s = pk_db_merge(db, o->files[i], &c);
    if (s != PK_OK) return pk_cli_fail(ctx, s);
    print_counts(o->files[i], &c);
  }
  return PK_EXIT_OK;
}

static int db_import(pk_ctx *ctx, pk_tunedb *db, const char *file) {
  bool use_stdin = !strcmp(file, "-");
  FILE *in = stdin;
  if (!use_stdin) {
    /* libpockrt's input rules: a FIFO or device is refused, never waited on. */
    pkrt_ctx *rt = pkrt_ctx_new(1);
    struct stat st;
    int fd = -1;
    if (!rt || rt_file_open_input(rt, file, &fd, &st) != PKRT_OK || !(in = fdopen(fd, "r"))) {
      pk_status s = pk_ctx_fail(ctx, PK_ERR_IO, "cannot open %s", rt && fd < 0 ? pkrt_ctx_error(rt) : file);
      if (fd >= 0) close(fd);
      pkrt_ctx_free(rt);
      return pk_cli_fail(ctx, s);
    }
    pkrt_ctx_free(rt);
  }
  pk_db_counts c;
  pk_status s = pk_db_import_jsonl(db, in, use_stdin ? "(stdin)" : file, &c);
  if (!use_stdin) fclose(in);
  if (s != PK_OK) return pk_cli_fail(ctx, s);
  print_counts(use_stdin ? "(stdin)" : file, &c);
  return PK_EXIT_OK;
}

int pk_cmd_db(int argc, char **argv) {
  db_options o;
  int rc = parse_options(argc, argv, &o);
  if (rc != PK_EXIT_OK) return rc;
  pk_ctx *ctx = pk_ctx_new();
  /* Only writers create a database; a typo in a reader's path is an error. */
  bool writes = !strcmp(o.verb, "merge") || !strcmp(o.verb, "import");
  pk_tunedb *db;
  pk_status s = pk_db_open(ctx, o.db, writes ? PK_DB_OPEN_CREATE : PK_DB_OPEN_EXISTING, &db);
  if (s != PK_OK) {
    rc = pk_cli_fail(ctx, s);
    pk_ctx_free(ctx);
    return rc;
  }
  if (!strcmp(o.verb, "best")) rc = db_best(ctx, db, &o);
  else if (!strcmp(o.verb, "history")) rc = db_history(ctx, db, &o);
  else if (!strcmp(o.verb, "stats")) rc = db_stats(ctx, db);
  else if (!strcmp(o.verb, "merge")) rc = db_merge(ctx, db, &o);
  else if (!strcmp(o.verb, "import")) rc = db_import(ctx, db, o.files[0]);
  else {
    int64_t n;
    s = pk_db_export_jsonl_top(db, stdout, o.top, &n);
    rc = s == PK_OK ? PK_EXIT_OK : pk_cli_fail(ctx, s);
  }
  pk_db_close(db);
  pk_ctx_free(ctx);
  return rc;
}
