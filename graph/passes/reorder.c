/* reorder.c — reordering for peak memory: a greedy list scheduler over the legal orders
 * of the training graph (data dependences, and the order of every write to a storage
 * against its reads, which keeps in-place updates after the last reader of the old
 * value) that runs, among the ready nodes, one that frees the most arena bytes net. The
 * planner's arena size decides: the new order is kept only when it is lower. */
#include <stdlib.h>
#include <string.h>

#include "graph_impl.h"
#include "pk_passes.h"

typedef struct sched {
  pk_graph *g;
  int nn, nt;
  int *nsucc, **succ, *indeg; /* dependences */
  int *nacc, **acc;           /* per node: the distinct storages (roots) it reads or writes */
  int64_t *size;              /* per root: arena bytes (0: persistent, or a view) */
  bool *kept;                 /* per root: lives to the end of the step (output, loss) */
} sched;

/* Storage in the arena; a fused-away tensor (a fused epilogue's product) has none. */
static bool in_arena(const pk_gtensor *t) {
  return t->base < 0 && !t->fused_away &&
         (t->role == PK_ROLE_ACTIVATION || t->role == PK_ROLE_TEMP || t->role == PK_ROLE_GRADIENT);
}

/* Adds edge a -> b (counting only when succ is NULL). */
static void edge(sched *S, int a, int b) {
  if (a < 0 || a == b) return;
  if (S->succ) S->succ[a][S->nsucc[a]] = b, S->indeg[b]++;
  S->nsucc[a]++;
}

/* One walk over the current order: each read after the storage's last write, each write
 * after the last write and every read since. Run twice: count, then fill. */
static void walk(sched *S, int *last_write, int *head, int *ev_node, int *ev_next) {
  pk_graph *g = S->g;
  int nev = 0;
  for (int r = 0; r < S->nt; r++) last_write[r] = -1, head[r] = -1;
  for (int k = 0; k < S->nn; k++) {
    const pk_gnode *n = g->nodes[k];
    for (int i = 0; i < n->ninputs; i++) {
      int r = pk_pass_root(g, n->inputs[i]);
      edge(S, last_write[r], k);
      ev_node[nev] = k, ev_next[nev] = head[r], head[r] = nev++;
    }
    for (int i = 0; i < n->noutputs; i++) {
      int r = pk_pass_root(g, n->outputs[i]);
      edge(S, last_write[r], k);
      for (int e = head[r]; e >= 0; e = ev_next[e]) edge(S, ev_node[e], k);
      last_write[r] = k, head[r] = -1;
    }
  }
}

static void build(sched *S) {
  pk_graph *g = S->g;
  pk_ctx *ctx = g->ctx;
  int nn = S->nn, nt = S->nt, nev = 0;
  for (int k = 0; k < nn; k++) nev += g->nodes[k]->ninputs;
  int *last_write = pk_alloc(ctx, sizeof(int) * (size_t)(nt + 1));
  int *head = pk_alloc(ctx, sizeof(int) * (size_t)(nt + 1));
  int *ev_node = pk_alloc(ctx, sizeof(int) * (size_t)(nev + 1));
  int *ev_next = pk_alloc(ctx, sizeof(int) * (size_t)(nev + 1));
  S->nsucc = pk_alloc(ctx, sizeof(int) * (size_t)(nn + 1));
  S->indeg = pk_alloc(ctx, sizeof(int) * (size_t)(nn + 1));
  walk(S, last_write, head, ev_node, ev_next); /* counts */
  S->succ = pk_alloc(ctx, sizeof(int *) * (size_t)(nn + 1));
  for (int k = 0; k < nn; k++) {
    S->succ[k] = pk_alloc(ctx, sizeof(int) * (size_t)(S->nsucc[k] + 1));
    S->nsucc[k] = 0;
  }
  walk(S, last_write, head, ev_node, ev_next);
  S->nacc = pk_alloc(ctx, sizeof(int) * (size_t)(nn + 1));
  S->acc = pk_alloc(ctx, sizeof(int *) * (size_t)(nn + 1));
  for (int k = 0; k < nn; k++) {
    const pk_gnode *n = g->nodes[k];
    S->acc[k] = pk_alloc(ctx, sizeof(int) * (size_t)(n->ninputs + n->noutputs + 1));
    for (int i = 0; i < n->ninputs + n->noutputs; i++) {
      int r = pk_pass_root(g, i < n->ninputs ? n->inputs[i] : n->outputs[i - n->ninputs]);
      bool seen = false;
      for (int j = 0; j < S->nacc[k]; j++) seen = seen || S->acc[k][j] == r;
      if (!seen) S->acc[k][S->nacc[k]++] = r;
    }
  }
  S->size = pk_alloc(ctx, sizeof(int64_t) * (size_t)(nt + 1));
  S->kept = pk_alloc(ctx, sizeof(bool) * (size_t)(nt + 1));
  for (int t = 0; t < nt; t++)
    if (in_arena(g->tensors[t])) S->size[t] = pk_gtensor_bytes(g->tensors[t]);
  if (g->output >= 0) S->kept[pk_pass_root(g, g->output)] = true;
  if (g->loss >= 0) S->kept[pk_pass_root(g, g->loss)] = true;
}

/* Bytes that running k frees (storages whose last access it is) minus bytes it allocates
 * (storages it produces). */
