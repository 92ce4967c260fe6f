/* target_tiles.c — register tiles that fit a target's vector registers, and tile loop
 * orders that fit its L2, for the presets and the hand schedules alike (one rule, so the
 * two cannot drift apart). */
#include "pk_target.h"

void pk_gemm_register_tile(int64_t lanes, int vector_regs, int64_t M, int64_t N, int64_t *mr,
                           int64_t *nr) {
  if (lanes < 1) lanes = 1;
  if (vector_regs < 4) vector_regs = 16;
  int64_t nv = N % (2 * lanes) != 0 && N % lanes == 0 ? 1 : 2;
  /* nv x rows accumulators + nv B vectors + one broadcast A */
  int64_t rows = (vector_regs - nv - 1) / nv;
  /* measured (AVX-512, bench_matmul): 8 x 2 vectors runs the large GEMMs at 70 % of 6 x 2;
   * one vector wide, 8 rows beat 6 by 1.4x */
  int64_t most = nv == 1 ? 8 : 6;
  if (rows > most) rows = most;
  if (rows < 1) rows = 1;
  *nr = nv * lanes;
  (void)M; /* a row tile that overhangs M costs little: its loop is not the vector one */
  *mr = rows;
}

int pk_tile_order_by_cache(int64_t l2_bytes, int64_t reread0, int64_t reread1) {
  return l2_bytes > 0 && reread0 > l2_bytes / 2 && reread1 <= l2_bytes / 2 ? 1 : 0;
}
