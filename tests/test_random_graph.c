/* test_random_graph.c — property test of the whole training path: random well-formed model
 * graphs (residual adds, tensors read by several nodes, diamonds, chains of every
 * differentiable op, 1–40 nodes) under random sparse-update specs (full update included)
 * go through pk_compile and a few training steps in the runtime; every step's loss and
 * every parameter must equal the same step run by the reference interpreter.
 *
 *   test_random_graph [COUNT [FIRST_SEED]]    default 100 graphs from seed 1;
 *                                             POCK_TEST_SCALE=full: 2,000
 * A failing graph is kept (its model and spec JSON are printed) so `pock compile` can
 * replay it. Tensors are (2, 8) f64 throughout, so the kernel cache hits across graphs and
 * kernels agree with the interpreter to rounding. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pk_driver.h"
#include "pock/pockrt.h"
#define PK_TEST_OWN_CHECK
#include "pk_test.h"
#include "test_graph_exec.h"

#define N 2        /* batch */
#define F 8        /* features of every pooled tensor */
#define K 4        /* classes */
#define STEPS 3
#define MAX_NODES 40
#define MAX_POOL 64
#define TOL 1e-9

/* ---- a tiny growable string ---- */
typedef struct sbuf {
  char *s;
  size_t len, cap;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < b->cap - b->len) {
      b->len += (size_t)n;
      return;
    }
    b->cap = b->cap * 2 + (size_t)n + 256;
    b->s = realloc(b->s, b->cap);
    if (!b->s) exit(2);
  }
}

/* ---- random numbers (xorshift64, seeded per graph) ---- */
static uint64_t rng;
static uint64_t rnext(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}
static int rint_below(int n) { return (int)(rnext() % (uint64_t)n); }
static double runi(void) { return (double)(rnext() >> 11) / 9007199254740992.0 * 2 - 1; }

/* ---- the graph generator ---- */
typedef struct gen {
  sbuf params, nodes;
  int nnodes, nparams, nlayer, ntmp;
  char pool[MAX_POOL][32]; /* (N, F) tensors a node may read */
  int reads[MAX_POOL];
  int npool;
} gen;

static const char *fresh(gen *g) {
  static char b[8][32];
  static int k;
  k = (k + 1) % 8;
  snprintf(b[k], sizeof b[k], "t%d", g->ntmp++);
  return b[k];
}

/* A pool tensor: half the time the newest (chains), else any (residuals, diamonds). */
static int pick(gen *g) {
  int i = rint_below(2) ? g->npool - 1 : rint_below(g->npool);
  g->reads[i]++;
  return i;
}

/* A param with inline random values scaled by its fan-in (activations stay O(1)). */
static void param(gen *g, const char *name, const char *shape) {
  int64_t dims[4], nd = 0, numel = 1;
  for (const char *p = shape; *p && nd < 4; p++)
    if (*p >= '0' && *p <= '9') dims[nd++] = strtol(p, (char **)&p, 10), p--;
  for (int d = 0; d < nd; d++) numel *= dims[d];
  double fan = nd >= 2 ? (double)(numel / dims[0]) : 4;
  sb_printf(&g->params, "%s{\"name\": \"%s\", \"shape\": %s, \"init\": [",
            g->nparams++ ? ",\n  " : "", name, shape);
  for (int64_t j = 0; j < numel; j++)
    sb_printf(&g->params, "%s%.6f", j ? ", " : "", runi() * 1.5 / sqrt(fan));
  sb_printf(&g->params, "]}");
}

/* Appends a node; returns its output's name (static storage, copy it). */
static const char *node(gen *g, const char *op, const char *in0, const char *in1,
                        const char *attrs) {
  const char *out = fresh(g);
  sb_printf(&g->nodes, "%s{\"name\": \"n%d\", \"op\": \"%s\", \"inputs\": [\"%s\"%s%s%s], "
            "\"output\": \"%s\"%s%s}", g->nnodes ? ",\n  " : "", g->nnodes, op, in0,
            in1 ? ", \"" : "", in1 ? in1 : "", in1 ? "\"" : "", out, attrs ? ", \"attrs\": " : "",
            attrs ? attrs : "");
  g->nnodes++;
  return out;
}

