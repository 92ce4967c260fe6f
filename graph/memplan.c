/* memplan.c — the static memory plan: persistent regions laid out in tensor order, and the
 * ARENA (activations, temps, gradients) packed by lifetime so that tensors whose lifetimes
 * are disjoint share bytes (best fit in order of first use, or greedy by size when that
 * packs smaller). Lifetimes are inclusive node ranges, so a node's
 * output never shares storage with its inputs (both are live at that node); in-place
 * outputs and views have no storage of their own. */
#include <stdlib.h>
#include <string.h>

#include "graph_impl.h"

#define ALIGN 64 /* the host's: a cache line */

const char *pk_region_name(pk_region r) {
  switch (r) {
  case PK_REGION_ARENA: return "arena";
  case PK_REGION_PARAMS: return "params";
  case PK_REGION_STATE: return "state";
  case PK_REGION_IO: return "io";
  case PK_REGION_BUFFERS: return "buffers";
  case PK_REGION_COUNT_: break;
  }
  return "?";
}

static pk_region region_of_role(pk_tensor_role r) {
  switch (r) {
  case PK_ROLE_INPUT:
  case PK_ROLE_LABEL: return PK_REGION_IO;
  case PK_ROLE_PARAM: return PK_REGION_PARAMS;
  case PK_ROLE_OPT_STATE:
  case PK_ROLE_HYPER: return PK_REGION_STATE;
  case PK_ROLE_BUFFER:
  case PK_ROLE_CONSTANT: return PK_REGION_BUFFERS;
  default: return PK_REGION_ARENA;
  }
}

static int64_t round_up_to(int64_t v, int64_t a) { return (v + a - 1) / a * a; }

typedef struct block {
  int64_t off, size;
} block;

static int cmp_block(const void *a, const void *b) {
  const block *x = a, *y = b;
  return x->off < y->off ? -1 : x->off > y->off;
}

typedef struct arena_item {
  int id;
  int first;
  int64_t size;
} arena_item;

static int cmp_item(const void *a, const void *b) {
  const arena_item *x = a, *y = b;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  if (x->size != y->size) return x->size > y->size ? -1 : 1; /* big first packs tighter */
  return x->id < y->id ? -1 : x->id > y->id;
}

static int cmp_by_size(const void *a, const void *b) {
  const arena_item *x = a, *y = b;
  if (x->size != y->size) return x->size > y->size ? -1 : 1;
  if (x->first != y->first) return x->first < y->first ? -1 : 1;
  return x->id < y->id ? -1 : x->id > y->id;
}

/* The second packing: greedy by size (TFLite's), the biggest tensors first, each at the
 * lowest offset clear of every placed tensor whose lifetime meets its own. Offsets go to
 * off[] (per tensor id); returns the arena size. */
static int64_t pack_by_size(pk_ctx *ctx, const pk_memplan *mp, const arena_item *in, int ni,
                            int64_t *off) {
  arena_item *items = pk_alloc(ctx, sizeof *items * (size_t)(ni + 1));
  memcpy(items, in, sizeof *items * (size_t)ni);
  qsort(items, (size_t)ni, sizeof *items, cmp_by_size);
  block *near = pk_alloc(ctx, sizeof *near * (size_t)(ni + 1));
  int64_t top = 0;
  for (int a = 0; a < ni; a++) {
    int t = items[a].id, n = 0;
    for (int b = 0; b < a; b++) {
      int u = items[b].id;
      if (mp->last[u] >= mp->first[t] && mp->last[t] >= mp->first[u])
        near[n++] = (block){off[u], mp->size[u]};
    }
    qsort(near, (size_t)n, sizeof *near, cmp_block);
    int64_t cur = 0;
    for (int i = 0; i < n && near[i].off < cur + items[a].size; i++)
      if (near[i].off + near[i].size > cur) cur = near[i].off + near[i].size;
    off[t] = cur;
    if (cur + items[a].size > top) top = cur + items[a].size;
  }
  return top;
}

/* Best fit: the smallest gap between live blocks that holds the tensor, else on top of the
 * highest live block. */
static int64_t place(const block *live, int nlive, int64_t size) {
  int64_t best = -1, best_gap = INT64_MAX, cur = 0;
  for (int i = 0; i < nlive; i++) {
    int64_t gap = live[i].off - cur;
    if (gap >= size && gap < best_gap) best = cur, best_gap = gap;
    if (live[i].off + live[i].size > cur) cur = live[i].off + live[i].size;
  }
  return best >= 0 ? best : cur;
}

pk_status pk_memplan_build(const pk_graph *g, const int64_t *workspace, pk_memplan **out) {
  return pk_memplan_build_aligned(g, workspace, ALIGN, out);
}

/* Every size is rounded to align, and every offset is 0 or the end of a placed tensor, so
 * every offset is a multiple of align too. */
