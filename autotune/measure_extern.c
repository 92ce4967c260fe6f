/* measure_extern.c — extern candidates: recognising a task that cblas_sgemm computes (a
 * 2-D f32 C = A·B with bare-axis indices, either operand transposed) and calling it through
 * the runtime's libffi path on the task's buffers. */
#include "measure_impl.h"

static bool is_axis(const pk_expr *e, const pk_te_axis *ax) {
  return e->kind == PK_EXPR_AXIS && e->axis == ax;
}

static bool fits_i32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

/* True when read r is t[x, y] with bare axes. */
static bool reads_at(const pk_expr *r, const pk_te_axis *x, const pk_te_axis *y) {
  return is_axis(r->args[0], x) && is_axis(r->args[1], y);
}

static bool plan_compute(const pk_te_tensor *c, meas_sgemm_plan *p) {
  if (c->kind != PK_TE_COMPUTE || c->ndim != 2 || c->dtype != PKRT_DTYPE_F32) return false;
  const pk_expr *r = c->body;
  if (r->kind != PK_EXPR_REDUCE || r->op != PK_EOP_SUM || r->naxes != 1) return false;
  const pk_expr *mul = r->args[0];
  if (mul->kind != PK_EXPR_BINARY || mul->op != PK_EOP_MUL) return false;
  const pk_expr *ra = mul->args[0], *rb = mul->args[1];
  if (ra->kind != PK_EXPR_READ || rb->kind != PK_EXPR_READ || ra->nargs != 2 || rb->nargs != 2)
    return false;
  const pk_te_tensor *a = ra->tensor, *b = rb->tensor;
  if (a->kind != PK_TE_PLACEHOLDER || b->kind != PK_TE_PLACEHOLDER || a == b ||
      a->dtype != PKRT_DTYPE_F32 || b->dtype != PKRT_DTYPE_F32)
    return false;
  const pk_te_axis *i = c->axes[0], *j = c->axes[1], *k = r->axes[0];
  int ta = reads_at(ra, i, k) ? 0 : reads_at(ra, k, i) ? 1 : -1; /* 1: A stored as [K, M] */
  int tb = reads_at(rb, k, j) ? 0 : reads_at(rb, j, k) ? 1 : -1; /* 1: B stored as [N, K] */
  if (ta < 0 || tb < 0 || k->lo != 0) return false;
  /* sgemm contracts whole rows/columns: the reduction must cover the contracted dimension. */
  if (a->shape[ta ? 0 : 1] != k->hi || b->shape[tb ? 1 : 0] != k->hi) return false;
  if (!fits_i32(a->shape[1]) || !fits_i32(b->shape[1]) || !fits_i32(c->shape[0]) ||
      !fits_i32(c->shape[1]) || !fits_i32(k->hi))
    return false;
  *p = (meas_sgemm_plan){.a = a->id, .b = b->id, .c = c->id, .trans_a = ta, .trans_b = tb,
                         .m = (int32_t)c->shape[0], .n = (int32_t)c->shape[1],
                         .k = (int32_t)k->hi, .lda = (int32_t)a->shape[1],
                         .ldb = (int32_t)b->shape[1], .ldc = (int32_t)c->shape[1]};
  return true;
}

bool meas_sgemm_plan_of(const pk_te_program *prog, meas_sgemm_plan *plan) {
  /* sgemm writes one output: a program with any other compute is not what it computes. */
  const pk_te_tensor *only = NULL;
  for (int i = 0; i < prog->ntensors; i++) {
    if (prog->tensors[i]->kind != PK_TE_COMPUTE) continue;
    if (only) return false;
    only = prog->tensors[i];
  }
  return only && plan_compute(only, plan);
}

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

void meas_sgemm_call(const pkrt_extern *fn, const meas_sgemm_plan *p, void *const *data) {
  int32_t order = CBLAS_ROW_MAJOR;
  int32_t ta = p->trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS;
  int32_t tb = p->trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  int32_t m = p->m, n = p->n, k = p->k, lda = p->lda, ldb = p->ldb, ldc = p->ldc;
  float alpha = 1.0f, beta = 0.0f;
  void *a = data[p->a], *b = data[p->b], *c = data[p->c];
  void *args[] = {&order, &ta, &tb, &m, &n, &k, &alpha, &a, &lda, &b, &ldb, &beta, &c, &ldc};
  pkrt_extern_call(fn, args, NULL);
}
