/* gpu_test_util.h — what the GPU tests share: TE programs from text, the hand-written
 * GPU matmul schedule (block tile, thread tile, k-step staged in shared memory, register
 * tile) the emitter and the barrier checker are tested on, and a copy of a prepared
 * kernel with one barrier taken out. Header-only, included after pk_test.h. */
#ifndef GPU_TEST_UTIL_H
#define GPU_TEST_UTIL_H

#include <string.h>

#include "pk_gpu.h"

static inline pk_te_program *gpu_test_parse(pk_ctx *ctx, const char *text) {
  pk_te_program *p = NULL;
  if (pk_te_parse(ctx, text, strlen(text), "test", &p) != PK_OK) return NULL;
  return p;
}

#define GPU_TEST_MATMUL                                                                    \
  "A = placeholder((64, 48), f32)\nB = placeholder((48, 64), f32)\nk = reduce_axis(48)\n" \
  "C = compute((64, 64), (i, j) => sum(A[i, k] * B[k, j], k))\n"

/* C = A·B: blocks of 32 x 32 outputs, 8 x 8 threads of 4 x 4 outputs each (unrolled
 * register tile), k in steps of 8 with the A and B panels staged in shared memory by all
 * 64 threads, each fetching `vector` consecutive elements (a vectorized loop) `4 / vector`
 * times. NULL when a step is refused (message in ctx). */
static inline pk_schedule *gpu_test_matmul_schedule_vec(pk_ctx *ctx, const pk_te_program *p,
                                                        int64_t vector) {
  pk_schedule *s = pk_sched_new(ctx, p);
  const char *order[] = {"i0.o.o", "i1.o.o", "i0.o.i", "i1.o.i", "i0.i", "i1.i"};
  const char *local_order[] = {"k0.o", "k0.i", "i0", "i1"};
  const char *readers[] = {"t2.local"};
  bool ok = pk_sched_cache_write(s, "t2", "local") == PK_OK &&
            pk_sched_split(s, "t2", "i0", 4) == PK_OK && pk_sched_split(s, "t2", "i0.o", 8) == PK_OK &&
            pk_sched_split(s, "t2", "i1", 4) == PK_OK && pk_sched_split(s, "t2", "i1.o", 8) == PK_OK &&
            pk_sched_reorder(s, "t2", 6, order) == PK_OK &&
            pk_sched_bind(s, "t2", "i0.o.o", "blockIdx.y") == PK_OK &&
            pk_sched_bind(s, "t2", "i1.o.o", "blockIdx.x") == PK_OK &&
            pk_sched_bind(s, "t2", "i0.o.i", "threadIdx.y") == PK_OK &&
            pk_sched_bind(s, "t2", "i1.o.i", "threadIdx.x") == PK_OK &&
            pk_sched_compute_at(s, "t2.local", "t2", "i1.o.i") == PK_OK &&
            pk_sched_split(s, "t2.local", "k0", 8) == PK_OK &&
            pk_sched_reorder(s, "t2.local", 4, local_order) == PK_OK &&
            pk_sched_unroll(s, "t2.local", "i0", 0) == PK_OK &&
            pk_sched_unroll(s, "t2.local", "i1", 0) == PK_OK &&
            pk_sched_cache_read(s, "t0", "shared", 1, readers, -1, 0) == PK_OK &&
            pk_sched_cache_read(s, "t1", "shared", 1, readers, -1, 0) == PK_OK &&
            pk_sched_compute_at(s, "t0.shared", "t2.local", "k0.o") == PK_OK &&
            pk_sched_compute_at(s, "t1.shared", "t2.local", "k0.o") == PK_OK;
  const char *shared[] = {"t0.shared", "t1.shared"};
  const char *f = vector > 1 ? "i0.i1.f.o" : "i0.i1.f";
  for (int q = 0; q < 2 && ok; q++) { /* cooperative fetch: the panel over all 64 threads */
    ok = pk_sched_fuse(s, shared[q], "i0", "i1") == PK_OK;
    if (ok && vector > 1)
      ok = pk_sched_split(s, shared[q], "i0.i1.f", vector) == PK_OK &&
           pk_sched_vectorize(s, shared[q], "i0.i1.f.i") == PK_OK;
    ok = ok && pk_sched_split(s, shared[q], f, 64) == PK_OK &&
         pk_sched_split(s, shared[q], pk_sprintf(ctx, "%s.i", f), 8) == PK_OK &&
         pk_sched_bind(s, shared[q], pk_sprintf(ctx, "%s.i.o", f), "threadIdx.y") == PK_OK &&
         pk_sched_bind(s, shared[q], pk_sprintf(ctx, "%s.i.i", f), "threadIdx.x") == PK_OK;
  }
  return ok ? s : NULL;
}

static inline pk_schedule *gpu_test_matmul_schedule(pk_ctx *ctx, const pk_te_program *p) {
  return gpu_test_matmul_schedule_vec(ctx, p, 1);
}

/* A copy of s with its n-th barrier (in program order, from 0) replaced by nothing;
 * *seen counts the barriers passed. */
static inline pk_stmt *gpu_test_strip(pk_ctx *ctx, const pk_stmt *s, int n, int *seen) {
  if (!s) return NULL;
  pk_stmt *c = pk_alloc(ctx, sizeof *c);
  *c = *s;
  if (s->kind == PK_ST_BARRIER) return (*seen)++ == n ? pk_st_seq(ctx, 0, NULL) : c;
  if (s->kind == PK_ST_SEQ) {
    c->stmts = pk_alloc(ctx, sizeof *c->stmts * (size_t)(s->n + 1));
    for (int i = 0; i < s->n; i++) c->stmts[i] = gpu_test_strip(ctx, s->stmts[i], n, seen);
  }
  c->then_ = gpu_test_strip(ctx, s->then_, n, seen);
  c->else_ = gpu_test_strip(ctx, s->else_, n, seen);
  c->body = gpu_test_strip(ctx, s->body, n, seen);
  return c;
}

static inline pk_gpu_kernel gpu_test_without_barrier(pk_ctx *ctx, const pk_gpu_kernel *k, int n) {
  pk_gpu_kernel out = *k;
  pk_lfunc *f = pk_alloc(ctx, sizeof *f);
  *f = *k->f;
  int seen = 0;
  f->body = gpu_test_strip(ctx, k->f->body, n, &seen);
  out.f = f;
  return out;
}

#endif
