/* search_space.c — `pock sparse-search`'s candidates and schemes: the model's layers (the
 * last one is the head, always trained), each lower layer's bias and its weight at 1/8,
 * 1/4, 1/2 and all input channels, and each normalization's params below the head; a
 * scheme picks one weight option and bias on/off per layer, norms on/off, and is written
 * out as a sparse-update spec. */
#include <math.h>
#include <string.h>

#include "search_impl.h"

static const double ratios[SRCH_NRATIOS] = {0.125, 0.25, 0.5, 1.0};

static int add_item(srch_space *sp, int cap, const char *param, int layer, bool bias,
                    int64_t channels) {
  PK_ASSERT(sp->nitems < cap);
  sp->items[sp->nitems] = (srch_item){.param = param, .layer = layer, .bias = bias,
                                      .channels = channels, .val_acc = NAN, .gain = NAN};
  return sp->nitems++;
}

/* Each normalization node before the head reading params no layer owns (a LayerNorm's or a
 * batch norm's scale and shift): an entry with one on/off item of those params. Params
 * shared with an earlier norm are offered once. */
static void add_norms(const pk_graph *g, srch_space *sp, int cap, bool *seen, int head_node) {
  for (int k = 0; k < head_node; k++) {
    const pk_gnode *n = g->nodes[k];
    if (n->kind != PK_GNODE_OP || !(pk_op_flags(n->op) & PK_OPF_NORM)) continue;
    const char *p[2] = {NULL, NULL};
    int np = 0;
    for (int i = 0; i < n->ninputs; i++) {
      const pk_gtensor *t = g->tensors[n->inputs[i]];
      if (t->role != PK_ROLE_PARAM || t->base >= 0 || t->layer >= 0 || seen[t->id]) continue;
      seen[t->id] = true;
      if (np < 2) p[np++] = t->name;
    }
    if (!np) continue;
    srch_layer *L = &sp->layers[sp->nlayers];
    *L = (srch_layer){.name = n->name, .nw = 1, .bias_item = add_item(sp, cap, p[0], sp->nlayers,
                                                                     true, 0)};
    sp->items[L->bias_item].param2 = p[1];
    sp->items[L->bias_item].norm = true;
    sp->nlayers++;
  }
}

/* "P" or "P P2": a candidate's params as the scheme key and the report name them. */
static void put_item(pk_strbuf *b, const srch_item *it) {
  pk_strbuf_printf(b, "%s%s", b->len ? " " : "", it->param);
  if (it->param2) pk_strbuf_printf(b, " %s", it->param2);
}

pk_status srch_space_build(pk_ctx *ctx, const pk_compile_options *co, srch_space *sp) {
  pk_compile_options o = *co;
  o.sparse = NULL;
  o.dump_after = "load";
  o.out = NULL;
  drv_state S;
  pk_status s = drv_compile_to(ctx, &o, "load", &S);
  if (s != PK_OK) return s;
  pk_graph *g = S.fwd;
  int nl = pk_graph_layers(g);
  if (nl < 1)
    return pk_ctx_fail(ctx, PK_ERR_CHECK,
                       "%s: no layer (a conv2d or matmul reading a param): nothing to search",
                       o.model);
  memset(sp, 0, sizeof *sp);
  sp->train = S.spec;
  int nnorms = 0;
  for (int k = 0; k < g->nnodes; k++)
    nnorms += g->nodes[k]->kind == PK_GNODE_OP && (pk_op_flags(g->nodes[k]->op) & PK_OPF_NORM);
  int cap = (nl - 1) * (SRCH_NRATIOS + 1) + nnorms + 1;
  sp->items = pk_alloc(ctx, sizeof *sp->items * (size_t)cap);
  sp->layers = pk_alloc(ctx, sizeof *sp->layers * (size_t)(nl - 1 + nnorms + 1));
  sp->head = pk_alloc(ctx, sizeof *sp->head * (size_t)g->ntensors);
  for (int t = 0; t < g->ntensors; t++) {
    const pk_gtensor *p = g->tensors[t];
    if (p->role == PK_ROLE_PARAM && p->layer == nl - 1) sp->head[sp->nhead++] = p->name;
  }
  for (int l = 0; l < nl - 1; l++) {
    const pk_gnode *n = g->nodes[g->layer_nodes[l]];
    srch_layer *L = &sp->layers[sp->nlayers];
    *L = (srch_layer){.name = n->name, .nw = 1, .bias_item = -1};
    const pk_gtensor *w = n->ninputs > 1 ? g->tensors[n->inputs[1]] : NULL;
    if (w && w->role == PK_ROLE_PARAM && w->layer == l && w->ndim >= 2) {
      L->in_channels = w->shape[1];
      for (int r = 0; r < SRCH_NRATIOS; r++) {
        int64_t c = llround(ratios[r] * (double)L->in_channels);
        if (c < 1 || (L->nw > 1 && sp->items[L->wopt[L->nw - 1]].channels == c)) continue;
        L->wopt[L->nw++] = add_item(sp, cap, w->name, sp->nlayers, false, c);
      }
    }
    for (int t = 0; t < g->ntensors; t++) {
      const pk_gtensor *p = g->tensors[t];
      if (p->role == PK_ROLE_PARAM && p->layer == l && p->is_bias && L->bias_item < 0)
        L->bias_item = add_item(sp, cap, p->name, sp->nlayers, true, 0);
    }
    if (L->nw > 1 || L->bias_item >= 0) sp->nlayers++;
  }
  add_norms(g, sp, cap, pk_alloc(ctx, (size_t)g->ntensors + 1), g->layer_nodes[nl - 1]);
  if (sp->nhead == 0)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: the last layer (the head) reads no param", o.model);
  return PK_OK;
}

