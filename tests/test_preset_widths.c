/* test_preset_widths.c — portable defaults: the matmul and conv presets, sized from the
 * vector width (16, 32, 64 bytes: SSE/NEON, AVX2, AVX-512), lower for every width and keep
 * their register tiles (the local accumulator buffers) within the vector registers; a GEMM
 * whose N is a multiple of one vector but not of two gets a one-vector-wide tile; and their
 * tile loops are ordered by the L2 size (space_cache_order). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PK_TEST_OWN_CHECK
#include "pk_ops.h"
#include "pk_search.h"
#include "pk_test.h"

/* Counts a failure and prints it; the loop goes on to the next case. */
#define CHECK(cond, ...)                         \
  do {                                           \
    if (!(cond)) PK_TEST_FAIL("preset", __VA_ARGS__); \
  } while (0)

/* Bytes of the largest LOCAL buffer (a register tile) in the statement tree. */
static int64_t largest_local(const pk_stmt *s) {
  if (!s) return 0;
  int64_t most = 0, b;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++)
      if ((b = largest_local(s->stmts[i])) > most) most = b;
    return most;
  case PK_ST_IF:
    most = largest_local(s->then_);
    return (b = largest_local(s->else_)) > most ? b : most;
  case PK_ST_ALLOC:
    most = s->buf->scope == PK_SCOPE_LOCAL ? s->buf->numel * (int64_t)pkrt_dtype_size(s->buf->dtype) : 0;
    return (b = largest_local(s->body)) > most ? b : most;
  case PK_ST_FOR:
  case PK_ST_LET:
    return largest_local(s->body);
  default:
    return 0;
  }
}

static pk_op_params matmul(int64_t m, int64_t n, int64_t k, bool ta, bool tb) {
  pk_op_params prm = {.ninputs = 2, .attrs = {.trans_a = ta, .trans_b = tb}};
  prm.in[0] = (pk_op_input){2, {ta ? k : m, ta ? m : k}, PKRT_DTYPE_F32};
  prm.in[1] = (pk_op_input){2, {tb ? n : k, tb ? k : n}, PKRT_DTYPE_F32};
  return prm;
}

