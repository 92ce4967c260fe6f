/* gpu_vplan.h — the GPU emitter's plan for a VECTORIZED loop (gpu_vplan.c, used by
 * emit_gpu.c): which of its accesses become whole-vector loads and stores, what every lane
 * must pass before they may, and which base pointers need an alignment test at run time. */
#ifndef PK_GPU_VPLAN_H
#define PK_GPU_VPLAN_H

#include "pk_gpu.h"

#define GPU_VPLAN_MAX_LOADS 16 /* vector loads per store; more loads stay scalar */

/* One load or store in the loop's body. */
typedef struct gpu_vaccess {
  const pk_lbuf *buf;
  const pk_lexpr *index;
  const pk_lexpr *load; /* the LOAD node; NULL: the store stores[stmt] */
  int stmt;             /* the store it belongs to; -1: in a guard */
  bool in_index;        /* inside another access's index */
  bool vector;          /* made one access of `lanes` elements from index at lane 0 */
} gpu_vaccess;

typedef struct gpu_vplan {
  const pk_stmt *loop;
  int lanes;                 /* 2 or 4: the loop's extent */
  int nconds;
  const pk_lexpr **conds;    /* the guards and masks around the stores, outermost first:
                                the vector path runs when they hold for every lane */
  int nstores;
  const pk_stmt **stores;    /* in program order; in the vector path each runs for all
                                lanes (loads, then lane values, then the store) before the
                                next */
  int nacc;
  gpu_vaccess *acc;
  int nchecks;               /* aligned_only: base pointers tested at run time */
  const pk_lbuf **check_buf;
  int *check_bytes;          /* the alignment each needs */
} gpu_vplan;

/* Plans loop s (PK_LOOP_VECTORIZED). True when at least one access becomes a vector: s
 * runs from 0 over 2 or 4 lanes, its body is stores under guards (IFs without else,
 * masks) and nothing else, no lane can see what another lane stores (a buffer the loop
 * writes is only accessed at the store's index, which differs by lane, and no guard reads
 * it), and the access is to a SHARED, WORKSPACE or GLOBAL buffer of f32 (2 or 4 lanes) or
 * f64 (2 lanes) at consecutive elements (pk_lx_lane_form stride 1). aligned_only (CUDA's
 * vector types): also its first element's index is a multiple of the lanes, and a GLOBAL
 * or WORKSPACE buffer's base pointer goes into check_buf (SHARED ones are declared
 * aligned). */
bool pk_gpu_vplan(pk_ctx *ctx, const pk_stmt *s, bool aligned_only, gpu_vplan *out);

#endif