/* A layer's weight param "<kind><L>.weight" (L: the next layer number) into out[32]. */
static void layer_weight(gen *g, const char *kind, const char *shape, char *out) {
  snprintf(out, 32, "%s%d.weight", kind, g->nlayer++);
  param(g, out, shape);
}

static void push(gen *g, const char *name) {
  if (g->npool == MAX_POOL) return;
  snprintf(g->pool[g->npool], sizeof g->pool[0], "%s", name);
  g->reads[g->npool++] = 0;
}

/* Blocks: each reads pool tensors and pushes one new (N, F) tensor; cost = its nodes. */
enum { B_LINEAR, B_UNARY, B_BINARY, B_DIV, B_SOFTMAX, B_REDUCE, B_CONV, B_POOL, B_SLICE,
       B_BMM, B_COUNT };
static const int block_cost[B_COUNT] = {2, 1, 1, 2, 1, 2, 4, 3, 2, 5};

static void block(gen *g, int kind) {
  char a[32], b[32], t[32];
  static const char *unary[] = {"relu", "sigmoid", "tanh", "gelu"};
  static const char *binary[] = {"add", "sub", "mul"};
  static const char *reduce[] = {"sum", "mean", "max"};
  snprintf(a, sizeof a, "%s", g->pool[pick(g)]);
  switch (kind) {
  case B_LINEAR: {
    char mm[32], w[32];
    layer_weight(g, "fc", "[8, 8]", w);
    snprintf(mm, sizeof mm, "%s", node(g, "matmul", a, w, "{\"trans_b\": true}"));
    snprintf(w, sizeof w, "fc%d.bias", g->nlayer - 1);
    param(g, w, "[8]");
    push(g, node(g, "add", mm, w, NULL));
    return;
  }
  case B_UNARY: push(g, node(g, unary[rint_below(4)], a, NULL, NULL)); return;
  case B_BINARY:
    snprintf(b, sizeof b, "%s", g->pool[pick(g)]);
    push(g, node(g, binary[rint_below(3)], a, b, NULL));
    return;
  case B_DIV: /* a / sigmoid(b): a denominator in (0, 1) */
    snprintf(b, sizeof b, "%s", g->pool[pick(g)]);
    snprintf(t, sizeof t, "%s", node(g, "sigmoid", b, NULL, NULL));
    push(g, node(g, "div", a, t, NULL));
    return;
  case B_SOFTMAX: push(g, node(g, "softmax", a, NULL, "{\"axis\": -1}")); return;
  case B_REDUCE: /* a row statistic broadcast back over the row */
    snprintf(t, sizeof t, "%s", node(g, reduce[rint_below(3)], a, NULL,
                                     "{\"axes\": [1], \"keepdims\": true}"));
    snprintf(b, sizeof b, "%s", g->pool[pick(g)]);
    push(g, node(g, "add", b, t, NULL));
    return;
  case B_CONV: {
    char w[32], bias[32];
    layer_weight(g, "conv", "[2, 2, 3, 3]", w);
    snprintf(bias, sizeof bias, "conv%d.bias", g->nlayer - 1);
    param(g, bias, "[2, 1, 1]");
    snprintf(t, sizeof t, "%s", node(g, "reshape", a, NULL, "{\"shape\": [\"N\", 2, 2, 2]}"));
    snprintf(t, sizeof t, "%s", node(g, "conv2d", t, w, "{\"pad\": 1}"));
    snprintf(t, sizeof t, "%s", node(g, "add", t, bias, NULL));
    push(g, node(g, "reshape", t, NULL, "{\"shape\": [\"N\", 8]}"));
    return;
  }
  case B_POOL:
    snprintf(t, sizeof t, "%s", node(g, "reshape", a, NULL, "{\"shape\": [\"N\", 2, 2, 2]}"));
    snprintf(t, sizeof t, "%s", node(g, rint_below(2) ? "max_pool2d" : "avg_pool2d", t, NULL,
                                     "{\"kernel\": 3, \"stride\": 1, \"pad\": 1}"));
    push(g, node(g, "reshape", t, NULL, "{\"shape\": [\"N\", 8]}"));
    return;
  case B_SLICE: {
    char attrs[96];
    snprintf(attrs, sizeof attrs, "{\"slice_axis\": 1, \"slice_start\": %d, \"slice_len\": 4}",
             rint_below(5));
    snprintf(t, sizeof t, "%s", node(g, "slice", a, NULL, attrs));
    char w[32];
    layer_weight(g, "fc", "[8, 4]", w);
    push(g, node(g, "matmul", t, w, "{\"trans_b\": true}"));
    return;
  }
  case B_BMM: { /* attention-like: (N, 2, 4) x (N, 2, 4)^T, then a layer back to F */
    snprintf(b, sizeof b, "%s", g->pool[pick(g)]);
    snprintf(a, sizeof a, "%s", node(g, "reshape", a, NULL, "{\"shape\": [\"N\", 2, 4]}"));
    snprintf(b, sizeof b, "%s", node(g, "reshape", b, NULL, "{\"shape\": [\"N\", 2, 4]}"));
    snprintf(t, sizeof t, "%s", node(g, "batch_matmul", a, b, "{\"trans_b\": true}"));
    snprintf(t, sizeof t, "%s", node(g, "reshape", t, NULL, "{\"shape\": [\"N\", 4]}"));
    char w[32];
    layer_weight(g, "fc", "[8, 4]", w);
    push(g, node(g, "matmul", t, w, "{\"trans_b\": true}"));
    return;
  }
  }
}

