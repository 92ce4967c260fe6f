/* emit_c_vector.h — shared by emit_c_vector.c (expressions) and emit_c_vstmt.c (statements
 * and the vectorized loop itself): vector values and lane masks while E->vl is set. */
#ifndef PK_EMIT_C_VECTOR_H
#define PK_EMIT_C_VECTOR_H

#include "emit_c_impl.h"

/* A value in vector code: vec, the name of a vector per part (x7, or x7_0, x7_1, ...);
 * otherwise a scalar C expression, the same in every lane. */
typedef struct vx {
  bool vec;
  const char *s;
} vx;

/* The lanes a statement or operand runs for: name NULL is every lane. any_known: code
 * around tested that some lane is active, so a scalar load there is one a lane makes. */
typedef struct vmask {
  const char *name;
  bool any_known;
} vmask;

vx vexpr(cg *E, const pk_lexpr *e, const vmask *m);
vx vx_scalar(cg *E, vx x, pkrt_dtype t);                  /* computed once, named */
const char *vx_part(cg *E, vx x, pkrt_dtype t, int part); /* broadcast when scalar */
const char *vx_type(cg *E, pkrt_dtype t);                 /* pk_f32x16, ... */
int vx_lanes_in(cg *E, int part);                         /* lanes of a part not padding */
const char *vx_any(cg *E, const char *mask);              /* text: some lane active */
const char *vx_mask_and(cg *E, const vmask *m, vx c, bool negate);
const char *vx_tile_elem(cg *E, const pk_lbuf *b, const pk_lexpr *index, int part);
const char *vx_lane_text(cg *E, int part, const pk_lexpr *e, bool as_index);

#endif
