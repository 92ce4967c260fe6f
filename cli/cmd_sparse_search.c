/* cmd_sparse_search.c — `pock sparse-search MODEL ... -o SPEC.json`: the most accurate
 * sparse-update scheme that fits a memory (and step-time) budget (driver/pk_driver.h,
 * docs/sparse-search.md); writes the spec and the reports. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pk_driver.h"
#include "pk_measurer.h"

static volatile sig_atomic_t stop_requested;
static void on_signal(int sig) { (void)sig; stop_requested = 1; }

static const char search_help[] =
    "usage: pock sparse-search MODEL --data TRAIN --val VAL --budget-memory BYTES -o SPEC.json\n"
    "                          [options]\n"
    "\n"
    "Finds the sparse-update scheme (docs/sparse-update.md) with the best validation accuracy\n"
    "whose backward-pass memory (saved activations + gradients + optimizer state, as\n"
    "`pock compile --print-memory` prints it) fits BYTES: fine-tunes the head alone and with\n"
    "each candidate alone (each lower layer's bias; its weight at 1/8, 1/4, 1/2, all input\n"
    "channels), searches the schemes by summed gain, fine-tunes the best few and writes the\n"
    "one with the best measured validation accuracy. Fine-tunes are kept in the cache file:\n"
    "a rerun, or a search with another budget, trains nothing again. docs/sparse-search.md.\n"
    "\n"
    "options:\n"
    "  -o SPEC.json            the chosen scheme's spec\n"
    "  --data FILE, --val FILE training and validation data (as `pock train`)\n"
    "  --budget-memory BYTES   BP memory budget\n"
    "  --budget-step-ms MS     step-time budget (tuning records, else timed kernels)\n"
    "  --weights W.pkw         the starting weights (e.g. pretrained)\n"
    "  --reinit GLOB           params that keep the model's initial values (the new head)\n"
    "  --epochs E              epochs of each contribution run (default 10)\n"
    "  --verify K              schemes verified by fine-tuning (default 3)\n"
    "  --verify-epochs E       epochs of each verification run (default: --epochs)\n"
    "  --verify-lrs X,Y,...    fine-tune each verified scheme at each learning rate and keep\n"
    "                          its best (default: the one lr, --lr or the model's)\n"
    "  --seed S                shuffling and search seed (default 0)\n"
    "  --exact-max N           search spaces of up to N schemes exhaustively, larger ones\n"
    "                          by the seeded evolutionary search (default 4096)\n"
    "  --cache FILE            the cache (default: sparse-search.cache.json beside -o)\n"
    "  --report R.txt          also write the text report there\n"
    "  --html R.html           the report as one HTML file (accuracy vs memory chart)\n"
    "  --scale X, --label-column K   as `pock train`\n"
    "  --batch B, --optimizer sgd|adam|adamw, --lr X, --momentum X, --weight-decay X,\n"
    "  --db DB, --target T, --cc CC  as `pock compile`\n"
    "  --no-timing             do not time kernels that have no tuning record\n"
    "\n"
    "Exit status: 0 success, 1 error (no scheme fits, bad model or data, interrupted), 2 usage.\n";

#define MAX_LRS 16

typedef struct cli_search {
  pk_search_options so;
  double lrs[MAX_LRS];
  const char *out, *report, *html;
  bool no_timing;
} cli_search;

static int parse_number(const char *a, const char *v, double lo, double hi, double *d) {
  if (!pkrt_cli_parse_double(v, d) || !(*d >= lo) || *d > hi)
    return pk_cli_usage("sparse-search: %s needs a number in [%g, %g]", a, lo, hi);
  return PK_EXIT_OK;
}

static int parse_int(const char *a, const char *v, int64_t lo, int64_t hi, int64_t *n) {
  if (!pkrt_cli_parse_i64(v, n) || *n < lo || *n > hi)
    return pk_cli_usage("sparse-search: %s needs an integer in %lld..%lld", a, (long long)lo,
                        (long long)hi);
  return PK_EXIT_OK;
}

static int parse_valued(cli_search *c, const char *a, char *v) {
  pk_search_options *o = &c->so;
  pk_compile_options *co = &o->compile;
  int64_t n;
  double d;
  int rc = PK_EXIT_OK;
  const struct { const char *name; const char **field; } strs[] = {
      {"-o", &c->out},          {"--output", &c->out},       {"--data", &o->data},
      {"--val", &o->val},       {"--weights", &co->weights}, {"--reinit", &co->reinit},
      {"--cache", &o->cache},   {"--report", &c->report},    {"--html", &c->html},
      {"--db", &co->db},        {"--target", &co->target},   {"--cc", &co->cc}};
  for (size_t k = 0; k < sizeof strs / sizeof *strs; k++)
    if (!strcmp(a, strs[k].name)) return *strs[k].field = v, PK_EXIT_OK;
  if (!strcmp(a, "--budget-memory")) {
    if ((rc = parse_int(a, v, 1, INT64_MAX, &n)) == PK_EXIT_OK) o->budget_bytes = n;
  } else if (!strcmp(a, "--budget-step-ms")) {
    if ((rc = parse_number(a, v, 1e-6, 1e9, &d)) == PK_EXIT_OK) o->budget_step_ms = d;
  } else if (!strcmp(a, "--epochs") || !strcmp(a, "--verify-epochs") || !strcmp(a, "--verify")) {
    if ((rc = parse_int(a, v, 1, 100000, &n)) == PK_EXIT_OK)
      *(!strcmp(a, "--epochs") ? &o->epochs : !strcmp(a, "--verify") ? &o->verify
                                                                      : &o->verify_epochs) = (int)n;
  } else if (!strcmp(a, "--verify-lrs")) {
    o->nverify_lrs = 0;
    for (char *p = strtok(v, ","); p; p = strtok(NULL, ",")) {
      if (o->nverify_lrs == MAX_LRS)
        return pk_cli_usage("sparse-search: --verify-lrs takes at most %d rates", MAX_LRS);
      if ((rc = parse_number(a, p, 1e-30, 1e6, &d)) != PK_EXIT_OK) return rc;
      c->lrs[o->nverify_lrs++] = d;
    }
    if (!o->nverify_lrs) return pk_cli_usage("sparse-search: --verify-lrs needs rates: X,Y,...");
    o->verify_lrs = c->lrs;
  } else if (!strcmp(a, "--exact-max")) {
    if ((rc = parse_int(a, v, 1, INT32_MAX, &n)) == PK_EXIT_OK) o->exact_max = n;
  } else if (!strcmp(a, "--seed")) {
    if ((rc = parse_int(a, v, 0, INT64_MAX, &n)) == PK_EXIT_OK) o->seed = (uint64_t)n;
  } else if (!strcmp(a, "--batch")) {
    if ((rc = parse_int(a, v, 1, 1000000, &n)) == PK_EXIT_OK) co->batch = n;
  } else if (!strcmp(a, "--label-column")) {
    if ((rc = parse_int(a, v, -100000, 100000, &n)) == PK_EXIT_OK) o->label_column = (int)n;
  } else if (!strcmp(a, "--scale")) {
    if ((rc = parse_number(a, v, 1e-30, 1e30, &d)) == PK_EXIT_OK) o->scale = d;
  } else if (!strcmp(a, "--lr")) {
    if ((rc = parse_number(a, v, 1e-30, 1e6, &d)) == PK_EXIT_OK) co->lr = d;
  } else if (!strcmp(a, "--momentum")) {
    if ((rc = parse_number(a, v, 0, 0.999999, &d)) == PK_EXIT_OK) co->momentum = d;
  } else if (!strcmp(a, "--weight-decay")) {
    if ((rc = parse_number(a, v, 0, 1e6, &d)) == PK_EXIT_OK) co->weight_decay = d;
  } else if (!strcmp(a, "--optimizer")) {
    if (strcmp(v, "sgd") && strcmp(v, "adam") && strcmp(v, "adamw"))
      return pk_cli_usage("sparse-search: unknown optimizer '%s' (sgd, adam, adamw)", v);
    co->optimizer = v;
  } else {
    return pk_cli_usage("sparse-search: unknown option '%s'", a);
  }
  return rc;
}

/* Returns -1 after --help, else an exit code. */
static int parse_options(int argc, char **argv, cli_search *c) {
  *c = (cli_search){.so = pk_search_defaults()};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(search_help, stdout);
      return -1;
    }
    if (!strcmp(a, "--no-timing")) {
      c->no_timing = true;
      continue;
    }
    if (a[0] != '-' || !a[1]) {
      if (c->so.compile.model)
        return pk_cli_usage("sparse-search: one MODEL expected, got '%s' and '%s'",
                            c->so.compile.model, a);
      c->so.compile.model = a;
      continue;
    }
    if (i + 1 >= argc) return pk_cli_usage("sparse-search: %s needs a value", a);
    int rc = parse_valued(c, a, argv[++i]);
    if (rc != PK_EXIT_OK) return rc;
  }
  const pk_search_options *o = &c->so;
  if (!o->compile.model) return pk_cli_usage("sparse-search: expected MODEL (a graph JSON or ONNX file)");
  if (!c->out) return pk_cli_usage("sparse-search: expected -o SPEC.json");
  if (!o->data || !o->val) return pk_cli_usage("sparse-search: --data and --val are required");
  if (!o->budget_bytes) return pk_cli_usage("sparse-search: --budget-memory BYTES is required");
  if (o->compile.reinit && !o->compile.weights)
    return pk_cli_usage("sparse-search: --reinit goes with --weights");
  if (o->budget_step_ms > 0 && c->no_timing && !o->compile.db)
    return pk_cli_usage("sparse-search: --budget-step-ms needs step times: --db or kernel timing "
                        "(leave out --no-timing)");
  return PK_EXIT_OK;
}

