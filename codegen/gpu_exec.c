/* gpu_exec.c — the barrier checker: a loop-IR executor that runs a prepared GPU kernel on
 * the CPU the way a GPU would, every thread of a block its own coroutine (ucontext) that
 * runs until the next barrier, the threads of each phase in forward, reversed or a fresh
 * random order, blocks one after another; then every output is compared with the
 * reference interpreter. PoCL runs work-items in order between barriers and so can hide a
 * missing one; reversed and random orders do not. Shared and workspace memory start as
 * NaN, so a read before the write shows. Arithmetic follows the emitters (f32 rounded per
 * operation, integers wrapping, floor division) and a select evaluates only its taken
 * branch, as the generated code does. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include "pk_gpu.h"

#define THREAD_STACK_BYTES (256 * 1024)

typedef struct xval {
  int64_t i;  /* integers and bools */
  double f;   /* floats (f32 values rounded to float) */
} xval;

typedef struct xmem {
  char *data;
  int64_t numel;
  pkrt_dtype dtype;
} xmem;

typedef struct xexec xexec;

typedef struct xthread {
  xexec *X;
  ucontext_t uc;
  char *stack;
  int64_t tid[3];
  xval *vars;          /* per var id */
  xmem *local;         /* per buf id: this thread's LOCAL buffers */
  char *heap;          /* the LOCAL buffers' bump region */
  size_t heap_top, heap_size;
  bool done, at_barrier;
  const pk_stmt *barrier;  /* the barrier it waits at */
} xthread;

struct xexec {
  pk_ctx *ctx;
  const pk_gpu_kernel *k;
  const pk_lfunc *f;
  xmem *mem;           /* per buf id: GLOBAL, SHARED (this block's), WORKSPACE */
  int64_t bid[3];
  int nthreads;
  xthread *threads;
  ucontext_t sched;
  bool failed;
  const char *why;
};

static void fail(xexec *X, const char *why) {
  if (!X->failed) X->failed = true, X->why = why;
}

static void nan_fill(char *p, int64_t numel, pkrt_dtype t) {
  size_t sz = pkrt_dtype_size(t);
  if (t == PKRT_DTYPE_F32) for (int64_t i = 0; i < numel; i++) ((float *)p)[i] = NAN;
  else if (t == PKRT_DTYPE_F64) for (int64_t i = 0; i < numel; i++) ((double *)p)[i] = NAN;
  else memset(p, 0x5a, (size_t)numel * sz); /* an unlikely integer */
}

/* ---- values ---- */

static double round_to(pkrt_dtype t, double v) { return t == PKRT_DTYPE_F32 ? (double)(float)v : v; }

static int64_t wrap(pkrt_dtype t, uint64_t u) {
  if (t == PKRT_DTYPE_I32) return (int64_t)(int32_t)(uint32_t)u;
  return (int64_t)u;
}