static pk_op_params conv(int64_t n, int64_t c, int64_t o, int64_t hw, int64_t k, int64_t pad) {
  pk_op_params prm = {.ninputs = 2, .attrs = {.pad = {pad, pad, pad, pad}}};
  prm.in[0] = (pk_op_input){4, {n, c, hw, hw}, PKRT_DTYPE_F32};
  prm.in[1] = (pk_op_input){4, {o, c, k, k}, PKRT_DTYPE_F32};
  return prm;
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  struct {
    pk_op_kind op;
    pk_op_params prm;
  } cases[] = {
      /* bench/bench_matmul.c's five shapes, and N = 784 = 49 x 16 on its own */
      {PK_OP_MATMUL, matmul(1024, 1024, 1024, false, false)},
      {PK_OP_MATMUL, matmul(128, 3072, 768, false, false)},
      {PK_OP_MATMUL, matmul(32, 256, 784, false, true)},
      {PK_OP_MATMUL, matmul(256, 784, 32, true, false)},
      {PK_OP_MATMUL, matmul(3072, 768, 128, true, false)},
      {PK_OP_MATMUL, matmul(8, 10, 64, false, true)},
      {PK_OP_CONV2D, conv(8, 64, 64, 32, 3, 1)},
      {PK_OP_CONV2D, conv(8, 32, 64, 8, 3, 1)},
      {PK_OP_CONV2D, conv(8, 16, 32, 14, 1, 0)},
  };
  int ncases = (int)(sizeof cases / sizeof cases[0]), checked = 0;
  for (int c = 0; c < ncases; c++) {
    pk_te_program *p;
    pk_task task;
    if (pk_op_build(ctx, cases[c].op, &cases[c].prm, &p) != PK_OK ||
        pk_task_from_program(ctx, p, "c", &task) != PK_OK) {
      CHECK(0, "case %d: %s", c, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      continue;
    }
    for (int width = 16; width <= 64; width *= 2) {
      pk_space_options o;
      pk_space_options_default(&o);
      o.vector_bytes = width;
      int regs = width >= 64 ? 32 : 16; /* the x86 ISA with that width (pk_space_options) */
      pk_space *sp;
      pk_config cfg;
      pk_schedule *s;
      pk_lfunc *f;
      if (pk_space_new_opts(ctx, &task, &o, &sp) != PK_OK || !pk_space_preset(sp, &cfg) ||
          pk_space_schedule(sp, ctx, &cfg, &s) != PK_OK ||
          pk_sched_lower(ctx, task.prog, s, "k0", &f) != PK_OK) {
        CHECK(0, "%s at %d bytes: the preset does not lower: %s", task.name, width, pk_ctx_error(ctx));
        pk_ctx_clear_error(ctx);
        pk_space_free(sp);
        continue;
      }
      int64_t tile = largest_local(f->body);
      CHECK(tile > 0 && tile <= (int64_t)regs * width,
            "%s at %d bytes: register tile of %lld bytes, %d registers hold %d (%s)", task.name,
            width, (long long)tile, regs, regs * width, pk_space_knobs_json(ctx, sp, &cfg));
      if (cases[c].op == PK_OP_MATMUL) { /* one vector wide where two would overhang N */
        int64_t n = task.prog->tensors[2]->shape[1], lanes = width / 4;
        const char *knobs = pk_space_knobs_json(ctx, sp, &cfg);
        char want[32];
        snprintf(want, sizeof want, "\"tile_n\":%lld,", (long long)(n % (2 * lanes) && n % lanes == 0 ? lanes : 2 * lanes));
        CHECK(n < 2 * lanes || strstr(knobs, want), "%s at %d bytes: want %s in %s", task.name, width, want, knobs);
      }
      checked++;
      pk_space_free(sp);
    }
  }
  printf("%d presets (%d shapes x 3 widths) lowered and checked\n", checked, ncases);

  /* Loop order by cache: the operand re-read in the outer loop must fit half the L2. */
  struct {
    pk_op_kind op;
    pk_op_params prm;
    int64_t l2;
    int order;
  } orders[] = {
      /* (measured on a 2 MiB L2, bench_configs, preset vs the other order: the order
       * chosen was the faster one in each of the five cases marked *) */
      /* * A 8 MiB, B 512 KiB: A overflows a 2 MiB L2, B fits: rows outermost (+8 %) */
      {PK_OP_MATMUL, matmul(4096, 256, 512, false, false), 2 << 20, 1},
      {PK_OP_MATMUL, matmul(4096, 256, 512, false, false), 64 << 20, 0},
      /* * bench_matmul's 3072x768x128 TN: A 1.5 MiB, B 384 KiB (+6 %) */
      {PK_OP_MATMUL, matmul(3072, 768, 128, true, false), 2 << 20, 1},
      /* * both overflow (A 1.5 MiB, B 2.25 MiB): the hand schedule's order (order 1: -34 %) */
      {PK_OP_MATMUL, matmul(1024, 1536, 384, false, true), 2 << 20, 0},
      {PK_OP_MATMUL, matmul(1024, 1024, 1024, false, false), 2 << 20, 0},
      /* small operands keep order 0, on a 512 KiB (Zen 3) L2 too */
      {PK_OP_MATMUL, matmul(128, 3072, 768, false, false), 512 << 10, 0},
      {PK_OP_MATMUL, matmul(256, 784, 32, true, false), 2 << 20, 0},
      /* * an image of 4 MiB, a weight of 9 KiB: channels innermost (+3 %) */
      {PK_OP_CONV2D, conv(1, 16, 16, 256, 3, 1), 2 << 20, 1},
      {PK_OP_CONV2D, conv(1, 16, 16, 256, 3, 1), 64 << 20, 0},
      /* * a 1x1 conv of MobileNetV2 at 128x128 (96 -> 24 channels, 64x64): +39 % */
      {PK_OP_CONV2D, conv(8, 96, 24, 64, 1, 0), 2 << 20, 1},
      {PK_OP_CONV2D, conv(8, 64, 64, 32, 3, 1), 2 << 20, 0},
  };
  for (size_t c = 0; c < sizeof orders / sizeof orders[0]; c++) {
    pk_te_program *p;
    pk_task task;
    pk_space_options o;
    pk_space_options_default(&o);
    o.l2_bytes = orders[c].l2;
    pk_space *sp = NULL;
    pk_config cfg;
    if (pk_op_build(ctx, orders[c].op, &orders[c].prm, &p) != PK_OK ||
        pk_task_from_program(ctx, p, "c", &task) != PK_OK ||
        pk_space_new_opts(ctx, &task, &o, &sp) != PK_OK || !pk_space_preset(sp, &cfg)) {
      CHECK(0, "order case %zu: %s", c, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
      pk_space_free(sp);
      continue;
    }
    const char *knobs = pk_space_knobs_json(ctx, sp, &cfg);
    char want[32];
    snprintf(want, sizeof want, "\"order\":%d,", orders[c].order);
    CHECK(strstr(knobs, want) != NULL, "%s with a %lld-byte L2: want %s in %s", task.name,
          (long long)orders[c].l2, want, knobs);
    pk_space_free(sp);
  }
  pk_ctx_free(ctx);
  return pk_test_summary("test_preset_widths");
}