pk_status pk_memplan_build_aligned(const pk_graph *g, const int64_t *workspace, int64_t align,
                                   pk_memplan **out) {
  pk_ctx *ctx = g->ctx;
  *out = NULL;
  if (align < ALIGN || (align & (align - 1)))
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "memplan: alignment %lld is not a power of two >= %d",
                       (long long)align, ALIGN);
  int nt = g->ntensors, nn = g->nnodes;
  pk_memplan *mp = pk_alloc(ctx, sizeof *mp);
  mp->ntensors = nt;
  mp->region = pk_alloc(ctx, sizeof *mp->region * (size_t)(nt + 1));
  mp->offset = pk_alloc(ctx, sizeof *mp->offset * (size_t)(nt + 1));
  mp->first = pk_alloc(ctx, sizeof(int) * (size_t)(nt + 1));
  mp->last = pk_alloc(ctx, sizeof(int) * (size_t)(nt + 1));
  mp->size = pk_alloc(ctx, sizeof(int64_t) * (size_t)(nt + 1));
  mp->peak_node = -1;
  mp->align = align;
  for (int t = 0; t < nt; t++) {
    const pk_gtensor *x = g->tensors[t];
    if (x->base >= nt || x->base == t || (x->base >= 0 && g->tensors[x->base]->base >= 0))
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "memplan: tensor '%s' has an invalid base", x->name);
    int owner = x->base >= 0 ? x->base : t;
    mp->region[t] = region_of_role(g->tensors[owner]->role);
    mp->first[t] = x->producer;
    mp->last[t] = x->producer;
    mp->size[t] = x->base >= 0 ? 0 : round_up_to(pk_gtensor_bytes(x), align);
  }
  /* Lifetimes: reads extend a tensor and its storage owner; in-place writes extend the
   * owner too (its bytes are being written). */
  for (int k = 0; k < nn; k++) {
    const pk_gnode *n = g->nodes[k];
    for (int i = 0; i < n->ninputs; i++) {
      int t = n->inputs[i];
      if (t < 0 || t >= nt)
        return pk_ctx_fail(ctx, PK_ERR_CHECK, "memplan: node '%s' reads a dangling tensor",
                           n->name);
      if (mp->last[t] < k) mp->last[t] = k;
      int b = g->tensors[t]->base;
      if (b >= 0 && mp->last[b] < k) mp->last[b] = k;
    }
    for (int i = 0; i < n->noutputs; i++) {
      int b = g->tensors[n->outputs[i]]->base;
      if (b >= 0 && mp->last[b] < k) mp->last[b] = k;
    }
  }
  if (g->output >= 0 && g->output < nt) mp->last[g->output] = nn;
  if (g->loss >= 0 && g->loss < nt) mp->last[g->loss] = nn;
  for (int t = 0; t < nt; t++) {
    /* a folded result: written by the load plan before any step, read by every step */
    bool whole = mp->region[t] != PK_REGION_ARENA || g->tensors[t]->role == PK_ROLE_FOLDED;
    if (whole) mp->first[t] = -1, mp->last[t] = nn;
    else if (g->tensors[t]->fused_away) mp->size[t] = 0; /* computed inside its reader */
  }

  /* Persistent regions and IO: one slot each, in tensor order. */
  for (int t = 0; t < nt; t++) {
    if (g->tensors[t]->base >= 0) continue;
    pk_region r = mp->region[t];
    mp->naive_bytes[r] += mp->size[t];
    if (r == PK_REGION_ARENA) continue;
    mp->offset[t] = mp->region_bytes[r];
    mp->region_bytes[r] += mp->size[t];
  }

  /* ARENA: best fit in order of first use (a fused-away tensor has no bytes to place: as a
   * block of none it would split the gaps around it; it gets offset 0 below) */
  arena_item *items = pk_alloc(ctx, sizeof *items * (size_t)(nt + 1));
  int ni = 0;
  for (int t = 0; t < nt; t++)
    if (mp->region[t] == PK_REGION_ARENA && g->tensors[t]->base < 0 && !g->tensors[t]->fused_away)
      items[ni++] = (arena_item){t, mp->first[t], mp->size[t]};
  qsort(items, (size_t)ni, sizeof *items, cmp_item);
  block *live = pk_alloc(ctx, sizeof *live * (size_t)(ni + 1));
  for (int a = 0; a < ni; a++) {
    int t = items[a].id, nlive = 0;
    for (int b = 0; b < a; b++) {
      int u = items[b].id;
      if (mp->last[u] >= mp->first[t]) live[nlive++] = (block){mp->offset[u], mp->size[u]};
    }
    qsort(live, (size_t)nlive, sizeof *live, cmp_block);
    mp->offset[t] = place(live, nlive, items[a].size);
    int64_t end = mp->offset[t] + items[a].size;
    if (end > mp->region_bytes[PK_REGION_ARENA]) mp->region_bytes[PK_REGION_ARENA] = end;
  }
  /* The other packing, when it is smaller: neither wins on every graph. */
  int64_t *by_size = pk_alloc(ctx, sizeof(int64_t) * (size_t)(nt + 1));
  int64_t size2 = pack_by_size(ctx, mp, items, ni, by_size);
  if (size2 < mp->region_bytes[PK_REGION_ARENA]) {
    for (int a = 0; a < ni; a++) mp->offset[items[a].id] = by_size[items[a].id];
    mp->region_bytes[PK_REGION_ARENA] = size2;
  }
  /* Views and in-place outputs live in their base's bytes. */
  for (int t = 0; t < nt; t++)
    if (g->tensors[t]->base >= 0) mp->offset[t] = mp->offset[g->tensors[t]->base];
  /* A fused-away tensor has no bytes of its own, but it keeps a place in the artifact (a
   * fused epilogue's product is its kernel's parameter, never written): offset 0, within
   * the arena (whose reader's result, of its shape, makes it that large anyway). */
  for (int t = 0; t < nt; t++)
    if (mp->region[t] == PK_REGION_ARENA && g->tensors[t]->fused_away && g->tensors[t]->base < 0) {
      mp->offset[t] = 0;
      int64_t bytes = round_up_to(pk_gtensor_bytes(g->tensors[t]), align);
      if (bytes > mp->region_bytes[PK_REGION_ARENA]) mp->region_bytes[PK_REGION_ARENA] = bytes;
    }

  /* The live peak and what it is made of. */
  for (int k = 0; k < nn; k++) {
    int64_t sum = 0;
    for (int a = 0; a < ni; a++)
      if (mp->first[items[a].id] <= k && k <= mp->last[items[a].id]) sum += items[a].size;
    if (sum > mp->arena_live_peak) mp->arena_live_peak = sum, mp->peak_node = k;
  }
  for (int a = 0; a < ni && mp->peak_node >= 0; a++) {
    int t = items[a].id;
    if (mp->first[t] <= mp->peak_node && mp->peak_node <= mp->last[t])
      mp->arena_by_role[g->tensors[t]->role] += items[a].size;
  }
  pk_memplan_set_workspace(mp, g, workspace);
  *out = mp;
  return PK_OK;
}

