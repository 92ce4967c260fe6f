/* cost_model.c — evo's cost model: gradient-boosted regression trees (squared loss), grown
 * level by level over presorted features. Small and fast enough to refit on every batch. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search_impl.h"

#define MAX_DEPTH 8

struct pk_cost_model {
  int d;
  pk_cost_model_options o;
  int ntrees, nodes;   /* nodes per tree: a full binary tree of depth o.depth */
  int *feature;        /* ntrees × nodes; -1: leaf (or unused) */
  double *threshold;   /* go left when x[feature] <= threshold */
  double *value;       /* leaf outputs, shrinkage applied */
  double base;         /* the mean target */
};

void pk_cost_model_options_default(pk_cost_model_options *o) {
  o->trees = 60;
  o->depth = 4;
  o->shrinkage = 0.2;
  o->min_leaf = 2;
}

pk_cost_model *pk_cost_model_new(int nfeatures, const pk_cost_model_options *opts) {
  pk_cost_model *m = pk_xcalloc(1, sizeof *m);
  PK_ASSERT(nfeatures > 0);
  m->d = nfeatures;
  if (opts) m->o = *opts;
  else pk_cost_model_options_default(&m->o);
  if (m->o.depth < 1) m->o.depth = 1;
  if (m->o.depth > MAX_DEPTH) m->o.depth = MAX_DEPTH;
  if (m->o.min_leaf < 1) m->o.min_leaf = 1;
  m->nodes = (1 << (m->o.depth + 1)) - 1;
  return m;
}

void pk_cost_model_free(pk_cost_model *m) {
  if (!m) return;
  free(m->feature);
  free(m->threshold);
  free(m->value);
  free(m);
}

typedef struct sort_item {
  double x;
  int row;
} sort_item;

static int cmp_item(const void *a, const void *b) {
  const sort_item *p = a, *q = b;
  return p->x < q->x ? -1 : p->x > q->x ? 1 : p->row - q->row;
}

/* Per node of the level being split: the best split found so far. */
typedef struct node_split {
  int count;
  double sum, best_score;
  int best_feature;
  double best_threshold;
  /* scan state for the current feature */
  int left_count;
  double left_sum, prev_x;
} node_split;

static void grow_tree(pk_cost_model *m, int tree, const double *x, const int *order, int n,
                      double *resid, int *node_of, node_split *ns) {
  int d = m->d, *feature = m->feature + (size_t)tree * m->nodes;
  double *threshold = m->threshold + (size_t)tree * m->nodes, *value = m->value + (size_t)tree * m->nodes;
  for (int i = 0; i < m->nodes; i++) feature[i] = -1;
  memset(node_of, 0, (size_t)n * sizeof *node_of);
  for (int level = 0; level < m->o.depth; level++) {
    int first = (1 << level) - 1, width = 1 << level;
    for (int i = 0; i < width; i++) ns[i] = (node_split){.best_score = -INFINITY, .best_feature = -1};
    for (int r = 0; r < n; r++) {
      int k = node_of[r] - first;
      if (k < 0 || k >= width) continue; /* a row of a leaf made higher up */
      ns[k].count++;
      ns[k].sum += resid[r];
    }
    for (int f = 0; f < d; f++) {
      for (int i = 0; i < width; i++) {
        ns[i].left_count = 0;
        ns[i].left_sum = 0;
        ns[i].prev_x = -INFINITY;
      }
      const int *ord = order + (size_t)f * n;
      for (int i = 0; i < n; i++) {
        int r = ord[i], k = node_of[r] - first;
        if (k < 0 || k >= width) continue;
        node_split *s = &ns[k];
        double xv = x[(size_t)r * d + f];
        int right = s->count - s->left_count;
        if (xv > s->prev_x && s->left_count >= m->o.min_leaf && right >= m->o.min_leaf) {
          /* the squared-error reduction, less its constant part sum^2 / count */
          double rs = s->sum - s->left_sum;
          double score = s->left_sum * s->left_sum / s->left_count + rs * rs / right;
          if (score > s->best_score) {
            s->best_score = score;
            s->best_feature = f;
            s->best_threshold = 0.5 * (s->prev_x + xv);
          }
        }
        s->left_count++;
        s->left_sum += resid[r];
        s->prev_x = xv;
      }
    }
    bool any = false;
    for (int i = 0; i < width; i++) {
      const node_split *s = &ns[i];
      if (s->best_feature < 0 || s->best_score <= s->sum * s->sum / (s->count ? s->count : 1) + 1e-12) continue;
      feature[first + i] = s->best_feature;
      threshold[first + i] = s->best_threshold;
      any = true;
    }
    if (!any) break;
    for (int r = 0; r < n; r++) {
      int node = node_of[r];
      if (node < first || node >= first + width || feature[node] < 0) continue;
      node_of[r] = x[(size_t)r * d + feature[node]] <= threshold[node] ? 2 * node + 1 : 2 * node + 2;
    }
  }
  /* leaves: the mean residual of their rows, shrunk */
  double *sum = pk_xcalloc((size_t)m->nodes, sizeof *sum);
  int *count = pk_xcalloc((size_t)m->nodes, sizeof *count);
  for (int r = 0; r < n; r++) {
    sum[node_of[r]] += resid[r];
    count[node_of[r]]++;
  }
  for (int i = 0; i < m->nodes; i++) value[i] = count[i] ? m->o.shrinkage * sum[i] / count[i] : 0;
  for (int r = 0; r < n; r++) resid[r] -= value[node_of[r]];
  free(sum);
  free(count);
}

