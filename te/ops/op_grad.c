/* op_grad.c — the front door of gradients: checks the forward parameters and the input,
 * has the op's gradient builder write TE text, and parses it like any op. */
#include <string.h>

#include "op_impl.h"

void pk_op_grad_add_arg(pk_op_grad *g, pk_strbuf *out, pk_op_grad_arg_kind kind, int index,
                        const char *name, const pk_op_params *prm, const pk_te_tensor *y) {
  PK_ASSERT(g->nargs < PK_OP_GRAD_MAX_ARGS && kind != PK_GRAD_ARG_STAGE);
  g->args[g->nargs++] = (pk_op_grad_arg){kind, kind == PK_GRAD_ARG_INPUT ? index : 0};
  if (kind == PK_GRAD_ARG_INPUT) {
    const pk_op_input *in = &prm->in[index];
    pk_op_emit_placeholder(out, name, in->ndim, in->shape, in->dtype);
  } else {
    pk_op_emit_placeholder(out, name, y->ndim, y->shape, y->dtype);
  }
}

void pk_op_grad_add_stage(pk_op_grad *g, pk_strbuf *out, int index, const char *name,
                          int ndim, const int64_t *shape, pkrt_dtype dtype) {
  PK_ASSERT(g->nargs < PK_OP_GRAD_MAX_ARGS && index >= 0);
  g->args[g->nargs++] = (pk_op_grad_arg){PK_GRAD_ARG_STAGE, index};
  pk_op_emit_placeholder(out, name, ndim, shape, dtype);
}

/* "0 (X), 1 (W)" style list of an op's differentiable inputs, for messages. */
static const char *diff_list(pk_ctx *ctx, pk_op_kind op) {
  unsigned diff = pk_op_diff_inputs(op);
  if (!diff) return "none";
  pk_strbuf b;
  pk_strbuf_init(&b);
  for (int i = 0; i < pk_op_arity(op); i++)
    if (diff >> i & 1) pk_strbuf_printf(&b, "%s%d", b.len ? ", " : "", i);
  return pk_strbuf_finish(ctx, &b);
}

pk_status pk_op_grad_text(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int input,
                          pk_op_grad *args_out, char **text) {
  *text = NULL;
  memset(args_out, 0, sizeof *args_out);
  /* The forward program validates prm once for both directions and gives dY's shape. */
  pk_te_program *fwd;
  pk_status s = pk_op_build(ctx, op, prm, &fwd);
  if (s != PK_OK) return s;
  if (input < 0 || input >= prm->ninputs)
    return pk_op_fail(ctx, op, "no input %d to differentiate (the op has %d)", input,
                      prm->ninputs);
  if (!(pk_op_diff_inputs(op) >> input & 1))
    return pk_op_fail(ctx, op, "input %d is not differentiable (differentiable inputs: %s)",
                      input, diff_list(ctx, op));
  pk_op_grad_fn fn = pk_op_grad_builder(op);
  PK_ASSERT(fn); /* op_table.def: a diff bit implies a gradient builder */
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_printf(&b, "# gradient of %s with respect to input %d\n", pk_op_name(op), input);
  s = fn(ctx, op, prm, fwd->tensors[fwd->ntensors - 1], input, args_out, &b);
  if (s != PK_OK) {
    pk_strbuf_free(&b);
    memset(args_out, 0, sizeof *args_out);
    return s;
  }
  *text = pk_strbuf_finish(ctx, &b);
  return PK_OK;
}

pk_status pk_op_grad_build(pk_ctx *ctx, pk_op_kind op, const pk_op_params *prm, int input,
                           pk_op_grad *out) {
  char *text;
  pk_status s = pk_op_grad_text(ctx, op, prm, input, out, &text);
  if (s != PK_OK) return s;
  pk_te_program *p;
  s = pk_te_parse(ctx, text, strlen(text),
                  pk_sprintf(ctx, "op:%s:grad%d", pk_op_name(op), input), &p);
  if (s != PK_OK) {
    memset(out, 0, sizeof *out);
    return s;
  }
  /* What callers rely on: placeholders are the args in order, the result is shaped like
   * the input. A builder that breaks it is a bug in te/ops. */
  const pk_op_input *in = &prm->in[input];
  const pk_te_tensor *dx = p->tensors[p->ntensors - 1];
  int nph = 0;
  while (nph < p->ntensors && p->tensors[nph]->kind == PK_TE_PLACEHOLDER) nph++;
  PK_ASSERT(nph == out->nargs && dx->kind == PK_TE_COMPUTE && dx->ndim == in->ndim &&
            memcmp(dx->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim) == 0);
  out->prog = p;
  return PK_OK;
}