/* The outputs, checked before any training: none may be an input or another output. */
static int check_outputs(const cli_search *c) {
  const pk_search_options *o = &c->so;
  const char *outs[] = {c->out, c->report, c->html, o->cache};
  const char *ins[] = {o->compile.model, o->compile.weights, o->data, o->val, o->compile.db};
  for (int k = 0; k < 4; k++) {
    if (!outs[k]) continue;
    const char *against[9];
    int n = 0;
    for (int j = 0; j < 4; j++)
      if (j != k) against[n++] = outs[j];
    for (int j = 0; j < 5; j++) against[n++] = ins[j];
    if (pkrt_cli_check_output("pock", outs[k], 0, against, n) != 0) return PK_EXIT_ERROR;
  }
  return PK_EXIT_OK;
}

static int write_text(const cli_search *c, const char *path, const char *text) {
  const pk_search_options *o = &c->so;
  const char *ins[] = {o->compile.model, o->compile.weights, o->data, o->val, o->compile.db,
                       o->cache};
  return pkrt_cli_write_file("pock", path, text, strlen(text), ins, 6);
}

int pk_cmd_sparse_search(int argc, char **argv) {
  cli_search c;
  int rc = parse_options(argc, argv, &c);
  if (rc < 0) return PK_EXIT_OK; /* --help */
  if (rc != PK_EXIT_OK) return rc;
  char *cache_default = NULL;
  if (!c.so.cache) {
    const char *slash = strrchr(c.out, '/');
    int dir = slash ? (int)(slash - c.out) + 1 : 0;
    cache_default = malloc((size_t)dir + 32);
    if (!cache_default) return pk_cli_usage("sparse-search: out of memory");
    snprintf(cache_default, (size_t)dir + 32, "%.*ssparse-search.cache.json", dir, c.out);
    c.so.cache = cache_default;
  }
  if ((rc = check_outputs(&c)) != PK_EXIT_OK) {
    free(cache_default);
    return rc;
  }
  pk_ctx *ctx = pk_ctx_new();
  pk_measurer *m = NULL;
  pk_status s = PK_OK;
  if (!c.no_timing) {
    /* first, before anything could start a thread (pk_measurer.h) */
    pk_measure_settings set;
    pk_measure_settings_default(&set);
    set.min_ns = 10000000; /* one timing per kernel: 10 ms of repeats */
    s = pk_measurer_new(ctx, &set, &m);
  }
  struct sigaction sa = {0};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  c.so.measurer = m;
  c.so.stop = &stop_requested;
  c.so.log = stdout;
  c.so.html = c.html != NULL;
  pk_search_result r;
  if (s == PK_OK) s = pk_sparse_search(ctx, &c.so, &r);
  pk_measurer_free(m);
  if (s != PK_OK) {
    rc = pk_cli_fail(ctx, s);
    if (stop_requested) fprintf(stderr, "pock: the runs finished so far are in %s\n", c.so.cache);
  } else {
    rc = write_text(&c, c.out, r.spec);
    if (rc == PK_EXIT_OK && c.report) rc = write_text(&c, c.report, r.report);
    if (rc == PK_EXIT_OK && c.html) rc = write_text(&c, c.html, r.html);
    if (rc == PK_EXIT_OK)
      printf("wrote %s (%d fine-tunes run, %d from the cache %s)\n", c.out, r.runs_trained,
             r.runs_cached, c.so.cache);
  }
  pk_ctx_free(ctx);
  free(cache_default);
  return pkrt_cli_finish("pock", rc);
}