void pk_cost_model_fit(pk_cost_model *m, const double *x, const double *y, int n) {
  int d = m->d;
  m->ntrees = 0;
  m->base = 0;
  if (n <= 0) return;
  for (int r = 0; r < n; r++) m->base += y[r];
  m->base /= n;
  free(m->feature);
  free(m->threshold);
  free(m->value);
  size_t cells = (size_t)m->o.trees * m->nodes;
  m->feature = pk_xmalloc(cells * sizeof *m->feature);
  m->threshold = pk_xcalloc(cells, sizeof *m->threshold);
  m->value = pk_xcalloc(cells, sizeof *m->value);
  int *order = pk_xmalloc((size_t)d * n * sizeof *order);
  sort_item *items = pk_xmalloc((size_t)n * sizeof *items);
  double *resid = pk_xmalloc((size_t)n * sizeof *resid);
  int *node_of = pk_xmalloc((size_t)n * sizeof *node_of);
  node_split *ns = pk_xmalloc(((size_t)1 << m->o.depth) * sizeof *ns);
  for (int f = 0; f < d; f++) {
    for (int r = 0; r < n; r++) items[r] = (sort_item){x[(size_t)r * d + f], r};
    qsort(items, (size_t)n, sizeof *items, cmp_item);
    for (int r = 0; r < n; r++) order[(size_t)f * n + r] = items[r].row;
  }
  for (int r = 0; r < n; r++) resid[r] = y[r] - m->base;
  for (int t = 0; t < m->o.trees; t++) {
    grow_tree(m, t, x, order, n, resid, node_of, ns);
    m->ntrees++;
  }
  free(order);
  free(items);
  free(resid);
  free(node_of);
  free(ns);
}

double pk_cost_model_predict(const pk_cost_model *m, const double *x) {
  double p = m->base;
  for (int t = 0; t < m->ntrees; t++) {
    const int *feature = m->feature + (size_t)t * m->nodes;
    const double *threshold = m->threshold + (size_t)t * m->nodes;
    int node = 0;
    while (feature[node] >= 0) node = x[feature[node]] <= threshold[node] ? 2 * node + 1 : 2 * node + 2;
    p += m->value[(size_t)t * m->nodes + node];
  }
  return p;
}