void pk_memplan_set_workspace(pk_memplan *mp, const pk_graph *g, const int64_t *workspace) {
  mp->workspace_bytes = 0;
  int64_t a = mp->align > ALIGN ? mp->align : ALIGN;
  for (int k = 0; workspace && k < g->nnodes; k++)
    if (round_up_to(workspace[k], a) > mp->workspace_bytes)
      mp->workspace_bytes = round_up_to(workspace[k], a);
}

char *pk_memplan_print(pk_ctx *ctx, const pk_graph *g, const pk_memplan *mp) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_printf(&b, "%-12s %14s %14s\n", "memory", "planned", "naive");
  int64_t tp = 0, tn = 0;
  for (int r = 0; r < PK_REGION_COUNT_; r++) {
    pk_strbuf_printf(&b, "%-12s %14lld %14lld\n", pk_region_name((pk_region)r),
                     (long long)mp->region_bytes[r], (long long)mp->naive_bytes[r]);
    tp += mp->region_bytes[r];
    tn += mp->naive_bytes[r];
  }
  pk_strbuf_printf(&b, "%-12s %14lld %14lld\n", "workspace", (long long)mp->workspace_bytes,
                   (long long)mp->workspace_bytes);
  tp += mp->workspace_bytes;
  tn += mp->workspace_bytes;
  pk_strbuf_printf(&b, "%-12s %14lld %14lld\n", "total", (long long)tp, (long long)tn);
  if (mp->peak_node >= 0 && mp->peak_node < g->nnodes) {
    pk_strbuf_printf(&b, "arena live peak %lld bytes at node #%d (%s):\n",
                     (long long)mp->arena_live_peak, mp->peak_node,
                     g->nodes[mp->peak_node]->name);
    for (int r = 0; r < PK_ROLE_COUNT_; r++)
      if (mp->arena_by_role[r])
        pk_strbuf_printf(&b, "  %-12s %14lld\n", pk_role_name((pk_tensor_role)r),
                         (long long)mp->arena_by_role[r]);
  }
  /* Backward-pass memory as its own figure: what training costs over inference. Naive sums:
   * the arena shares bytes among gradients, so the planned share is in the lines above. */
  if (g->loss >= 0) {
    pk_train_stats st;
    pk_train_stats_of(g, &st);
    pk_strbuf_printf(&b, "bp memory (saved activations + gradients + optimizer state):\n");
    pk_strbuf_printf(&b, "  %-18s %14lld\n", "saved_activations",
                     (long long)st.saved_activation_bytes);
    pk_strbuf_printf(&b, "  %-18s %14lld\n", "gradients", (long long)st.gradient_bytes);
    pk_strbuf_printf(&b, "  %-18s %14lld\n", "optimizer_state", (long long)st.opt_state_bytes);
    pk_strbuf_printf(&b, "  %-18s %14lld\n", "bp_total",
                     (long long)(st.saved_activation_bytes + st.gradient_bytes +
                                 st.opt_state_bytes));
  }
  return pk_strbuf_finish(ctx, &b);
}
