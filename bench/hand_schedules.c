/* hand_schedules.c — the hand schedules for GEMM and conv2d, written with the public
 * schedule primitives only (so each is also a trace the tuner could have found). */
#include "hand_schedules.h"

#define TRY(call)                     \
  do {                                \
    pk_status st_ = (call);           \
    if (st_ != PK_OK) return st_;     \
  } while (0)

/* Which dimension of B (t1) C's column axis indexes: 1 for B[K, N], 0 for B[N, K]. Read
 * from the index expressions, since extents alone are ambiguous when N == K. */
static int matmul_operand_dim(const pk_te_program *p, int operand, int axis, int fallback) {
  const pk_te_tensor *c = p->tensors[2];
  const pk_expr *mul = c->body->args[0];
  for (int side = 0; side < 2; side++) {
    const pk_expr *read = mul->args[side];
    if (read->kind != PK_EXPR_READ || read->tensor != p->tensors[operand]) continue;
    for (int d = 0; d < read->nargs; d++)
      if (read->args[d]->kind == PK_EXPR_AXIS && read->args[d]->axis == c->axes[axis]) return d;
  }
  return fallback;
}

/* f32 lanes of the target's widest vector, its vector registers and L2 (t NULL: this
 * machine, "c"). */
static int64_t target_lanes(pk_schedule *s, const pk_target *t, int *vector_regs, int64_t *l2) {
  pk_target *native;
  if (!t && pk_target_native(s->ctx, &native) == PK_OK) t = native;
  pk_ctx_clear_error(s->ctx);
  if (vector_regs) *vector_regs = t ? t->vector_regs : 16;
  if (l2) *l2 = t ? t->l2_bytes : 0;
  return t && t->vector_bytes >= 4 ? t->vector_bytes / 4 : 4;
}

/* Tensor ids of pk_op_build(PK_OP_MATMUL): t0 = A, t1 = B, t2 = C; C's axes i0 (rows),
 * i1 (columns), reduce axis k0. */
pk_status pk_hand_schedule_matmul(pk_schedule *s, const pk_target *t) {
  /* rows × vectors of accumulators, the B vectors and a broadcast A in the registers:
   * 6 × 2 vectors, or 8 × 1 where N is a multiple of one vector but not of two */
  int regs;
  int64_t l2;
  const int64_t LANES = target_lanes(s, t, &regs, &l2);
  const int64_t M = s->orig->tensors[2]->shape[0], N = s->orig->tensors[2]->shape[1];
  const int64_t K = s->orig->tensors[2]->body->axes[0]->hi - s->orig->tensors[2]->body->axes[0]->lo;
  int64_t MR, NR;
  pk_gemm_register_tile(LANES, regs, M, N, &MR, &NR);
  const char *readers[] = {"t2"};
  /* B packed as [N/32][K][32]: the micro-kernel reads 32 contiguous floats per k. The
   * block dim is B's column dim: 1 for B[K, N], 0 for B[N, K] (trans_b). */
  int b_cols_dim = matmul_operand_dim(s->orig, 1, 1, 1);
  TRY(pk_sched_cache_read(s, "t1", "ws", 1, readers, b_cols_dim, NR));
  /* A stored (K, M) (trans_a: a weight gradient X^T dY): packed as [M/6][K][6] too, or
   * each k step of the 6 rows would touch a new cache line. */
  int a_rows_dim = matmul_operand_dim(s->orig, 0, 0, 0);
  if (a_rows_dim == 1) TRY(pk_sched_cache_read(s, "t0", "ws", 1, readers, a_rows_dim, MR));
  TRY(pk_sched_cache_write(s, "t2", "local"));
  /* C's tiles: columns outermost so one packed B panel (K × 32) stays in L2 while every
   * row tile streams past it; rows outermost where A overflows the L2 and B does not. */
  TRY(pk_sched_tile(s, "t2", "i0", "i1", MR, NR));
  bool rows_outer = pk_tile_order_by_cache(l2, M * K * 4, K * N * 4) == 1;
  const char *order[] = {"i1.o", "i0.o", "i0.i", "i1.i"};
  if (!rows_outer) TRY(pk_sched_reorder(s, "t2", 4, order));
  TRY(pk_sched_split(s, "t2", "i1.i", LANES));
  TRY(pk_sched_vectorize(s, "t2", "i1.i.i"));
  /* The accumulator tile: k outside, 6 rows × 2 vectors unrolled inside. */
  TRY(pk_sched_compute_at(s, "t2.local", "t2", rows_outer ? "i1.o" : "i0.o"));
  TRY(pk_sched_split(s, "t2.local", "i0", MR));
  TRY(pk_sched_split(s, "t2.local", "i1", NR));
  TRY(pk_sched_split(s, "t2.local", "i1.i", LANES));
  const char *tile[] = {"i0.o", "i1.o", "k0", "i0.i", "i1.i.o", "i1.i.i"};
  TRY(pk_sched_reorder(s, "t2.local", 6, tile));
  TRY(pk_sched_unroll(s, "t2.local", "i0.i", 0));
  TRY(pk_sched_unroll(s, "t2.local", "i1.i.o", 0));
  TRY(pk_sched_vectorize(s, "t2.local", "i1.i.i"));
  return PK_OK;
}

/* Tensor ids of pk_op_build(PK_OP_CONV2D): t0 = X, t1 = W, t2 = Y[n, o, h, w]; reduce
 * axes k0 (input channel), k1, k2 (kernel rows, columns). */
pk_status pk_hand_schedule_conv2d(pk_schedule *s, const pk_target *t) {
  /* 8 channels x one vector of columns (each input load serves 8 channels), the column
   * taps cut where the padding guards hold: 2x faster than 4 x 2 vectors on a padded 3x3
   * conv of 64 channels at 32x32 */
  const int64_t OR = 8, WR = target_lanes(s, t, NULL, NULL);
  TRY(pk_sched_cache_write(s, "t2", "local"));
  TRY(pk_sched_split(s, "t2", "i1", OR));
  TRY(pk_sched_split(s, "t2", "i3", WR));
  const char *order[] = {"i0", "i1.o", "i2", "i3.o", "i1.i", "i3.i"};
  TRY(pk_sched_reorder(s, "t2", 6, order));
  TRY(pk_sched_vectorize(s, "t2", "i3.i"));
  TRY(pk_sched_compute_at(s, "t2.local", "t2", "i3.o"));
  TRY(pk_sched_split(s, "t2.local", "i1", OR));
  TRY(pk_sched_split(s, "t2.local", "i3", WR));
  const char *tile[] = {"i0", "i1.o", "i2", "i3.o", "k0", "k1", "k2", "i1.i", "i3.i"};
  TRY(pk_sched_reorder(s, "t2.local", 9, tile));
  TRY(pk_sched_unroll(s, "t2.local", "i1.i", 0));
  TRY(pk_sched_unroll(s, "t2.local", "k2", 0));
  TRY(pk_sched_partition(s, "t2.local", "k1"));
  TRY(pk_sched_vectorize(s, "t2.local", "i3.i"));
  return PK_OK;
}
