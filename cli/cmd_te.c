/* cmd_te.c — `pock te check|c|run FILE`: the tensor-expression workbench. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pk_backend.h"
#include "pk_schedule.h"

typedef struct te_options {
  const char *verb;
  const char *file;
  const char *cc;
  const char *cflags;
  const char *target;     /* target string (docs/targets.md); NULL: c */
  const char *dump_after; /* "parse" or "lower" (te c) */
  const char *schedule;   /* a JSON schedule trace (docs/schedule.md) */
  int64_t seed;
  int64_t threads; /* the runtime's thread pool for parallel loops */
  bool bench;
} te_options;

static int parse_options(int argc, char **argv, te_options *o) {
  memset(o, 0, sizeof *o);
  o->seed = 1;
  o->threads = 1;
  if (argc < 1) return pk_cli_usage("te: expected a verb: check, c or run");
  o->verb = argv[0];
  if (strcmp(o->verb, "check") && strcmp(o->verb, "c") && strcmp(o->verb, "run"))
    return pk_cli_usage("te: unknown verb '%s' (expected check, c or run)", o->verb);
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    bool has_value = i + 1 < argc;
    if (!strcmp(a, "--bench")) {
      o->bench = true;
    } else if (!strcmp(a, "--seed")) {
      if (!has_value || !pkrt_cli_parse_i64(argv[++i], &o->seed) || o->seed < 0)
        return pk_cli_usage("te: --seed needs a non-negative integer");
    } else if (!strcmp(a, "--threads")) {
      if (!has_value || !pkrt_cli_parse_i64(argv[++i], &o->threads) || o->threads < 1 || o->threads > 512)
        return pk_cli_usage("te: --threads needs an integer in 1..512");
    } else if (!strcmp(a, "--cc") || !strcmp(a, "--cflags") || !strcmp(a, "--dump-after") ||
               !strcmp(a, "--schedule") || !strcmp(a, "--target")) {
      if (!has_value) return pk_cli_usage("te: %s needs a value", a);
      const char **slot = !strcmp(a, "--cc")       ? &o->cc
                          : !strcmp(a, "--cflags") ? &o->cflags
                          : !strcmp(a, "--schedule") ? &o->schedule
                          : !strcmp(a, "--target") ? &o->target
                                                   : &o->dump_after;
      *slot = argv[++i];
    } else if (a[0] == '-' && a[1]) {
      return pk_cli_usage("te: unknown option '%s'", a);
    } else if (o->file) {
      return pk_cli_usage("te: one FILE expected, got '%s' and '%s'", o->file, a);
    } else {
      o->file = a;
    }
  }
  if (!o->file) return pk_cli_usage("te %s: expected FILE", o->verb);
  if (o->dump_after && strcmp(o->dump_after, "parse") && strcmp(o->dump_after, "lower"))
    return pk_cli_usage("te: --dump-after takes 'parse' or 'lower'");
  if (o->bench && strcmp(o->verb, "run")) return pk_cli_usage("te: --bench goes with `te run`");
  if (o->schedule && !strcmp(o->verb, "check"))
    return pk_cli_usage("te: --schedule goes with `te c` and `te run`");
  return PK_EXIT_OK;
}

/* The target's backend (its compiler found, flags for its CPU unless --cflags). */
static pk_status open_backend(pk_ctx *ctx, const te_options *o, pk_backend **out) {
  pk_target *t;
  pk_status s = pk_target_parse(ctx, o->target, o->cc, &t);
  pk_backend_options bo = {.cc = o->cc, .flags = o->cflags};
  if (s == PK_OK) s = pk_backend_new(ctx, t, &bo, out);
  return s;
}

