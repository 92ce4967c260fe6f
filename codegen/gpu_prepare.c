/* gpu_prepare.c — the GPU lowering check: a lowered kernel's launch geometry (the widest
 * loop bound to each block and thread index), the refusals for what a GPU cannot run, and
 * the prepared body both the emitter and the barrier checker consume: root nests with no
 * bound loop run on thread 0 of block 0, and a barrier separates root nests. */
#include <stdio.h>
#include <string.h>

#include "pk_gpu.h"

typedef struct prep {
  pk_ctx *ctx;
  const pk_lfunc *f;
  int64_t grid[3], block[3];
  int64_t shared_bytes;
  bool uses_f64;
  /* the check's walk */
  int nbound;               /* enclosing bound loops */
  int nthread, nblock[3];   /* of them, thread loops and block loops per index */
  int divergent;            /* enclosing conditions that differ between a block's threads */
  bool *thread_dep;         /* per var id: its value differs between a block's threads */
  int *alloc_bound;         /* per buf id: nbound at its ALLOC (LOCAL), -1 outside any */
} prep;

static bool is_block(pk_loop_kind k) { return k >= PK_LOOP_GPU_BLOCK_X && k <= PK_LOOP_GPU_BLOCK_Z; }
static bool is_thread(pk_loop_kind k) { return k >= PK_LOOP_GPU_THREAD_X && k <= PK_LOOP_GPU_THREAD_Z; }
static int gpu_dim(pk_loop_kind k) { return is_block(k) ? k - PK_LOOP_GPU_BLOCK_X : k - PK_LOOP_GPU_THREAD_X; }

static void see_dtype(prep *P, pkrt_dtype t) { P->uses_f64 |= t == PKRT_DTYPE_F64; }

static void see_expr(prep *P, const pk_lexpr *e) {
  if (!e) return;
  see_dtype(P, e->dtype);
  for (int i = 0; i < e->nargs; i++) see_expr(P, e->args[i]);
}

/* First pass: the launch (widest bound loop per index), shared bytes, f64. */
static void measure(prep *P, const pk_stmt *s) {
  if (!s) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) measure(P, s->stmts[i]);
    return;
  case PK_ST_FOR:
    if ((is_block(s->loop) || is_thread(s->loop)) && s->extent->kind == PK_LX_INT) {
      int64_t *dims = is_block(s->loop) ? P->grid : P->block;
      int d = gpu_dim(s->loop);
      if (s->extent->ival > dims[d]) dims[d] = s->extent->ival;
    }
    see_expr(P, s->min), see_expr(P, s->extent);
    measure(P, s->body);
    return;
  case PK_ST_IF:
    see_expr(P, s->cond);
    measure(P, s->then_), measure(P, s->else_);
    return;
  case PK_ST_STORE:
    see_dtype(P, s->buf->dtype);
    see_expr(P, s->index), see_expr(P, s->value), see_expr(P, s->mask);
    return;
  case PK_ST_ALLOC:
    see_dtype(P, s->buf->dtype);
    if (s->buf->scope == PK_SCOPE_SHARED)
      P->shared_bytes += s->buf->numel * (int64_t)pkrt_dtype_size(s->buf->dtype);
    measure(P, s->body);
    return;
  case PK_ST_LET:
    see_dtype(P, s->var->dtype);
    see_expr(P, s->value);
    measure(P, s->body);
    return;
  case PK_ST_BARRIER: return;
  }
}

static bool uses_thread_dep(const prep *P, const pk_lexpr *e) {
  if (!e) return false;
  if (e->kind == PK_LX_VAR && P->thread_dep[e->var->id]) return true;
  for (int i = 0; i < e->nargs; i++)
    if (uses_thread_dep(P, e->args[i])) return true;
  return false;
}

static pk_status refuse(prep *P, const char *fmt, const char *a, const char *b) {
  char msg[256];
  snprintf(msg, sizeof msg, fmt, a, b);
  return pk_ctx_fail(P->ctx, PK_ERR_SCHEDULE, "GPU kernel %s: %s", P->f->name, msg);
}