static int64_t net_free(const sched *S, const int *remaining, int k) {
  int64_t v = 0;
  for (int j = 0; j < S->nacc[k]; j++) {
    int r = S->acc[k][j];
    if (!S->size[r]) continue;
    if (S->g->tensors[r]->producer == k) v -= S->size[r];
    if (remaining[r] == 1 && !S->kept[r]) v += S->size[r];
  }
  return v;
}

/* The candidate orders. GREEDY_NET: the ready node with the most net bytes freed, ties to
 * the earlier original node. GREEDY_HOIST: today's order, except that a ready node that
 * frees more than it allocates runs first (the most freeing one). GREEDY_ALAP: every node
 * as late as its readers allow (a result made just before its first use lives shorter). */
typedef enum greedy_mode { GREEDY_NET, GREEDY_HOIST, GREEDY_ALAP, GREEDY_COUNT_ } greedy_mode;

/* As late as possible: placed from the end, the latest original node whose successors are
 * all placed. */
static void alap(const sched *S, int *order) {
  pk_ctx *ctx = S->g->ctx;
  int nn = S->nn;
  int *left = pk_alloc(ctx, sizeof(int) * (size_t)(nn + 1)); /* successors not yet placed */
  bool *done = pk_alloc(ctx, sizeof(bool) * (size_t)(nn + 1));
  int **pred = pk_alloc(ctx, sizeof(int *) * (size_t)(nn + 1));
  int *npred = pk_alloc(ctx, sizeof(int) * (size_t)(nn + 1));
  for (int k = 0; k < nn; k++) {
    left[k] = S->nsucc[k];
    pred[k] = pk_alloc(ctx, sizeof(int) * (size_t)(S->indeg[k] + 1));
  }
  for (int k = 0; k < nn; k++)
    for (int j = 0; j < S->nsucc[k]; j++) {
      int b = S->succ[k][j];
      pred[b][npred[b]++] = k;
    }
  for (int step = nn - 1; step >= 0; step--) {
    int best = -1;
    for (int k = nn - 1; k >= 0 && best < 0; k--)
      if (!done[k] && !left[k]) best = k;
    PK_ASSERT(best >= 0 && "the dependences have a cycle");
    order[step] = best;
    done[best] = true;
    for (int j = 0; j < npred[best]; j++) left[pred[best][j]]--;
  }
}

static void greedy(const sched *S, greedy_mode mode, int *order) {
  pk_ctx *ctx = S->g->ctx;
  int nn = S->nn;
  int *indeg = pk_alloc(ctx, sizeof(int) * (size_t)(nn + 1));
  int *remaining = pk_alloc(ctx, sizeof(int) * (size_t)(S->nt + 1));
  bool *done = pk_alloc(ctx, sizeof(bool) * (size_t)(nn + 1));
  memcpy(indeg, S->indeg, sizeof(int) * (size_t)nn);
  for (int k = 0; k < nn; k++)
    for (int j = 0; j < S->nacc[k]; j++) remaining[S->acc[k][j]]++;
  for (int step = 0; step < nn; step++) {
    int best = -1, first = -1;
    int64_t best_v = 0;
    for (int k = 0; k < nn; k++) {
      if (done[k] || indeg[k]) continue;
      if (first < 0) first = k;
      int64_t v = net_free(S, remaining, k);
      if (best < 0 || v > best_v) best = k, best_v = v;
    }
    if (mode == GREEDY_HOIST && best_v <= 0) best = first;
    PK_ASSERT(best >= 0 && "the dependences have a cycle");
    order[step] = best;
    done[best] = true;
    for (int j = 0; j < S->nacc[best]; j++) remaining[S->acc[best][j]]--;
    for (int j = 0; j < S->nsucc[best]; j++) indeg[S->succ[best][j]]--;
  }
}

pk_status pk_pass_reorder(pk_graph *g, const char **note) {
  pk_ctx *ctx = g->ctx;
  sched S = {.g = g, .nn = g->nnodes, .nt = g->ntensors};
  int64_t before, best_bytes;
  pk_status s = pk_pass_arena_bytes(g, &before);
  if (s != PK_OK) return s;
  build(&S);
  /* Each candidate order is applied, planned, and undone; the lowest is kept if lower. */
  int *order = pk_alloc(ctx, sizeof(int) * (size_t)(S.nn + 1));
  int *back = pk_alloc(ctx, sizeof(int) * (size_t)(S.nn + 1));
  int *best = NULL;
  best_bytes = before;
  for (int m = 0; m < GREEDY_COUNT_; m++) {
    if (m == GREEDY_ALAP) alap(&S, order);
    else greedy(&S, (greedy_mode)m, order);
    int64_t bytes;
    pk_graph_reorder(g, order);
    s = pk_pass_arena_bytes(g, &bytes);
    for (int k = 0; k < S.nn; k++) back[order[k]] = k;
    pk_graph_reorder(g, back);
    if (s != PK_OK) return s;
    if (bytes < best_bytes) {
      best_bytes = bytes;
      best = pk_alloc(ctx, sizeof(int) * (size_t)(S.nn + 1));
      memcpy(best, order, sizeof(int) * (size_t)S.nn);
    }
  }
  if (!best) {
    *note = pk_sprintf(ctx, "order kept (arena %lld bytes; no order found is lower)",
                       (long long)before);
    return PK_OK;
  }
  int moved = 0;
  for (int k = 0; k < S.nn; k++) moved += best[k] != k;
  pk_graph_reorder(g, best);
  *note = pk_sprintf(ctx, "%d nodes moved: arena %lld -> %lld bytes", moved, (long long)before,
                     (long long)best_bytes);
  return PK_OK;
}