/* The model JSON of a random graph with at most `target` nodes (>= 1). */
static char *make_model(int target) {
  gen g;
  memset(&g, 0, sizeof g);
  push(&g, "x");
  for (;;) {
    int kind = rint_below(B_COUNT), unread = 0;
    for (int i = 0; i < g.npool; i++) unread += g.reads[i] == 0;
    /* room for the block, the joins of what nobody reads yet, and the head */
    if (g.nnodes + block_cost[kind] + unread + 1 > target) break;
    block(&g, kind);
  }
  /* Every pool tensor reaches the output: the unread ones join the newest by add. */
  char last[32];
  snprintf(last, sizeof last, "%s", g.pool[g.npool - 1]);
  g.reads[g.npool - 1]++;
  for (int i = 0; i < g.npool - 1 && g.nnodes + 1 < target; i++)
    if (g.reads[i] == 0) snprintf(last, sizeof last, "%s", node(&g, "add", last, g.pool[i], NULL));
  param(&g, "head.weight", "[4, 8]");
  node(&g, "matmul", last, "head.weight", "{\"trans_b\": true}");
  sbuf m = {0};
  sb_printf(&m, "{\"format\": \"pock-graph\", \"version\": 1, \"dtype\": \"f64\",\n"
                " \"inputs\": [{\"name\": \"x\", \"shape\": [\"N\", 8]}],\n"
                " \"params\": [\n  %s],\n \"nodes\": [\n  %s],\n \"output\": \"t%d\"}\n",
            g.params.s, g.nodes.s, g.ntmp - 1);
  free(g.params.s);
  free(g.nodes.s);
  return m.s;
}

/* A random sparse-update spec over the model's params (NULL: full update, no spec file).
 * A partial-channel rule may take any weight: each is read by exactly one layer. */