/* Second pass: the refusals. */
static pk_status check(prep *P, const pk_stmt *s) {
  if (!s) return PK_OK;
  pk_status st = PK_OK;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n && st == PK_OK; i++) st = check(P, s->stmts[i]);
    return st;
  case PK_ST_FOR: {
    if (s->loop == PK_LOOP_PARALLEL)
      return refuse(P, "loop %s is a CPU parallel loop; on a GPU, bind loops to blocks and "
                       "threads instead%s", s->var->name, "");
    bool bound = is_block(s->loop) || is_thread(s->loop);
    if (is_block(s->loop) && (P->nthread || P->nblock[gpu_dim(s->loop)]))
      return refuse(P, "loop %s is bound to %s inside a thread loop or another loop of that "
                       "index; block loops must be outermost", s->var->name,
                    pk_loop_kind_name(s->loop));
    if (bound && s->extent->kind != PK_LX_INT)
      return refuse(P, "bound loop %s has no constant extent%s", s->var->name, "");
    /* a bound loop narrower than the launch, or a serial loop whose trip count differs by
     * thread, leaves some threads out of its body */
    bool narrower = is_thread(s->loop) && s->extent->ival < P->block[gpu_dim(s->loop)];
    bool varies = !bound && (uses_thread_dep(P, s->min) || uses_thread_dep(P, s->extent));
    P->thread_dep[s->var->id] = is_thread(s->loop) || varies;
    P->nbound += bound;
    P->nthread += is_thread(s->loop);
    if (is_block(s->loop)) P->nblock[gpu_dim(s->loop)]++;
    P->divergent += narrower || varies;
    st = check(P, s->body);
    P->divergent -= narrower || varies;
    if (is_block(s->loop)) P->nblock[gpu_dim(s->loop)]--;
    P->nthread -= is_thread(s->loop);
    P->nbound -= bound;
    return st;
  }
  case PK_ST_IF: {
    bool d = uses_thread_dep(P, s->cond);
    P->divergent += d;
    st = check(P, s->then_);
    if (st == PK_OK) st = check(P, s->else_);
    P->divergent -= d;
    return st;
  }
  case PK_ST_STORE:
    if (s->buf->scope == PK_SCOPE_LOCAL && P->nbound > P->alloc_bound[s->buf->id])
      return refuse(P, "local buffer %s is written inside GPU-bound loops but lives outside "
                       "them: its threads would each have their own copy (make it shared, or "
                       "compute it inside the bound loops)%s", s->buf->name, "");
    return PK_OK;
  case PK_ST_ALLOC: {
    const pk_lbuf *b = s->buf;
    if (b->scope == PK_SCOPE_WORKSPACE && P->nbound)
      return refuse(P, "workspace buffer %s lives inside GPU-bound loops: every thread would "
                       "write the same bytes%s", b->name, "");
    int saved = P->alloc_bound[b->id];
    P->alloc_bound[b->id] = P->nbound;
    st = check(P, s->body);
    P->alloc_bound[b->id] = saved;
    return st;
  }
  case PK_ST_LET:
    P->thread_dep[s->var->id] = uses_thread_dep(P, s->value);
    return check(P, s->body);
  case PK_ST_BARRIER:
    if (P->divergent)
      return refuse(P, "a barrier sits where only some threads of a block reach it (under a "
                       "condition on the thread index, or a thread loop narrower than the "
                       "block)%s%s", "", "");
    return PK_OK;
  }
  return PK_OK;
}

/* ---- root nests ---- */

typedef struct nest_list {
  int n, cap;
  const pk_stmt **s;
} nest_list;

/* The root nests in order: the kernel body is a sequence whose root buffers (ALLOC) hold
 * the rest of it. */
static void root_nests(pk_ctx *ctx, const pk_stmt *s, nest_list *out) {
  if (!s) return;
  if (s->kind == PK_ST_SEQ) {
    for (int i = 0; i < s->n; i++) root_nests(ctx, s->stmts[i], out);
    return;
  }
  if (s->kind == PK_ST_ALLOC) { root_nests(ctx, s->body, out); return; }
  if (s->kind == PK_ST_BARRIER) return;
  if (out->n == out->cap) {
    int cap = out->cap ? 2 * out->cap : 16;
    const pk_stmt **v = pk_alloc(ctx, sizeof *v * (size_t)cap);
    if (out->n) memcpy(v, out->s, sizeof *v * (size_t)out->n);
    out->s = v, out->cap = cap;
  }
  out->s[out->n++] = s;
}