static int64_t floor_div(pkrt_dtype t, int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return wrap(t, 0 - (uint64_t)a);
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t floor_mod(int64_t a, int64_t b) {
  if (b == 0) return a;
  if (b == -1) return 0;
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

static int64_t to_int(pkrt_dtype t, double x) {
  int64_t lo = t == PKRT_DTYPE_I32 ? INT32_MIN : INT64_MIN, hi = t == PKRT_DTYPE_I32 ? INT32_MAX : INT64_MAX;
  if (x != x) return 0;
  if (x <= (double)lo) return lo;
  if (x >= (double)hi) return hi;
  return (int64_t)x;
}

static uint64_t mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static xmem *buffer(xthread *T, const pk_lbuf *b) {
  return b->scope == PK_SCOPE_LOCAL ? &T->local[b->id] : &T->X->mem[b->id];
}

static char *element(xthread *T, const pk_lbuf *b, int64_t i) {
  xmem *m = buffer(T, b);
  if (!m->data || i < 0 || i >= m->numel) {
    fail(T->X, pk_sprintf(T->X->ctx, "an access to %s[%lld] outside its %lld elements", b->name,
                          (long long)i, (long long)m->numel));
    return NULL;
  }
  return m->data + (size_t)i * pkrt_dtype_size(m->dtype);
}

static xval eval(xthread *T, const pk_lexpr *e);

static xval load(xthread *T, const pk_lexpr *e) {
  xval v = {0, 0};
  int64_t i = eval(T, e->args[0]).i;
  const char *p = element(T, e->buf, i);
  if (!p) return v;
  switch (e->buf->dtype) {
  case PKRT_DTYPE_F32: v.f = *(const float *)p; break;
  case PKRT_DTYPE_F64: v.f = *(const double *)p; break;
  case PKRT_DTYPE_I32: v.i = *(const int32_t *)p; break;
  default: v.i = *(const int64_t *)p; break;
  }
  return v;
}

static xval binary(xthread *T, const pk_lexpr *e) {
  xval r = {0, 0};
  pkrt_dtype t = e->args[0]->dtype;
  xval a = eval(T, e->args[0]);
  if (e->op == PK_EOP_AND || e->op == PK_EOP_OR) { /* && and || short-circuit, as in C */
    bool left = a.i != 0;
    if (e->op == PK_EOP_AND ? !left : left) { r.i = left; return r; }
    r.i = eval(T, e->args[1]).i != 0;
    return r;
  }
  xval b = eval(T, e->args[1]);
  if (pk_dtype_is_float(t)) {
    double x = a.f, y = b.f;
    switch (e->op) {
    case PK_EOP_ADD: r.f = round_to(t, x + y); break;
    case PK_EOP_SUB: r.f = round_to(t, x - y); break;
    case PK_EOP_MUL: r.f = round_to(t, x * y); break;
    case PK_EOP_DIV: r.f = round_to(t, x / y); break;
    case PK_EOP_MOD:
      r.f = t == PKRT_DTYPE_F32 ? (double)((float)x - floorf((float)x / (float)y) * (float)y)
                                : x - floor(x / y) * y;
      break;
    case PK_EOP_MIN: r.f = x != x ? x : y != y ? y : x < y ? x : y; break;
    case PK_EOP_MAX: r.f = x != x ? x : y != y ? y : x > y ? x : y; break;
    case PK_EOP_LT: r.i = x < y; break;
    case PK_EOP_LE: r.i = x <= y; break;
    case PK_EOP_GT: r.i = x > y; break;
    case PK_EOP_GE: r.i = x >= y; break;
    case PK_EOP_EQ: r.i = x == y; break;
    case PK_EOP_NE: r.i = x != y; break;
    default: fail(T->X, "a binary operator the executor does not know");
    }
    return r;
  }
  int64_t x = a.i, y = b.i;
  switch (e->op) {
  case PK_EOP_ADD: r.i = wrap(t, (uint64_t)x + (uint64_t)y); break;
  case PK_EOP_SUB: r.i = wrap(t, (uint64_t)x - (uint64_t)y); break;
  case PK_EOP_MUL: r.i = wrap(t, (uint64_t)x * (uint64_t)y); break;
  case PK_EOP_DIV: r.i = floor_div(t, x, y); break;
  case PK_EOP_MOD: r.i = floor_mod(x, y); break;
  case PK_EOP_MIN: r.i = x < y ? x : y; break;
  case PK_EOP_MAX: r.i = x > y ? x : y; break;
  case PK_EOP_LT: r.i = x < y; break;
  case PK_EOP_LE: r.i = x <= y; break;
  case PK_EOP_GT: r.i = x > y; break;
  case PK_EOP_GE: r.i = x >= y; break;
  case PK_EOP_EQ: r.i = x == y; break;
  case PK_EOP_NE: r.i = x != y; break;
  default: fail(T->X, "a binary operator the executor does not know");
  }
  return r;
}

static xval call(xthread *T, const pk_lexpr *e) {
  xval r = {0, 0}, a = eval(T, e->args[0]);
  pkrt_dtype t = e->dtype;
  bool f32 = t == PKRT_DTYPE_F32;
  float af = (float)a.f;
  switch (e->op) {
  case PK_EOP_EXP: r.f = f32 ? expf(af) : exp(a.f); break;
  case PK_EOP_LOG: r.f = f32 ? logf(af) : log(a.f); break;
  case PK_EOP_SQRT: r.f = f32 ? sqrtf(af) : sqrt(a.f); break;
  case PK_EOP_RSQRT: r.f = f32 ? 1.0f / sqrtf(af) : 1.0 / sqrt(a.f); break;
  case PK_EOP_TANH: r.f = f32 ? tanhf(af) : tanh(a.f); break;
  case PK_EOP_ERF: r.f = f32 ? erff(af) : erf(a.f); break;
  case PK_EOP_SIGMOID: r.f = f32 ? 1.0f / (1.0f + expf(-af)) : 1.0 / (1.0 + exp(-a.f)); break;
  case PK_EOP_POW: {
    xval b = eval(T, e->args[1]);
    r.f = f32 ? powf(af, (float)b.f) : pow(a.f, b.f);
    break;
  }
  case PK_EOP_ABS:
    if (pk_dtype_is_int(t)) r.i = a.i < 0 ? wrap(t, 0 - (uint64_t)a.i) : a.i;
    else r.f = fabs(a.f);
    break;
  case PK_EOP_HASH: {
    int64_t b = eval(T, e->args[1]).i, c = eval(T, e->args[2]).i;
    r.i = (int64_t)(mix64(mix64(mix64((uint64_t)a.i) ^ (uint64_t)b) ^ (uint64_t)c) >> 11);
    break;
  }
  default: fail(T->X, "an intrinsic the executor does not know");
  }
  if (pk_dtype_is_float(t)) r.f = round_to(t, r.f);
  return r;
}

static xval cast(xthread *T, const pk_lexpr *e) {
  xval r = {0, 0}, a = eval(T, e->args[0]);
  pkrt_dtype from = e->args[0]->dtype, to = e->dtype;
  if (pk_dtype_is_float(to)) r.f = round_to(to, pk_dtype_is_float(from) ? a.f : (double)a.i);
  else if (pk_dtype_is_float(from)) r.i = to_int(to, a.f);
  else r.i = to == PKRT_DTYPE_I32 ? wrap(to, (uint64_t)a.i) : a.i;
  return r;
}

static xval eval(xthread *T, const pk_lexpr *e) {
  xval r = {0, 0};
  if (T->X->failed) return r;
  switch (e->kind) {
  case PK_LX_INT: r.i = e->ival; return r;
  case PK_LX_FLOAT: r.f = round_to(e->dtype, e->fval); return r;
  case PK_LX_VAR: return T->vars[e->var->id];
  case PK_LX_LOAD: return load(T, e);
  case PK_LX_UNARY: {
    xval a = eval(T, e->args[0]);
    if (e->op == PK_EOP_NOT) r.i = a.i == 0;
    else if (pk_dtype_is_float(e->dtype)) r.f = -a.f;
    else r.i = wrap(e->dtype, 0 - (uint64_t)a.i);
    return r;
  }
  case PK_LX_BINARY: return binary(T, e);
  case PK_LX_SELECT: /* only the taken branch, as `c ? a : b` */
    return eval(T, e->args[0]).i ? eval(T, e->args[1]) : eval(T, e->args[2]);
  case PK_LX_CALL: return call(T, e);
  case PK_LX_CAST: return cast(T, e);
  }
  return r;
}

/* ---- statements ---- */

static void barrier(xthread *T, const pk_stmt *s) {
  T->at_barrier = true;
  T->barrier = s;
  swapcontext(&T->uc, &T->X->sched);
}

static void run(xthread *T, const pk_stmt *s);

static void store(xthread *T, const pk_stmt *s) {
  if (s->mask && !eval(T, s->mask).i) return;
  int64_t i = eval(T, s->index).i;
  xval v = eval(T, s->value);
  char *p = element(T, s->buf, i);
  if (!p) return;
  switch (s->buf->dtype) {
  case PKRT_DTYPE_F32: *(float *)p = (float)v.f; break;
  case PKRT_DTYPE_F64: *(double *)p = v.f; break;
  case PKRT_DTYPE_I32: *(int32_t *)p = (int32_t)v.i; break;
  default: *(int64_t *)p = v.i; break;
  }
}

static void alloc_local(xthread *T, const pk_stmt *s) {
  const pk_lbuf *b = s->buf;
  size_t bytes = ((size_t)b->numel * pkrt_dtype_size(b->dtype) + 15) / 16 * 16;
  if (T->heap_top + bytes > T->heap_size) {
    fail(T->X, pk_sprintf(T->X->ctx, "local buffers past %zu bytes per thread", T->heap_size));
    return;
  }
  xmem saved = T->local[b->id];
  size_t top = T->heap_top;
  T->local[b->id] = (xmem){T->heap + top, b->numel, b->dtype};
  T->heap_top += bytes;
  nan_fill(T->local[b->id].data, b->numel, b->dtype);
  run(T, s->body);
  T->heap_top = top;
  T->local[b->id] = saved;
}

static void run_for(xthread *T, const pk_stmt *s) {
  pk_loop_kind k = s->loop;
  if (k >= PK_LOOP_GPU_BLOCK_X) {
    bool blk = k <= PK_LOOP_GPU_BLOCK_Z;
    int64_t v = blk ? T->X->bid[k - PK_LOOP_GPU_BLOCK_X] : T->tid[k - PK_LOOP_GPU_THREAD_X];
    if (v < eval(T, s->extent).i) {
      T->vars[s->var->id].i = v;
      run(T, s->body);
    }
    return;
  }
  int64_t lo = eval(T, s->min).i, n = eval(T, s->extent).i;
  for (int64_t v = lo; v < lo + n && !T->X->failed; v++) {
    T->vars[s->var->id].i = v;
    run(T, s->body);
  }
}

static void run(xthread *T, const pk_stmt *s) {
  if (!s || T->X->failed) return;
  switch (s->kind) {
  case PK_ST_SEQ:
    for (int i = 0; i < s->n; i++) run(T, s->stmts[i]);
    return;
  case PK_ST_FOR: run_for(T, s); return;
  case PK_ST_IF:
    if (eval(T, s->cond).i) run(T, s->then_);
    else run(T, s->else_);
    return;
  case PK_ST_STORE: store(T, s); return;
  case PK_ST_ALLOC:
    if (s->buf->scope == PK_SCOPE_LOCAL) alloc_local(T, s);
    else run(T, s->body); /* SHARED: one per block, made before; WORKSPACE: mapped */
    return;
  case PK_ST_LET:
    T->vars[s->var->id] = eval(T, s->value);
    run(T, s->body);
    return;
  case PK_ST_BARRIER: barrier(T, s); return;
  }
}

static void thread_main(unsigned hi, unsigned lo) {
  xthread *T = (xthread *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
  run(T, T->X->f->body);
  T->done = true;
} /* returns to uc_link: the scheduler */

/* ---- blocks ---- */

static void shared_buffers(xexec *X, const pk_stmt *s, bool make) {
  if (!s) return;
  for (int i = 0; s->kind == PK_ST_SEQ && i < s->n; i++) shared_buffers(X, s->stmts[i], make);
  if (s->kind == PK_ST_ALLOC && s->buf->scope == PK_SCOPE_SHARED) {
    xmem *m = &X->mem[s->buf->id];
    if (make) {
      *m = (xmem){malloc((size_t)s->buf->numel * pkrt_dtype_size(s->buf->dtype) + 1),
                  s->buf->numel, s->buf->dtype};
      if (!m->data) fail(X, "out of memory for shared buffers");
    } else if (m->data) {
      nan_fill(m->data, m->numel, m->dtype);
    }
  }
  shared_buffers(X, s->then_, make), shared_buffers(X, s->else_, make), shared_buffers(X, s->body, make);
}

static void order_threads(xexec *X, pk_gpu_order order, uint64_t *rng, int *perm) {
  int n = X->nthreads;
  for (int i = 0; i < n; i++) perm[i] = order == PK_GPU_ORDER_REVERSED ? n - 1 - i : i;
  if (order != PK_GPU_ORDER_RANDOM) return;
  for (int i = n - 1; i > 0; i--) { /* Fisher-Yates on splitmix64 */
    *rng += 0x9E3779B97F4A7C15ull;
    int j = (int)(mix64(*rng) % (uint64_t)(i + 1));
    int t = perm[i]; perm[i] = perm[j]; perm[j] = t;
  }
}

static void run_block(xexec *X, pk_gpu_order order, uint64_t *rng, int *perm, int64_t *phases) {
  shared_buffers(X, X->f->body, false);
  const pkrt_gpu_kernel_desc *d = &X->k->desc;
  for (int t = 0; t < X->nthreads; t++) {
    xthread *T = &X->threads[t];
    T->tid[0] = t % d->block[0];
    T->tid[1] = t / d->block[0] % d->block[1];
    T->tid[2] = t / (d->block[0] * d->block[1]);
    T->done = T->at_barrier = false;
    T->heap_top = 0;
    getcontext(&T->uc);
    T->uc.uc_stack.ss_sp = T->stack;
    T->uc.uc_stack.ss_size = THREAD_STACK_BYTES;
    T->uc.uc_link = &X->sched;
    uintptr_t p = (uintptr_t)T;
    makecontext(&T->uc, (void (*)(void))thread_main, 2, (unsigned)(p >> 32), (unsigned)(p & 0xffffffffu));
  }
  for (;;) {
    order_threads(X, order, rng, perm);
    for (int i = 0; i < X->nthreads; i++) {
      xthread *T = &X->threads[perm[i]];
      if (T->done) continue;
      T->at_barrier = false;
      swapcontext(&X->sched, &T->uc);
    }
    if (X->failed) return;
    int waiting = 0, done = 0;
    for (int t = 0; t < X->nthreads; t++) {
      waiting += X->threads[t].at_barrier && !X->threads[t].done;
      done += X->threads[t].done;
    }
    if (done == X->nthreads) return;
    ++*phases;
    if (waiting != X->nthreads) {
      fail(X, pk_sprintf(X->ctx, "a barrier that %d of the block's %d threads reached while the "
                         "others had finished", waiting, X->nthreads));
      return;
    }
    for (int t = 1; t < X->nthreads; t++)
      if (X->threads[t].barrier != X->threads[0].barrier) {
        fail(X, "the threads of a block wait at different barriers");
        return;
      }
  }
}

/* ---- the check ---- */

static pk_status execute(xexec *X, pk_gpu_order order, uint64_t seed, pk_gpu_exec_result *res) {
  const pk_lfunc *f = X->f;
  const pkrt_gpu_kernel_desc *d = &X->k->desc;
  X->nthreads = (int)(d->block[0] * d->block[1] * d->block[2]);
  X->threads = calloc((size_t)X->nthreads, sizeof *X->threads);
  int *perm = calloc((size_t)X->nthreads, sizeof *perm);
  bool ok = X->threads && perm;
  for (int t = 0; ok && t < X->nthreads; t++) {
    xthread *T = &X->threads[t];
    T->X = X;
    T->stack = malloc(THREAD_STACK_BYTES);
    T->vars = calloc((size_t)f->nvars + 1, sizeof *T->vars);
    T->local = calloc((size_t)f->nbufs + 1, sizeof *T->local);
    T->heap_size = 1 << 20;
    T->heap = malloc(T->heap_size);
    ok = T->stack && T->vars && T->local && T->heap;
  }
  if (!ok) fail(X, "out of memory for the executor's threads");
  shared_buffers(X, f->body, true);
  uint64_t rng = seed * 0x2545F4914F6CDD1Dull + 1;
  for (uint32_t bz = 0; bz < d->grid[2] && !X->failed; bz++)
    for (uint32_t by = 0; by < d->grid[1] && !X->failed; by++)
      for (uint32_t bx = 0; bx < d->grid[0] && !X->failed; bx++) {
        X->bid[0] = bx, X->bid[1] = by, X->bid[2] = bz;
        run_block(X, order, &rng, perm, &res->barriers);
      }
  for (int t = 0; X->threads && t < X->nthreads; t++) {
    free(X->threads[t].stack);
    free(X->threads[t].vars);
    free(X->threads[t].local);
    free(X->threads[t].heap);
  }
  free(X->threads);
  free(perm);
  if (X->failed)
    return pk_ctx_fail(X->ctx, PK_ERR_RUNTIME, "GPU kernel %s on the executor: %s", f->name, X->why);
  return PK_OK;
}

static void free_shared(xexec *X, const pk_stmt *s) {
  if (!s) return;
  for (int i = 0; s->kind == PK_ST_SEQ && i < s->n; i++) free_shared(X, s->stmts[i]);
  if (s->kind == PK_ST_ALLOC && s->buf->scope == PK_SCOPE_SHARED) {
    free(X->mem[s->buf->id].data);
    X->mem[s->buf->id].data = NULL;
  }
  free_shared(X, s->then_), free_shared(X, s->else_), free_shared(X, s->body);
}

static void map_workspace(xexec *X, const pk_stmt *s, char *ws) {
  if (!s) return;
  for (int i = 0; s->kind == PK_ST_SEQ && i < s->n; i++) map_workspace(X, s->stmts[i], ws);
  if (s->kind == PK_ST_ALLOC && s->buf->scope == PK_SCOPE_WORKSPACE)
    X->mem[s->buf->id] = (xmem){ws + s->buf->ws_offset, s->buf->numel, s->buf->dtype};
  map_workspace(X, s->then_, ws), map_workspace(X, s->else_, ws), map_workspace(X, s->body, ws);
}

pk_status pk_gpu_check(pk_ctx *ctx, const pk_te_program *prog, const pk_schedule *sched,
                       const pk_gpu_kernel *k, pk_gpu_order order, uint64_t seed,
                       const pk_te_ref *ref, pk_gpu_exec_result *res) {
  memset(res, 0, sizeof *res);
  const pk_lfunc *f = k->f;
  if (!f) return pk_ctx_fail(ctx, PK_ERR_CHECK, "the GPU kernel was not prepared (pk_gpu_prepare)");
  if (f->nparams != prog->ntensors)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "GPU kernel %s has %d parameters for %d tensors", f->name,
                       f->nparams, prog->ntensors);
  if (!ref) {
    pk_te_ref *own = pk_te_ref_new(ctx, prog);
    pk_te_ref_fill_random(prog, own, seed);
    pk_status s = pk_te_interp_run(ctx, prog, own);
    if (s != PK_OK) return s;
    ref = own;
  }
  pk_host_buffers hb;
  pk_status s = pk_host_buffers_new(ctx, prog, &hb);
  if (s != PK_OK) return s;
  xexec X = {.ctx = ctx, .k = k, .f = f};
  X.mem = pk_alloc(ctx, sizeof *X.mem * (size_t)(f->nbufs + 1));
  memset(X.mem, 0, sizeof *X.mem * (size_t)(f->nbufs + 1));
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    if (t->kind == PK_TE_PLACEHOLDER) pk_te_ref_to_buffer(t, &ref->tensors[i], hb.data[i]);
    else nan_fill(hb.data[i], pk_te_tensor_numel(t), t->dtype); /* unwritten shows */
    X.mem[f->params[i]->id] = (xmem){hb.data[i], pk_te_tensor_numel(t), t->dtype};
  }
  char *ws = NULL;
  if (f->workspace_bytes > 0) {
    ws = malloc((size_t)f->workspace_bytes);
    if (!ws) s = pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory for the workspace");
    else memset(ws, 0xff, (size_t)f->workspace_bytes); /* NaNs */
    map_workspace(&X, f->body, ws);
  }
  if (s == PK_OK) s = execute(&X, order, seed, res);
  free_shared(&X, f->body);
  free(ws);
  pk_kernel_check_result cr = {0};
  if (s == PK_OK) s = pk_check_outputs(ctx, prog, sched, ref, &hb, &cr);
  if (cr.worst_ratio > res->worst_ratio) res->worst_ratio = cr.worst_ratio;
  pk_host_buffers_free(&hb);
  return s;
}