static char *make_spec(const char *model) {
  int r = rint_below(10);
  if (r < 3) return NULL;
  sbuf s = {0};
  sb_printf(&s, "{\"version\": 1, \"train\": [");
  if (r == 3) {
    sb_printf(&s, "{\"all\": true}]}\n");
    return s.s;
  }
  /* Collect the weight names from the model text ("fcK.weight", "convK.weight"). */
  char names[64][32];
  int nn = 0;
  for (const char *p = model; (p = strstr(p, "\"name\": \"")) && nn < 64; p++) {
    p += 9;
    const char *e = strchr(p, '"');
    if (e && strstr(p, ".weight\"") == e - 7 && e - p < 31) {
      snprintf(names[nn], sizeof names[nn], "%.*s", (int)(e - p), p);
      bool dup = false;
      for (int i = 0; i < nn; i++) dup |= strcmp(names[i], names[nn]) == 0;
      nn += !dup;
    }
  }
  int rules = 0, weight_rules = 0;
  /* every weight is read by one layer (a conv2d or matmul) */
  if (strstr(model, ".bias\"") && rint_below(3) == 0)
    sb_printf(&s, "%s{\"biases\": true}", rules++ ? ", " : "");
  if (rint_below(4) == 0)
    sb_printf(&s, "%s{\"last_layers\": %d}", rules++ ? ", " : "", 1 + rint_below(nn < 3 ? nn : 3));
  for (int i = 0; i < nn; i++) {
    int c = rint_below(6);
    weight_rules += c <= 2;
    if (c == 0) sb_printf(&s, "%s{\"params\": \"%s\"}", rules++ ? ", " : "", names[i]);
    else if (c == 1) /* a fraction of the input channels (matmul trans_b or conv2d) */
      sb_printf(&s, "%s{\"params\": \"%s\", \"channels\": %s}", rules++ ? ", " : "", names[i],
                rint_below(2) ? "0.5" : "0.25");
    else if (c == 2)
      sb_printf(&s, "%s{\"params\": \"%s\", \"channel_count\": 1}", rules++ ? ", " : "",
                names[i]);
  }
  if (!weight_rules) sb_printf(&s, "%s{\"params\": \"head.*\"}", rules ? ", " : "");
  sb_printf(&s, "]}\n");
  return s.s;
}

/* ---- one graph: compile, train in the runtime and in the interpreter, compare ---- */
static int write_text(const char *path, const char *text) {
  return pk_test_write_file(path, text, strlen(text));
}

/* Within TOL of the interpreter; a value the interpreter has as inf or NaN (a diverging
 * graph) must be the same there. */
static bool close_to(double got, double want, double scale) {
  if (!isfinite(want) || !isfinite(got)) return isnan(want) ? isnan(got) : got == want;
  return fabs(got - want) <= TOL * (1 + (isfinite(scale) ? scale : 0));
}