srch_scheme *srch_scheme_new(pk_ctx *ctx, const srch_space *sp) {
  srch_scheme *s = pk_alloc(ctx, sizeof *s);
  size_t n = (size_t)(sp->nlayers ? sp->nlayers : 1);
  s->w = pk_alloc(ctx, n);
  s->b = pk_alloc(ctx, n);
  s->measured = s->measured_ms = NAN;
  s->cost.step_ms = NAN;
  return s;
}

void srch_scheme_finish(pk_ctx *ctx, const srch_space *sp, srch_scheme *s, double head_acc) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  double p = head_acc;
  for (int l = 0; l < sp->nlayers; l++) {
    const srch_layer *L = &sp->layers[l];
    if (s->w[l]) {
      const srch_item *it = &sp->items[L->wopt[s->w[l]]];
      if (it->channels == L->in_channels) pk_strbuf_printf(&b, "%s%s", b.len ? " " : "", it->param);
      else pk_strbuf_printf(&b, "%s%s[:%lld]", b.len ? " " : "", it->param, (long long)it->channels);
      p += isnan(it->gain) ? 0 : it->gain;
    }
    if (s->b[l]) {
      const srch_item *it = &sp->items[L->bias_item];
      put_item(&b, it);
      p += isnan(it->gain) ? 0 : it->gain;
    }
  }
  s->key = b.len ? pk_strbuf_finish(ctx, &b) : "head only";
  pk_strbuf_free(&b);
  s->predicted = p;
}

srch_scheme *srch_scheme_of_item(pk_ctx *ctx, const srch_space *sp, int item) {
  srch_scheme *s = srch_scheme_new(ctx, sp);
  if (item >= 0) {
    const srch_item *it = &sp->items[item];
    const srch_layer *L = &sp->layers[it->layer];
    if (it->bias) s->b[it->layer] = 1;
    for (int k = 1; k < L->nw && !it->bias; k++)
      if (L->wopt[k] == item) s->w[it->layer] = (unsigned char)k;
  }
  srch_scheme_finish(ctx, sp, s, NAN);
  return s;
}

char *srch_scheme_spec(pk_ctx *ctx, const srch_space *sp, const srch_scheme *s,
                       const char *description) {
  cJSON *root = cJSON_CreateObject(), *train = cJSON_CreateArray();
  cJSON *whole = cJSON_CreateArray(), *head = cJSON_CreateObject();
  cJSON_AddNumberToObject(root, "version", 1);
  cJSON_AddItemToObject(head, "params", whole); /* the first rule: head, biases, whole weights */
  cJSON_AddItemToArray(train, head);
  if (description) cJSON_AddStringToObject(root, "description", description);
  for (int i = 0; i < sp->nhead; i++) cJSON_AddItemToArray(whole, cJSON_CreateString(sp->head[i]));
  for (int l = 0; l < sp->nlayers; l++) {
    const srch_layer *L = &sp->layers[l];
    if (s->b[l]) {
      const srch_item *it = &sp->items[L->bias_item];
      cJSON_AddItemToArray(whole, cJSON_CreateString(it->param));
      if (it->param2) cJSON_AddItemToArray(whole, cJSON_CreateString(it->param2));
    }
    if (!s->w[l]) continue;
    const srch_item *it = &sp->items[L->wopt[s->w[l]]];
    if (it->channels == L->in_channels) {
      cJSON_AddItemToArray(whole, cJSON_CreateString(it->param));
    } else {
      cJSON *r = cJSON_CreateObject();
      cJSON_AddStringToObject(r, "params", it->param);
      cJSON_AddNumberToObject(r, "channel_count", (double)it->channels);
      cJSON_AddItemToArray(train, r);
    }
  }
  cJSON_AddItemToObject(root, "train", train);
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  if (!text) pk_out_of_memory(0);
  char *out = pk_sprintf(ctx, "%s\n", text);
  cJSON_free(text);
  return out;
}
