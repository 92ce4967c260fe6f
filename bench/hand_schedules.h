/* hand_schedules.h — schedules written by hand for the benchmark shapes: what the tuner's
 * search space must at least contain, and the yardstick its results are compared with. */
#ifndef PK_HAND_SCHEDULES_H
#define PK_HAND_SCHEDULES_H

#include "pk_codegen.h"
#include "pk_schedule.h"

/* Both are sized for target t's vectors and registers (NULL: this machine, "c"). */

/* C = A·B (program from pk_op_build(PK_OP_MATMUL), any transposes): packed B panels in the
 * workspace, a register tile of accumulators (pk_gemm_register_tile: 6 × 2 vectors, or
 * 8 × 1), k outermost in the tile. */
pk_status pk_hand_schedule_matmul(pk_schedule *s, const pk_target *t);
/* conv2d NCHW (program from pk_op_build(PK_OP_CONV2D)) with a window: an 8-channel × (one
 * vector of columns) register tile, reductions over c, r, s outside it, columns
 * vectorized, the column taps partitioned where the padding guards hold. */
pk_status pk_hand_schedule_conv2d(pk_schedule *s, const pk_target *t);

#endif