static bool run_graph(uint64_t seed, int worker, int *nodes_out) {
  char what[64];
  snprintf(what, sizeof what, "graph seed %llu", (unsigned long long)seed);
  rng = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int i = 0; i < 4; i++) rnext();
  /* 1..40 nodes, small ones more often (mean ~11): each graph costs a C build */
  double u = (runi() + 1) / 2;
  int target = 1 + (int)(u * u * u * MAX_NODES);
  char *model = make_model(target);
  char *spec = make_spec(model);
  static const char *optims[] = {"sgd", "adamw", "adam"};
  const char *optim = optims[rint_below(3)];
  char mname[32], sname[32], aname[32]; /* one set per worker process */
  snprintf(mname, sizeof mname, "model%d.json", worker);
  snprintf(sname, sizeof sname, "spec%d.json", worker);
  snprintf(aname, sizeof aname, "model%d.pock", worker);
  const char *mpath = pk_test_path(mname), *spath = pk_test_path(sname);
  const char *apath = pk_test_path(aname);
  bool ok = false;
  pk_ctx *ctx = pk_ctx_new();
  pkrt_model *m = NULL;
  if (write_text(mpath, model) != 0 || (spec && write_text(spath, spec) != 0)) {
    PK_TEST_FAIL(what, "cannot write %s", mpath);
    goto done;
  }
  pk_compile_options o = pk_compile_defaults();
  o.model = mpath;
  o.sparse = spec ? spath : NULL;
  o.batch = N;
  o.out = apath;
  o.optimizer = optim;
  o.lr = strcmp(optim, "sgd") == 0 ? 0.1 : 0.01;
  o.momentum = strcmp(optim, "sgd") == 0 ? 0.9 : NAN;
  o.weight_decay = strcmp(optim, "adam") == 0 ? NAN : 0.01;
  o.log = fopen("/dev/null", "w");
  pk_compile_result r;
  pk_status st = pk_compile(ctx, &o, &r);
  if (o.log) fclose(o.log);
  if (st != PK_OK) {
    PK_TEST_FAIL(what, "pk_compile: %s", pk_ctx_error(ctx));
    goto done;
  }
  const pk_graph *g = r.graph;
  int nfwd = 0;
  for (int k = 0; k < g->nnodes; k++) nfwd += g->nodes[k]->phase == PK_PHASE_FORWARD;
  *nodes_out = nfwd;
  char err[512];
  if (pkrt_model_open(apath, NULL, &m, err, sizeof err) != PKRT_OK) {
    PK_TEST_FAIL(what, "pkrt_model_open: %s", err);
    goto done;
  }
  /* The interpreter starts from the artifact's initial params (its optimizer state is 0). */
  tg_store *s = tg_store_new(ctx, g);
  for (int t = 0; t < g->ntensors; t++) {
    const pk_gtensor *p = g->tensors[t];
    pkrt_tensor_info ti;
    if (p->role != PK_ROLE_PARAM || p->base >= 0) continue;
    if (pkrt_model_tensor(m, p->name, &ti) != PKRT_OK) {
      PK_TEST_FAIL(what, "no tensor '%s' in the artifact", p->name);
      goto done;
    }
    for (int64_t j = 0; j < tg_numel(p); j++) s->val[t][j] = ((const double *)ti.data)[ti.offset + j];
  }
  int x = -1;
  for (int t = 0; t < g->ntensors; t++)
    if (g->tensors[t]->role == PK_ROLE_INPUT) x = t;
  for (int step = 1; step <= STEPS; step++) {
    double *in = pkrt_model_input(m, NULL);
    int32_t labels[N];
    for (int j = 0; j < N * F; j++) in[j] = s->val[x][j] = runi();
    for (int n = 0; n < N; n++) { /* integer labels (cross_entropy) */
      labels[n] = rint_below(K);
      s->val[g->target][n] = labels[n];
    }
    double lr = o.lr, b1 = 0.9, b2 = 0.999, loss;
    s->val[g->hyper][0] = lr;
    s->val[g->hyper][1] = 1 - pow(b1, step);
    s->val[g->hyper][2] = 1 - pow(b2, step);
    s->val[g->hyper][3] = 0;
    if (pkrt_model_set_labels(m, labels, N) != PKRT_OK ||
        pkrt_model_train_step(m, &loss) != PKRT_OK) {
      PK_TEST_FAIL(what, "step %d: %s", step, pkrt_model_error(m));
      goto done;
    }
    if (!tg_run(s, g->nnodes)) {
      failures++;
      goto done;
    }
    double want = s->val[g->loss][0];
    if (!isfinite(want) && !isfinite(loss)) { /* chained divisions can diverge: both agree */
      printf("note: graph seed %llu diverged at step %d in both (loss %g)\n",
             (unsigned long long)seed, step, loss);
      break;
    }
    if (!close_to(loss, want, fabs(want))) {
      PK_TEST_FAIL(what, "step %d: loss %.17g, interpreter %.17g", step, loss, want);
      goto done;
    }
    for (int t = 0; t < g->ntensors; t++) {
      const pk_gtensor *p = g->tensors[t];
      pkrt_tensor_info ti;
      if (p->role != PK_ROLE_PARAM || p->base >= 0) continue;
      pkrt_model_tensor(m, p->name, &ti);
      double scale = 0;
      for (int64_t j = 0; j < tg_numel(p); j++) scale = fmax(scale, fabs(s->val[t][j]));
      for (int64_t j = 0; j < tg_numel(p); j++) {
        double got = ((const double *)ti.data)[ti.offset + j];
        if (!close_to(got, s->val[t][j], scale)) {
          PK_TEST_FAIL(what, "step %d: %s[%lld] = %.17g, interpreter %.17g", step, p->name,
                       (long long)j, got, s->val[t][j]);
          goto done;
        }
      }
    }
  }
  ok = true;