static bool has_bound_loop(const pk_stmt *s) {
  if (!s) return false;
  if (s->kind == PK_ST_FOR && s->loop >= PK_LOOP_GPU_BLOCK_X) return true;
  for (int i = 0; s->kind == PK_ST_SEQ && i < s->n; i++)
    if (has_bound_loop(s->stmts[i])) return true;
  return has_bound_loop(s->then_) || has_bound_loop(s->else_) || has_bound_loop(s->body);
}

/* Memory other blocks see: global buffers and the workspace (shared memory is per block,
 * local per thread). */
static bool device_wide(const pk_lbuf *b) {
  return b->scope == PK_SCOPE_GLOBAL || b->scope == PK_SCOPE_WORKSPACE;
}

static void mark_access(const pk_lexpr *e, bool *read) {
  if (!e) return;
  if (e->kind == PK_LX_LOAD && device_wide(e->buf)) read[e->buf->id] = true;
  for (int i = 0; i < e->nargs; i++) mark_access(e->args[i], read);
}

static void accesses(const pk_stmt *s, bool *read, bool *written) {
  if (!s) return;
  for (int i = 0; s->kind == PK_ST_SEQ && i < s->n; i++) accesses(s->stmts[i], read, written);
  if (s->kind == PK_ST_STORE && device_wide(s->buf)) written[s->buf->id] = true;
  mark_access(s->min, read), mark_access(s->extent, read), mark_access(s->cond, read);
  mark_access(s->index, read), mark_access(s->value, read), mark_access(s->mask, read);
  accesses(s->then_, read, written), accesses(s->else_, read, written), accesses(s->body, read, written);
}

/* Blocks cannot wait for each other inside one kernel: with more than one block, a root
 * nest may not read global or workspace memory an earlier root nest wrote. */
static pk_status check_block_sync(prep *P, const nest_list *nl) {
  int nbufs = P->f->nbufs + 1;
  bool *written = pk_alloc(P->ctx, sizeof(bool) * (size_t)nbufs);
  bool *read = pk_alloc(P->ctx, sizeof(bool) * (size_t)nbufs);
  bool *now = pk_alloc(P->ctx, sizeof(bool) * (size_t)nbufs);
  for (int i = 0; i < nl->n; i++) {
    memset(read, 0, sizeof(bool) * (size_t)nbufs);
    memset(now, 0, sizeof(bool) * (size_t)nbufs);
    accesses(nl->s[i], read, now);
    for (int b = 0; b < P->f->nbufs; b++)
      if (read[b] && written[b]) {
        const char *name = pk_sprintf(P->ctx, "b%d", b);
        return refuse(P, "a root nest reads %s, which an earlier one writes, and the launch has "
                         "several blocks, which cannot wait for each other (compute the writer "
                         "at a loop of its reader, or bind no loop to blocks)%s", name, "");
      }
    for (int b = 0; b < P->f->nbufs; b++) written[b] |= now[b];
  }
  return PK_OK;
}

/* A nest with no bound loop in a launch of several threads: a loop of one iteration bound
 * to each thread index the launch uses keeps it to thread 0, and to each block index
 * (one_block: it writes global or workspace memory) to block 0. */
static pk_stmt *one_thread(prep *P, pk_lfunc *f, pk_stmt *s, bool one_block) {
  for (int pass = 0; pass < 1 + one_block; pass++) /* thread loops inside, block loops outside */
    for (int d = 2; d >= 0; d--) {
      if ((pass ? P->grid : P->block)[d] <= 1) continue;
      pk_loop_kind k = (pass ? PK_LOOP_GPU_BLOCK_X : PK_LOOP_GPU_THREAD_X) + d;
      s = pk_st_for(P->ctx, pk_lvar_new(P->ctx, f, PKRT_DTYPE_I64), pk_lx_int(P->ctx, 0),
                    pk_lx_int(P->ctx, 1), k, s);
    }
  return s;
}

/* The body rebuilt: one-thread nests bound, a barrier after every root nest but the last
 * (an existing barrier, after a shared root stage, is kept as it is). */