static int te_c(pk_ctx *ctx, const te_options *o, pk_te_program *prog, pk_schedule *sched) {
  if (o->dump_after && !strcmp(o->dump_after, "parse")) {
    fputs(pk_te_print(ctx, prog), stdout);
    return PK_EXIT_OK;
  }
  pk_lfunc *f;
  pk_status s = pk_sched_lower(ctx, prog, sched, "k0", &f);
  if (s != PK_OK) return pk_cli_fail(ctx, s);
  if (o->dump_after) {
    fputs(pk_lfunc_print(ctx, f), stdout);
    return PK_EXIT_OK;
  }
  /* the target's source, through its backend's emitter; printed, not built (so no
   * compiler needs to run) */
  pk_target *t;
  pk_cgen_unit *u = NULL;
  char *src;
  s = pk_target_parse(ctx, o->target, o->cc, &t);
  const pk_backend_kind *kind = s == PK_OK ? pk_backend_kind_of(t->kind) : NULL;
  if (kind && !kind->emit_new)
    s = pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "target '%s': %s", t->text, kind->missing);
  if (s == PK_OK) s = kind->emit_new(ctx, t, &u);
  if (s == PK_OK) s = pk_cgen_unit_add(u, f, NULL);
  if (s == PK_OK) s = pk_cgen_unit_source(u, &src);
  pk_cgen_unit_free(u);
  if (s != PK_OK) return pk_cli_fail(ctx, s);
  fputs(src, stdout);
  return PK_EXIT_OK;
}

static int te_run(pk_ctx *ctx, const te_options *o, pk_te_program *prog, pk_schedule *sched) {
  pk_backend *be;
  pk_status s = open_backend(ctx, o, &be);
  if (s == PK_OK && !pk_backend_table(be)->load) /* GPU kernels: emitted, not run here */
    s = pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "target '%s': running %s kernels needs the GPU "
                    "runtime, which this build lacks (`pock te c` prints them)",
                    pk_backend_target(be)->text, pk_backend_table(be)->name);
  if (s != PK_OK) return pk_cli_fail(ctx, s);
  pkrt_ctx *rt = pkrt_ctx_new((int)o->threads);
  pkrt_module *m = NULL;
  int rc = PK_EXIT_OK;
  s = pk_build_scheduled(ctx, pk_backend_cc(be), rt, &prog, &sched, 1, &m);
  if (s == PK_OK) {
    pk_kernel_check_result res;
    const pkrt_kernel_desc *k = pkrt_module_find(m, "k0");
    s = pk_kernel_check_scheduled(ctx, rt, prog, sched, k, (uint64_t)o->seed, &res);
    if (s == PK_OK) {
      printf("%d output%s checked against the interpreter (seed %lld): worst error %.3g "
             "(%.3g of the bound) in %s\nok\n",
             res.noutputs, res.noutputs == 1 ? "" : "s", (long long)o->seed, res.worst_err,
             res.worst_ratio, res.worst_tensor ? res.worst_tensor : "-");
      if (o->bench) s = pk_cli_te_bench(ctx, rt, prog, k, (uint64_t)o->seed);
      if (s == PK_OK && sched) printf("schedule: %s (%d steps)\n", o->schedule, sched->nsteps);
    }
  }
  if (s != PK_OK) rc = pk_cli_fail(ctx, s);
  if (m) pkrt_module_free(m);
  pkrt_ctx_free(rt);
  return rc;
}

int pk_cmd_te(int argc, char **argv) {
  te_options o;
  int rc = parse_options(argc, argv, &o);
  if (rc != PK_EXIT_OK) return rc;
  pk_ctx *ctx = pk_ctx_new();
  char *text;
  size_t len;
  pk_te_program *prog = NULL;
  pk_schedule *sched = NULL;
  pk_status s = pk_read_file(ctx, o.file, &text, &len);
  if (s == PK_OK) s = pk_te_parse(ctx, text, len, o.file, &prog);
  if (s == PK_OK && o.schedule) {
    char *json;
    s = pk_read_file(ctx, o.schedule, &json, &len);
    if (s == PK_OK) s = pk_sched_from_json(ctx, prog, json, &sched);
  }
  if (s != PK_OK) {
    rc = pk_cli_fail(ctx, s);
  } else if (!strcmp(o.verb, "check")) {
    fputs(pk_te_print(ctx, prog), stdout);
  } else if (!strcmp(o.verb, "c")) {
    rc = te_c(ctx, &o, prog, sched);
  } else {
    rc = te_run(ctx, &o, prog, sched);
  }
  pk_ctx_free(ctx);
  return rc;
}