done:
  if (!ok) printf("  model (%s optimizer):\n%s  spec: %s", optim, model, spec ? spec : "(none: full update)\n");
  if (m) pkrt_model_close(m);
  pk_ctx_free(ctx);
  free(model);
  free(spec);
  return ok;
}

/* Runs seeds first + k, first + k + workers, ... (k < workers) in this process; returns
 * how many passed and adds to the node-count histogram. */
static int run_share(long count, long first, int k, int workers, int *hist) {
  int passed = 0;
  for (long i = k; i < count; i += workers) {
    int nodes = 0;
    passed += run_graph((uint64_t)(first + i), k, &nodes);
    hist[nodes > MAX_NODES ? MAX_NODES + 1 : nodes]++;
  }
  return passed;
}

int main(int argc, char **argv) {
  const char *scale = getenv("POCK_TEST_SCALE");
  long count = scale && strcmp(scale, "full") == 0 ? 2000 : 100, first = 1;
  if (argc > 1) count = strtol(argv[1], NULL, 10);
  if (argc > 2) first = strtol(argv[2], NULL, 10);
  if (count < 1 || first < 0) return printf("usage: test_random_graph [COUNT [FIRST_SEED]]\n"), 2;
  /* scripts/test.sh shares one kernel cache between its sanitizer and normal stages: the
   * generated C is the same, so the second stage builds nothing. */
  const char *shared = getenv("POCK_TEST_KERNEL_CACHE");
  if (shared && *shared) setenv("POCK_CACHE_DIR", shared, 1);
  if (pk_test_tmpdir_make("pock_random_graph_") != 0) return 1;
  /* Two worker processes (the C builds dominate and each is one compiler process); each
   * reports its passes and histogram through a pipe. */
  int workers = count > 1 && sysconf(_SC_NPROCESSORS_ONLN) > 1 ? 2 : 1;
  int passed = 0, hist[MAX_NODES + 2] = {0}, fds[2][2];
  pid_t pids[2];
  fflush(stdout);
  for (int k = 0; k < workers; k++) {
    if (pipe(fds[k]) != 0 || (pids[k] = fork()) < 0) return printf("FAIL fork/pipe\n"), 1;
    if (pids[k] == 0) {
      close(fds[k][0]);
      int h[MAX_NODES + 2] = {0}, p = run_share(count, first, k, workers, h);
      fflush(stdout);
      ssize_t w1 = write(fds[k][1], &p, sizeof p), w2 = write(fds[k][1], h, sizeof h);
      _exit(w1 == (ssize_t)sizeof p && w2 == (ssize_t)sizeof h ? 0 : 1);
    }
    close(fds[k][1]);
  }
  for (int k = 0; k < workers; k++) {
    int p = 0, h[MAX_NODES + 2] = {0}, status = 0;
    bool got = read(fds[k][0], &p, sizeof p) == (ssize_t)sizeof p &&
               read(fds[k][0], h, sizeof h) == (ssize_t)sizeof h;
    close(fds[k][0]);
    waitpid(pids[k], &status, 0);
    if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      printf("FAIL worker %d died (status %#x): a graph crashed the compiler or runtime\n", k,
             status);
      continue;
    }
    passed += p;
    for (int j = 0; j < MAX_NODES + 2; j++) hist[j] += h[j];
  }
  int small = 0, mid = 0, big = 0;
  for (int k = 0; k <= MAX_NODES + 1; k++) *(k <= 8 ? &small : k <= 24 ? &mid : &big) += hist[k];
  printf("%s random graphs: %d of %ld equal the interpreter for %d steps (forward nodes: "
         "%d with <= 8, %d with 9-24, %d with more)\n",
         passed == count ? "PASS" : "FAIL", passed, count, STEPS, small, mid, big);
  pk_test_tmpdir_remove();
  return passed == count ? 0 : 1;
}
