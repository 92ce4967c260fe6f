/* space_extern.c — extern candidates: recognising a task that an sgemm computes, and the
 * candidate (library, symbol, signature, and the call's shape in its knobs JSON):
 * cblas_sgemm on C targets, cuBLAS on CUDA targets. */
#include <string.h>

#include <cjson/cJSON.h>

#include "space_impl.h"

static bool is_axis(const pk_expr *e, const pk_te_axis *ax) {
  return e->kind == PK_EXPR_AXIS && e->axis == ax;
}

static bool reads_at(const pk_expr *r, const pk_te_axis *x, const pk_te_axis *y) {
  return is_axis(r->args[0], x) && is_axis(r->args[1], y);
}

static bool fits_i32(int64_t v) { return v >= 0 && v <= INT32_MAX; }

bool pk_match_sgemm_compute(const pk_te_tensor *c, pk_sgemm_shape *out) {
  if (c->kind != PK_TE_COMPUTE || c->ndim != 2 || c->dtype != PKRT_DTYPE_F32) return false;
  const pk_expr *r = c->body;
  if (r->kind != PK_EXPR_REDUCE || r->op != PK_EOP_SUM || r->naxes != 1) return false;
  const pk_expr *mul = r->args[0];
  if (mul->kind != PK_EXPR_BINARY || mul->op != PK_EOP_MUL) return false;
  const pk_expr *ra = mul->args[0], *rb = mul->args[1];
  if (ra->kind != PK_EXPR_READ || rb->kind != PK_EXPR_READ || ra->nargs != 2 || rb->nargs != 2)
    return false;
  const pk_te_axis *i = c->axes[0], *j = c->axes[1], *k = r->axes[0];
  /* The product commutes: A is the operand read at the result's row axis (a weight
   * gradient's rule writes X[k, j] * DY[k, i]). */
  if (!is_axis(ra->args[0], i) && !is_axis(ra->args[1], i)) {
    const pk_expr *t = ra;
    ra = rb, rb = t;
  }
  const pk_te_tensor *a = ra->tensor, *b = rb->tensor;
  if (a->kind != PK_TE_PLACEHOLDER || b->kind != PK_TE_PLACEHOLDER || a == b ||
      a->dtype != PKRT_DTYPE_F32 || b->dtype != PKRT_DTYPE_F32)
    return false;
  int ta = reads_at(ra, i, k) ? 0 : reads_at(ra, k, i) ? 1 : -1; /* 1: A stored (K, M) */
  int tb = reads_at(rb, k, j) ? 0 : reads_at(rb, j, k) ? 1 : -1; /* 1: B stored (N, K) */
  if (ta < 0 || tb < 0 || k->lo != 0) return false;
  /* sgemm contracts whole rows / columns: the reduction must cover the contracted dim. */
  if (a->shape[ta ? 0 : 1] != k->hi || b->shape[tb ? 1 : 0] != k->hi) return false;
  if (!fits_i32(a->shape[1]) || !fits_i32(b->shape[1]) || !fits_i32(c->shape[0]) ||
      !fits_i32(c->shape[1]) || !fits_i32(k->hi))
    return false;
  *out = (pk_sgemm_shape){.a = a->id, .b = b->id, .c = c->id, .trans_a = ta, .trans_b = tb,
                          .m = (int32_t)c->shape[0], .n = (int32_t)c->shape[1],
                          .k = (int32_t)k->hi, .lda = (int32_t)a->shape[1],
                          .ldb = (int32_t)b->shape[1], .ldc = (int32_t)c->shape[1]};
  return true;
}

bool pk_match_sgemm(const pk_te_program *prog, pk_sgemm_shape *out) {
  /* sgemm writes one output; a program with any other compute is more than it computes. */
  const pk_te_tensor *only = NULL;
  for (int i = 0; i < prog->ntensors; i++) {
    if (prog->tensors[i]->kind != PK_TE_COMPUTE) continue;
    if (only) return false;
    only = prog->tensors[i];
  }
  return only && pk_match_sgemm_compute(only, out);
}

