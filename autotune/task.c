/* task.c — tuning tasks (workload key, readable name, op class) and the names and
 * content-hash ids of the tuner's records. */
#include <inttypes.h>
#include <string.h>

#include "pk_autotune.h"

const char *pk_task_class_name(pk_task_class c) {
  static const char *const names[] = {"matmul", "conv", "reduction", "injective"};
  return (unsigned)c < sizeof names / sizeof names[0] ? names[c] : "?";
}

const char *pk_meas_status_name(pk_meas_status s) {
  static const char *const names[] = {"ok", "illegal", "compile_error", "crash",
                                      "timeout", "wrong", "runtime_error"};
  return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "?";
}

/* The last compute is what the task is named after and classified by: the op's result
 * (earlier stages of a multi-stage op only prepare it). */
static const pk_te_tensor *main_compute(const pk_te_program *p) {
  for (int i = p->ntensors - 1; i >= 0; i--)
    if (p->tensors[i]->kind == PK_TE_COMPUTE) return p->tensors[i];
  return NULL;
}

static bool is_product_of_reads(const pk_expr *e) {
  return e->kind == PK_EXPR_BINARY && e->op == PK_EOP_MUL;
}

static pk_task_class classify(const pk_te_program *p) {
  bool any_reduction = false;
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    if (t->kind != PK_TE_COMPUTE || t->body->kind != PK_EXPR_REDUCE) continue;
    any_reduction = true;
    const pk_expr *r = t->body;
    if (r->op == PK_EOP_SUM && is_product_of_reads(r->args[0]))
      return r->naxes >= 3 ? PK_TASK_CONV : PK_TASK_MATMUL;
  }
  return any_reduction ? PK_TASK_REDUCTION : PK_TASK_INJECTIVE;
}

pk_status pk_task_from_program(pk_ctx *ctx, const pk_te_program *prog, const char *target,
                               pk_task *out) {
  memset(out, 0, sizeof *out);
  const pk_te_tensor *main = main_compute(prog);
  if (!main) return pk_ctx_fail(ctx, PK_ERR_CHECK, "a tuning task needs at least one compute");
  out->prog = prog;
  out->canonical = pk_te_print(ctx, prog);
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(out->canonical, strlen(out->canonical), hex);
  out->workload = pk_strdup(ctx, hex);
  out->target = pk_strdup(ctx, target ? target : "c");
  out->cls = classify(prog);
  out->flops = pk_te_flops(prog);
  out->weight = 1.0;

  /* e.g. "matmul_512x128x256_f32": class, output shape, reduce extents, dtype */
  pk_strbuf sb;
  pk_strbuf_init(&sb);
  pk_strbuf_printf(&sb, "%s_", pk_task_class_name(out->cls));
  for (int d = 0; d < main->ndim; d++) pk_strbuf_printf(&sb, "%s%" PRId64, d ? "x" : "", main->shape[d]);
  if (main->body->kind == PK_EXPR_REDUCE)
    for (int a = 0; a < main->body->naxes; a++)
      pk_strbuf_printf(&sb, "x%" PRId64, main->body->axes[a]->hi - main->body->axes[a]->lo);
  pk_strbuf_printf(&sb, "_%s", pkrt_dtype_name(main->dtype));
  out->name = pk_strbuf_finish(ctx, &sb);
  return PK_OK;
}

pk_status pk_task_for_target(pk_ctx *ctx, const pk_te_program *prog, const pk_target *t,
                             pk_task *out) {
  pk_status s = pk_task_from_program(ctx, prog, t->text, out);
  if (s == PK_OK) out->desc = t;
  return s;
}

pk_status pk_task_target(pk_ctx *ctx, const pk_task *task, const pk_target **out) {
  if (task->desc) {
    *out = task->desc;
    return PK_OK;
  }
  pk_target *t;
  pk_status s = pk_target_parse(ctx, task->target, NULL, &t);
  if (s == PK_OK) *out = t;
  return s;
}

void pk_record_make_id(pk_ctx *ctx, pk_record *r) {
  /* What makes two measurements "the same experiment": re-measuring needs a different
   * compiler or code generator, so both are part of the identity. */
  pk_strbuf sb;
  pk_strbuf_init(&sb);
  pk_strbuf_printf(&sb, "pock-record-v1\n%s\n%s\n%s\n%s\n%s\n%d\n", r->workload, r->target_key,
                   r->cand.trace_hash ? r->cand.trace_hash : "", r->compiler ? r->compiler : "",
                   r->flags ? r->flags : "", r->codegen_version);
  char hex[2 * PKRT_SHA256_BYTES + 1];
  pkrt_sha256_hex(sb.data, sb.len, hex);
  pk_strbuf_free(&sb);
  r->id = pk_strdup(ctx, hex);
}