static pk_stmt *rebuild(prep *P, pk_lfunc *f, const pk_stmt *s, bool wrap, bool fence,
                        int *left) {
  if (!s) return NULL;
  pk_ctx *ctx = P->ctx;
  if (s->kind == PK_ST_SEQ) {
    pk_stmt **v = pk_alloc(ctx, sizeof *v * (size_t)(2 * s->n + 1));
    int n = 0;
    for (int i = 0; i < s->n; i++) {
      const pk_stmt *c = s->stmts[i];
      bool nest = c->kind != PK_ST_SEQ && c->kind != PK_ST_ALLOC && c->kind != PK_ST_BARRIER;
      v[n++] = rebuild(P, f, c, wrap, fence, left);
      if (nest && --*left > 0 && fence) v[n++] = pk_st_barrier(ctx);
    }
    return pk_st_seq(ctx, n, v);
  }
  if (s->kind == PK_ST_ALLOC) return pk_st_alloc(ctx, s->buf, rebuild(P, f, s->body, wrap, fence, left));
  if (s->kind == PK_ST_BARRIER) return (pk_stmt *)s;
  pk_stmt *copy = (pk_stmt *)s;
  if (!has_bound_loop(s) && wrap) {
    /* what only shared memory holds every block needs; the rest is written once */
    bool *read = pk_alloc(ctx, sizeof(bool) * (size_t)(P->f->nbufs + 1));
    bool *written = pk_alloc(ctx, sizeof(bool) * (size_t)(P->f->nbufs + 1));
    accesses(s, read, written);
    bool device = false;
    for (int b = 0; b < P->f->nbufs; b++) device |= written[b];
    copy = one_thread(P, f, copy, device);
  }
  return copy;
}

pk_status pk_gpu_prepare(pk_ctx *ctx, const pk_lfunc *f, pk_gpu_kernel *out) {
  memset(out, 0, sizeof *out);
  prep P = {.ctx = ctx, .f = f, .grid = {1, 1, 1}, .block = {1, 1, 1}};
  measure(&P, f->body);
  for (int i = 0; i < f->nparams; i++) see_dtype(&P, f->params[i]->dtype);
  int64_t threads = P.block[0] * P.block[1] * P.block[2];
  if (threads > PK_GPU_MAX_THREADS || P.block[2] > 64)
    return refuse(&P, "%s threads per block (at most 1024, z at most 64)%s",
                  pk_sprintf(ctx, "%lld x %lld x %lld", (long long)P.block[0],
                             (long long)P.block[1], (long long)P.block[2]), "");
  if (P.grid[0] > INT32_MAX || P.grid[1] > 65535 || P.grid[2] > 65535)
    return refuse(&P, "a grid of %s blocks (y and z at most 65535)%s",
                  pk_sprintf(ctx, "%lld x %lld x %lld", (long long)P.grid[0],
                             (long long)P.grid[1], (long long)P.grid[2]), "");
  if (P.shared_bytes > PK_GPU_MAX_SHARED_BYTES)
    return refuse(&P, "%s bytes of shared memory per block (at most 49152)%s",
                  pk_sprintf(ctx, "%lld", (long long)P.shared_bytes), "");

  /* the check needs the final launch: the one-thread loops below never widen it */
  P.thread_dep = pk_alloc(ctx, sizeof(bool) * (size_t)(f->nvars + 1));
  P.alloc_bound = pk_alloc(ctx, sizeof(int) * (size_t)(f->nbufs + 1));
  for (int b = 0; b <= f->nbufs; b++) P.alloc_bound[b] = -1;
  nest_list nl = {0};
  root_nests(ctx, f->body, &nl);
  if (P.grid[0] * P.grid[1] * P.grid[2] > 1) {
    pk_status st = check_block_sync(&P, &nl);
    if (st != PK_OK) return st;
  }

  pk_lfunc *g = pk_alloc(ctx, sizeof *g);
  *g = *f;
  int left = nl.n;
  g->body = rebuild(&P, g, f->body, threads > 1 || P.grid[0] * P.grid[1] * P.grid[2] > 1,
                    threads > 1, &left);
  /* checked on what is emitted: the one-thread loops are bound too */
  P.f = g;
  P.thread_dep = pk_alloc(ctx, sizeof(bool) * (size_t)(g->nvars + 1));
  pk_status st = check(&P, g->body);
  if (st != PK_OK) return st;

  out->f = g;
  out->static_shared_bytes = P.shared_bytes;
  out->uses_f64 = P.uses_f64;
  pkrt_gpu_kernel_desc *d = &out->desc;
  d->name = f->name;
  d->nbufs = f->nparams;
  d->nscalars = f->nscalars;
  d->workspace_bytes = f->workspace_bytes;
  for (int i = 0; i < 3; i++) d->grid[i] = (uint32_t)P.grid[i], d->block[i] = (uint32_t)P.block[i];
  d->shared_bytes = 0;
  d->workload = f->workload;
  return PK_OK;
}