static char *sgemm_knobs(pk_ctx *ctx, const pk_sgemm_shape *g) {
  /* keys in byte order: canonical like every knobs JSON */
  return pk_sprintf(ctx,
                    "{\"a\":%d,\"b\":%d,\"c\":%d,\"extern\":\"sgemm\",\"k\":%d,\"lda\":%d,"
                    "\"ldb\":%d,\"ldc\":%d,\"m\":%d,\"n\":%d,\"trans_a\":%d,\"trans_b\":%d}",
                    g->a, g->b, g->c, (int)g->k, (int)g->lda, (int)g->ldb, (int)g->ldc, (int)g->m,
                    (int)g->n, g->trans_a ? 1 : 0, g->trans_b ? 1 : 0);
}

void space_extern_init(pk_space *sp) {
  pk_sgemm_shape g;
  sp->nexterns = 0;
  /* OpenBLAS on the CPU, cuBLAS on CUDA targets; OpenCL targets have no library here */
  const pk_target *t = NULL;
  bool cuda = sp->gpu && pk_task_target(sp->ctx, sp->task, &t) == PK_OK &&
              t->kind == PK_TARGET_CUDA;
  if ((sp->gpu && !cuda) || !pk_match_sgemm(sp->task->prog, &g)) return;
  pk_candidate *c = &sp->externs[sp->nexterns++];
  memset(c, 0, sizeof *c);
  c->kind = PK_CAND_EXTERN;
  c->extern_lib = cuda ? PK_CUBLAS_LIB : PK_SGEMM_LIB;
  c->extern_sym = cuda ? PK_CUBLAS_SYM : PK_SGEMM_SYM;
  c->extern_sig = cuda ? PK_CUBLAS_SIGNATURE : PK_SGEMM_SIGNATURE;
  c->knobs = sgemm_knobs(sp->ctx, &g);
  /* The task fixes the shape, so library, symbol and signature name the candidate. */
  const char *id = pk_sprintf(sp->ctx, "extern:%s %s %s", c->extern_lib, c->extern_sym, c->extern_sig);
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(id, strlen(id), hex);
  c->trace_hash = pk_strdup(sp->ctx, hex);
}

static bool get_int(const cJSON *root, const char *key, int64_t lo, int64_t hi, int64_t *out) {
  const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!cJSON_IsNumber(it) || it->valuedouble != (double)(int64_t)it->valuedouble) return false;
  *out = (int64_t)it->valuedouble;
  return *out >= lo && *out <= hi;
}

pk_status pk_sgemm_shape_from_knobs(pk_ctx *ctx, const char *knobs_json, pk_sgemm_shape *out) {
  cJSON *root = knobs_json ? cJSON_Parse(knobs_json) : NULL;
  const cJSON *ext = cJSON_GetObjectItemCaseSensitive(root, "extern");
  static const char *const keys[] = {"a", "b", "c", "m", "n", "k", "lda", "ldb", "ldc",
                                     "trans_a", "trans_b"};
  int64_t v[11];
  bool ok = cJSON_IsObject(root) && cJSON_IsString(ext) && !strcmp(ext->valuestring, "sgemm");
  for (int i = 0; ok && i < 11; i++) ok = get_int(root, keys[i], 0, i >= 9 ? 1 : INT32_MAX, &v[i]);
  cJSON_Delete(root);
  if (!ok) return pk_ctx_fail(ctx, PK_ERR_CHECK, "extern knobs: not an sgemm call: %s", knobs_json ? knobs_json : "(null)");
  *out = (pk_sgemm_shape){.a = (int)v[0], .b = (int)v[1], .c = (int)v[2], .m = (int32_t)v[3],
                          .n = (int32_t)v[4], .k = (int32_t)v[5], .lda = (int32_t)v[6],
                          .ldb = (int32_t)v[7], .ldc = (int32_t)v[8], .trans_a = v[9] != 0,
                          .trans_b = v[10] != 0};
  return PK_OK;
}
