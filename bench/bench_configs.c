/* bench_configs.c — times a few hand-picked configs of one TE's space (knobs JSON, as the
 * tuning database stores them, or whole schedule traces) side by side, each checked against
 * the interpreter first, beside OpenBLAS sgemm when the TE is a plain matmul: the quick way
 * to try a template change before tuning with it.
 *
 * Usage: bench_configs [--rounds R] FILE.te CONFIG [CONFIG ...]
 * CONFIG is a knobs JSON object ({"tile_m":16,...}) or a trace ({"version":1,"steps":...}),
 * inline or @FILE, or `preset`: the space's preset, what a kernel gets untuned (its knobs
 * and trace are printed, to start from or to lower with `pock te c --schedule`). Prints per config the median and fastest of R interleaved rounds (7
 * unless given) and the ratio of OpenBLAS's median to its median. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "pk_search.h"

enum { MAX_CONFIGS = 16 };

/* The schedule a CONFIG names: a trace replays as is; knobs go through the task's space. */
static pk_status config_schedule(pk_ctx *ctx, pk_space *sp, pk_te_program *p, const char *arg,
                                 pk_schedule **out) {
  char *text = (char *)arg;
  size_t len;
  if (arg[0] == '@') {
    pk_status st = pk_read_file(ctx, arg + 1, &text, &len);
    if (st != PK_OK) return st;
  }
  if (strstr(text, "\"steps\"")) return pk_sched_from_json(ctx, p, text, out);
  pk_config c;
  if (!strcmp(text, "preset")) {
    if (!pk_space_preset(sp, &c)) return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED, "the space has no preset");
    pk_status st = pk_space_schedule(sp, ctx, &c, out);
    if (st == PK_OK) printf("preset knobs %s\npreset trace %s\n", pk_space_knobs_json(ctx, sp, &c), pk_sched_to_json(*out));
    return st;
  }
  pk_status st = pk_space_config_from_knobs(sp, text, &c);
  return st != PK_OK ? st : pk_space_schedule(sp, ctx, &c, out);
}

int main(int argc, char **argv) {
  int rounds = 7;
  if (argc > 2 && !strcmp(argv[1], "--rounds")) {
    rounds = atoi(argv[2]);
    argc -= 2;
    argv += 2;
  }
  int n = argc - 2;
  if (n < 1 || n > MAX_CONFIGS || rounds < 1 || rounds > 1000) {
    fprintf(stderr, "usage: bench_configs [--rounds R] FILE.te CONFIG [CONFIG ...] (at most %d)\n", MAX_CONFIGS);
    return 2;
  }
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  int cpu = pk_measure_pin_thread();
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  char *text;
  size_t len;
  pk_te_program *p;
  pk_task task;
  pk_space *sp;
  pk_cc *cc;
  pk_host_buffers hb;
  if (pk_read_file(ctx, argv[1], &text, &len) != PK_OK || pk_te_parse(ctx, text, len, argv[1], &p) != PK_OK ||
      pk_task_from_program(ctx, p, "c", &task) != PK_OK || pk_space_new(ctx, &task, &sp) != PK_OK ||
      pk_cc_new(ctx, NULL, &cc) != PK_OK) {
    fprintf(stderr, "%s\n", pk_ctx_error(ctx));
    return 1;
  }
  pk_te_ref *ref;
  if (pk_bench_inputs(ctx, p, 3, &ref, &hb) != PK_OK) {
    fprintf(stderr, "%s\n", pk_ctx_error(ctx));
    return 1;
  }

  pk_bench_built built[MAX_CONFIGS] = {0};
  pk_measure_contestant con[MAX_CONFIGS + 1];
  double round_ns[MAX_CONFIGS + 1][1000];
  int bad = 0;
  for (int i = 0; i < n && !bad; i++) {
    pk_schedule *s;
    if (config_schedule(ctx, sp, p, argv[2 + i], &s) != PK_OK ||
        pk_bench_build_checked(ctx, cc, rt, p, s, ref, &hb, &built[i]) != PK_OK) {
      fprintf(stderr, "config %d: %s\n", i + 1, pk_ctx_error(ctx));
      bad = 1;
    }
    con[i] = (pk_measure_contestant){pk_bench_run_kernel, &built[i].run, .round_ns = round_ns[i]};
  }
  int ncon = n;
  pk_sgemm_shape sh;
  pkrt_extern *sgemm = NULL;
  pk_bench_sgemm_run sa;
  if (!bad && pk_match_sgemm(p, &sh)) {
    if (pkrt_extern_open(rt, "libopenblas.so.0", "cblas_sgemm", PK_BENCH_SGEMM_SIGNATURE, &sgemm) == PKRT_OK) {
      sa = (pk_bench_sgemm_run){sgemm, sh.trans_a ? 112 : 111, sh.trans_b ? 112 : 111, sh.m, sh.n, sh.k,
                                sh.lda, sh.ldb, hb.data[sh.a], hb.data[sh.b], hb.data[sh.c]};
      con[ncon++] = (pk_measure_contestant){pk_bench_run_sgemm, &sa, .round_ns = round_ns[n]};
    } else {
      printf("OpenBLAS unavailable: %s\n", pkrt_ctx_error(rt));
    }
  }
  if (!bad) {
    pk_measure_rounds(con, ncon, rounds, PK_MEASURE_MIN_NS);
    printf("bench_configs %s: 1 thread pinned to CPU %d, %d interleaved rounds\n", task.name, cpu, rounds);
    for (int i = 0; i < ncon; i++) {
      printf("%-10s median %6.1f GFLOP/s  fastest %6.1f", i < n ? pk_sprintf(ctx, "config %d", i + 1) : "OpenBLAS",
             task.flops / con[i].median_ns, task.flops / con[i].min_ns);
      if (ncon > n) printf("  (%.0f%% of OpenBLAS)", 100 * con[n].median_ns / con[i].median_ns);
      printf("\n");
    }
  }
  for (int i = 0; i < n; i++) pk_bench_built_free(&built[i]);
  if (sgemm) pkrt_extern_free(sgemm);
  pk_host_buffers_free(&hb);
  pk_space_free(sp);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return bad;
}
