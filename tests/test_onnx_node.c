/* test_onnx_node.c — ONNX conformance and refusals, the one runner of the importer's
 * fixtures. Every case `in` tests/fixtures/onnx-node/scope.txt (onnx 1.16.2's backend node
 * tests, scripts/copy_onnx_node_tests.py) and every case directory under
 * tests/fixtures/onnx-ops/ is imported (batch = dim 0 of input_0), fed its
 * test_data_set_N/input_N.pb, run node by node (the inference graph, or the forward graph
 * when batch norms train with batch statistics) through the TE reference interpreter
 * (tests/test_graph_exec.h: no C compiler) and compared with output_N.pb (floats within
 * rtol 1e-4 + atol 1e-5, integers and bools exactly; the converters' own onnx-ops cases
 * within OPS_TOL, tighter). An in-scope case that fails to import or differs is a failure;
 * out-of-scope ones are counted with their reason. Prints the pass count per op type.
 * Every tests/fixtures/onnx-refused/<case>/model.onnx must be refused (PK_ERR_CHECK, no
 * graph) with a message that names the file and a node and contains each line of the
 * case's expect.txt (tests/fixtures/onnx-refused/README.md).
 *
 *   test_onnx_node [-v] [CASE...]     CASE: run only the cases (and refused models) whose
 *                                     name contains it
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "onnx.pb-c.h"
#include "pk_frontend.h"
#include "test_graph_exec.h"

#ifndef PK_SOURCE_DIR
#error "build with -DPK_SOURCE_DIR=\"...\""
#endif

#define NODE_DIR PK_SOURCE_DIR "/tests/fixtures/onnx-node"
#define OPS_DIR PK_SOURCE_DIR "/tests/fixtures/onnx-ops"
#define REFUSED_DIR PK_SOURCE_DIR "/tests/fixtures/onnx-refused"
#define RTOL 1e-4
#define ATOL 1e-5
/* The converters' own cases (onnx-ops) are held to the tightest bound their family tests
 * used (math's): the interpreter computes in double, onnxruntime in float. */
#define OPS_TOL 2e-6
#define MAX_IO 16
#define MAX_TYPES 128

static bool verbose;

/* Per op type (or out-of-scope reason): cases run and passed, out of scope. */
typedef struct op_count {
  char type[160];
  int run, pass, out;
} op_count;
static op_count counts[MAX_TYPES];
static int ncounts;
/* Out-of-scope reasons with their counts. */
static op_count reasons[MAX_TYPES];
static int nreasons;

static op_count *count_of(op_count *tab, int *n, const char *key) {
  for (int i = 0; i < *n; i++)
    if (strcmp(tab[i].type, key) == 0) return &tab[i];
  if (*n == MAX_TYPES) return &tab[MAX_TYPES - 1]; /* lumps the rest: only the print suffers */
  snprintf(tab[*n].type, sizeof tab[*n].type, "%s", key);
  return &tab[(*n)++];
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  char *buf = pk_xmalloc(cap);
  for (size_t k; (k = fread(buf + n, 1, cap - n, f)) > 0;) {
    n += k;
    if (n == cap) buf = pk_xrealloc(buf, cap *= 2);
  }
  fclose(f);
  *len = n;
  return buf;
}

/* What the runner needs of model.onnx itself: the names of the graph inputs that are fed
 * (not initializers), of the outputs, and the op type the case is counted under (its one
 * non-Constant node's; "expanded" for a composite). */
typedef struct model_io {
  int nin, nout;
  char in[MAX_IO][128], out[MAX_IO][128];
  char type[48];
  int64_t batch; /* dim 0 of the first fed input when the model fixes it, else 0 */
} model_io;

static int read_model_io(const char *path, model_io *io, char *msg, size_t cap) {
  size_t len;
  char *buf = slurp(path, &len);
  if (!buf) return snprintf(msg, cap, "%s: %s", path, strerror(errno)), -1;
  Onnx__ModelProto *m = onnx__model_proto__unpack(NULL, len, (const uint8_t *)buf);
  free(buf);
  if (!m || !m->graph) {
    if (m) onnx__model_proto__free_unpacked(m, NULL);
    return snprintf(msg, cap, "%s: not an ONNX model", path), -1;
  }
  const Onnx__GraphProto *g = m->graph;
  memset(io, 0, sizeof *io);
  for (size_t i = 0; i < g->n_input && io->nin < MAX_IO; i++) {
    bool init = false;
    for (size_t k = 0; k < g->n_initializer; k++)
      init |= strcmp(g->initializer[k]->name, g->input[i]->name) == 0;
    if (init) continue;
    const Onnx__TypeProto *tp = g->input[i]->type;
    if (io->nin == 0 && tp && tp->value_case == ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE &&
        tp->tensor_type->shape &&
        tp->tensor_type->shape->n_dim > 0 &&
        tp->tensor_type->shape->dim[0]->value_case ==
            ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE)
      io->batch = tp->tensor_type->shape->dim[0]->dim_value;
    snprintf(io->in[io->nin++], sizeof io->in[0], "%s", g->input[i]->name);
  }
  for (size_t i = 0; i < g->n_output && io->nout < MAX_IO; i++)
    snprintf(io->out[io->nout++], sizeof io->out[0], "%s", g->output[i]->name);
  const char *type = NULL;
  int nreal = 0;
  for (size_t i = 0; i < g->n_node; i++)
    if (strcmp(g->node[i]->op_type, "Constant") != 0 || g->n_node == 1)
      type = g->node[i]->op_type, nreal++;
  snprintf(io->type, sizeof io->type, "%s", nreal == 1 ? type : "expanded");
  onnx__model_proto__free_unpacked(m, NULL);
  return 0;
}

static int64_t numel_of(int ndim, const int64_t *shape) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return n;
}

static double elem_of(pkrt_dtype dt, const void *data, int64_t i) {
  switch (dt) {
  case PKRT_DTYPE_F32: return ((const float *)data)[i];
  case PKRT_DTYPE_F64: return ((const double *)data)[i];
  case PKRT_DTYPE_I32: return ((const int32_t *)data)[i];
  default: return (double)((const int64_t *)data)[i];
  }
}

static bool is_float(pkrt_dtype dt) { return dt == PKRT_DTYPE_F32 || dt == PKRT_DTYPE_F64; }

/* The ONNX shape (rank 0 for a scalar) and the graph tensor's (rank >= 1) agree. */
static bool same_shape(int ndim, const int64_t *shape, const pk_gtensor *t) {
  if (ndim == 0) return t->ndim == 1 && t->shape[0] == 1;
  if (ndim != t->ndim) return false;
  for (int d = 0; d < ndim; d++)
    if (shape[d] != t->shape[d]) return false;
  return true;
}

/* Runs data set `set` (a directory) of one case; returns NULL when it passes, else a
 * message in ctx's arena. */
static const char *run_set(pk_ctx *ctx, const char *model, const char *set, const model_io *io,
                           bool tight) {
  char path[1200];
  pkrt_dtype dt[MAX_IO];
  int ndim[MAX_IO];
  int64_t shape[MAX_IO][PK_TE_MAX_DIMS];
  const void *data[MAX_IO];
  for (int i = 0; i < io->nin; i++) {
    snprintf(path, sizeof path, "%s/input_%d.pb", set, i);
    if (pk_onnx_read_tensor(ctx, path, &dt[i], &ndim[i], shape[i], &data[i]) != PK_OK)
      return pk_strdup(ctx, pk_ctx_error(ctx));
  }
  pk_frontend_opts opts = {.batch = io->nin && ndim[0] > 0 ? shape[0][0] : 1};
  if (opts.batch < 1) return "input_0 has a zero batch dim";
  pk_graph *fwd, *g;
  pk_model_info info;
  if (pk_frontend_load_opts(ctx, model, &opts, &fwd, &info) != PK_OK)
    return pk_sprintf(ctx, "import: %s", pk_ctx_error(ctx));
  /* what an ONNX runtime computes: batch norms in training mode (the model says so) on
   * batch statistics, as the forward graph has them; else the inference graph, every
   * batch norm on its running statistics */
  g = fwd;
  if (!info.train.bn_train_all && pk_eval_build(fwd, &info.train, false, &g) != PK_OK)
    return pk_sprintf(ctx, "pk_eval_build: %s", pk_ctx_error(ctx));
  tg_store *s = tg_store_new(ctx, g);
  /* tg_store_new copies f32 initial values; constants of other dtypes (folded shapes,
   * integer initializers) need theirs too */
  for (int t = 0; t < g->ntensors; t++) {
    const pk_gtensor *x = g->tensors[t];
    if (x->base >= 0 || !x->init || x->dtype == PKRT_DTYPE_F32) continue;
    for (int64_t j = 0; j < tg_numel(x); j++) s->val[t][j] = elem_of(x->dtype, x->init, j);
  }
  for (int i = 0; i < io->nin; i++) {
    int t = pk_graph_find(g, io->in[i]);
    if (t < 0) continue; /* an input nothing reads may be dropped */
    const pk_gtensor *x = g->tensors[t];
    if (x->role != PK_ROLE_INPUT || !same_shape(ndim[i], shape[i], x))
      return pk_sprintf(ctx, "input '%s': the graph's tensor is a %s of %d dims, the data "
                        "has %d", io->in[i], pk_role_name(x->role), x->ndim, ndim[i]);
    for (int64_t j = 0; j < tg_numel(x); j++)
      tg_root(s, x)[tg_elem(x, j)] = elem_of(dt[i], data[i], j);
  }
  if (!tg_run(s, g->nnodes)) return "the interpreter refused a node (FAIL line above)";
  for (int k = 0; k < io->nout; k++) {
    pkrt_dtype wdt;
    int wnd;
    int64_t wshape[PK_TE_MAX_DIMS];
    const void *want;
    snprintf(path, sizeof path, "%s/output_%d.pb", set, k);
    if (pk_onnx_read_tensor(ctx, path, &wdt, &wnd, wshape, &want) != PK_OK)
      return pk_strdup(ctx, pk_ctx_error(ctx));
    int t = pk_graph_find(g, io->out[k]);
    if (t < 0) return pk_sprintf(ctx, "output '%s' is no tensor of the graph", io->out[k]);
    const pk_gtensor *x = g->tensors[t];
    if (!same_shape(wnd, wshape, x))
      return pk_sprintf(ctx, "output '%s': shape of %d dims (%lld elements), want %d dims "
                        "(%lld)", io->out[k], x->ndim, (long long)tg_numel(x), wnd,
                        (long long)numel_of(wnd, wshape));
    if (is_float(wdt) != is_float(x->dtype))
      return pk_sprintf(ctx, "output '%s': %s, want %s", io->out[k],
                        pkrt_dtype_name(x->dtype), pkrt_dtype_name(wdt));
    const double *got = tg_root(s, x);
    for (int64_t j = 0; j < tg_numel(x); j++) {
      double a = got[tg_elem(x, j)], b = elem_of(wdt, want, j);
      double tol = tight ? OPS_TOL * fmax(1.0, fabs(b)) : ATOL + RTOL * fabs(b);
      bool ok = is_float(wdt) ? (a == b || (isnan(a) && isnan(b)) || fabs(a - b) <= tol)
                              : a == b;
      if (!ok)
        return pk_sprintf(ctx, "output '%s'[%lld] = %.9g, want %.9g", io->out[k],
                          (long long)j, a, b);
    }
  }
  return NULL;
}

/* One case directory: every test_data_set_N (tight: an onnx-ops case, OPS_TOL). Returns 0
 * (pass) or 1. */
static int run_case(const char *dir, const char *name, bool tight) {
  char model[1100], msg[1400];
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  model_io io;
  if (read_model_io(model, &io, msg, sizeof msg) != 0) {
    printf("FAIL %s: %s\n", name, msg);
    count_of(counts, &ncounts, "?")->run++;
    return 1;
  }
  op_count *c = count_of(counts, &ncounts, io.type);
  c->run++;
  DIR *d = opendir(dir);
  int nsets = 0, bad = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strncmp(e->d_name, "test_data_set_", 14) != 0) continue;
    char set[1100];
    snprintf(set, sizeof set, "%s/%s", dir, e->d_name);
    pk_ctx *ctx = pk_ctx_new();
    const char *err = run_set(ctx, model, set, &io, tight);
    if (err) printf("FAIL %s (%s): %s\n", name, e->d_name, err), bad = 1;
    pk_ctx_free(ctx);
    nsets++;
  }
  if (d) closedir(d);
  if (!nsets) printf("FAIL %s: no test_data_set_N\n", name), bad = 1;
  if (!bad) {
    c->pass++;
    if (verbose) printf("PASS %s\n", name);
  }
  return bad;
}

static bool selected(const char *name, char **only, int nonly) {
  for (int i = 0; i < nonly; i++)
    if (strstr(name, only[i])) return true;
  return nonly == 0;
}

/* tests/fixtures/onnx-node: the cases scope.txt lists. */
static int run_scope(char **only, int nonly, int *ncases) {
  FILE *f = fopen(NODE_DIR "/scope.txt", "r");
  if (!f) return printf("FAIL setup: cannot open %s/scope.txt\n", NODE_DIR), 1;
  char line[512];
  int bad = 0;
  while (fgets(line, sizeof line, f)) {
    char name[256], verdict[16];
    int off;
    if (line[0] == '#' || sscanf(line, "%255s %15s %n", name, verdict, &off) < 2) continue;
    if (!selected(name, only, nonly)) continue;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", NODE_DIR, name);
    if (strcmp(verdict, "out") == 0) {
      char *reason = line + off;
      reason[strcspn(reason, "\n")] = 0;
      char *fr = strstr(reason, " frozen");
      if (fr && fr[7] == 0) *fr = 0;
      model_io io;
      char msg[1400];
      count_of(counts, &ncounts, read_model_io(strcat(dir, "/model.onnx"), &io, msg,
                                               sizeof msg) == 0 ? io.type : "?")->out++;
      count_of(reasons, &nreasons, reason)->out++;
      continue;
    }
    if (strcmp(verdict, "in") != 0) {
      printf("FAIL scope.txt: '%s': verdict '%s' (want in or out)\n", name, verdict);
      bad++;
      continue;
    }
    (*ncases)++;
    bad += run_case(dir, name, false);
  }
  fclose(f);
  return bad;
}

/* tests/fixtures/onnx-ops: every directory holding a model.onnx, at depth 1 or 2 (the
 * converter families may group their cases); all are in scope. */
static int run_ops_dir(const char *dir, int depth, char **only, int nonly, int *ncases) {
  DIR *d = opendir(dir);
  if (!d) return 0; /* no such directory yet: nothing to run */
  struct dirent **names;
  int n = scandir(dir, &names, NULL, alphasort), bad = 0;
  closedir(d);
  for (int i = 0; i < n; i++) {
    const char *e = names[i]->d_name;
    char sub[1024], model[1100];
    struct stat st;
    snprintf(sub, sizeof sub, "%s/%s", dir, e);
    snprintf(model, sizeof model, "%s/model.onnx", sub);
    if (e[0] != '.' && stat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
      if (stat(model, &st) == 0) {
        if (selected(e, only, nonly)) (*ncases)++, bad += run_case(sub, e, true);
      } else if (depth < 2) {
        bad += run_ops_dir(sub, depth + 1, only, nonly, ncases);
      }
    }
    free(names[i]);
  }
  free(names);
  return bad;
}

/* One refused case: model.onnx must fail to import with PK_ERR_CHECK and no graph, and the
 * message must name the file and a node and contain every line of expect.txt. The batch is
 * dim 0 of the first input where the model fixes it (2 otherwise, and for a model that is
 * no protobuf), so that the refusal is the one the case is about, not a batch mismatch.
 * Returns 0 (pass) or 1. */
static int run_refused(const char *dir, const char *name) {
  char model[1100], expect[1100], msg[1400], want[1024];
  snprintf(model, sizeof model, "%s/model.onnx", dir);
  snprintf(expect, sizeof expect, "%s/expect.txt", dir);
  model_io io;
  if (read_model_io(model, &io, msg, sizeof msg) != 0)
    io.batch = 0; /* not even protobuf: the importer must say so, the batch does not matter */
  FILE *f = fopen(expect, "r");
  if (!f) return printf("FAIL refused %s: cannot open expect.txt\n", name), 1;
  pk_ctx *ctx = pk_ctx_new();
  pk_frontend_opts opts = {.batch = io.batch > 0 ? io.batch : 2};
  pk_graph *g = NULL;
  pk_status s = pk_frontend_load_opts(ctx, model, &opts, &g, NULL);
  const char *err = pk_ctx_error(ctx);
  const char *why = NULL;
  int nwant = 0;
  if (s != PK_ERR_CHECK || g)
    why = pk_sprintf(ctx, "status %s%s", pk_status_name(s), g ? " with a graph" : "");
  else if (!strstr(err, model))
    why = "the message does not name the file";
  else if (!strstr(err, "node '"))
    why = "the message names no node";
  while (!why && fgets(want, sizeof want, f)) {
    want[strcspn(want, "\n")] = 0;
    if (!want[0]) continue;
    nwant++;
    if (!strstr(err, want)) why = pk_sprintf(ctx, "the message lacks \"%s\"", want);
  }
  if (!why && !nwant) why = "expect.txt is empty";
  fclose(f);
  int bad = why != NULL;
  if (why) printf("FAIL refused %s: %s; message: %s\n", name, why, err);
  else printf("PASS refused %s: %s\n", name, err);
  pk_ctx_free(ctx);
  return bad;
}

/* tests/fixtures/onnx-refused: every directory holding a model.onnx. */
static int run_refused_dir(char **only, int nonly, int *nrefused) {
  struct dirent **names;
  int n = scandir(REFUSED_DIR, &names, NULL, alphasort), bad = 0;
  if (n < 0) return printf("FAIL setup: cannot read %s\n", REFUSED_DIR), 1;
  for (int i = 0; i < n; i++) {
    const char *e = names[i]->d_name;
    char sub[1024], model[1100];
    struct stat st;
    snprintf(sub, sizeof sub, "%s/%s", REFUSED_DIR, e);
    snprintf(model, sizeof model, "%s/model.onnx", sub);
    if (e[0] != '.' && stat(model, &st) == 0 && selected(e, only, nonly))
      (*nrefused)++, bad += run_refused(sub, e);
    free(names[i]);
  }
  free(names);
  return bad;
}

int main(int argc, char **argv) {
  char *only[64];
  int nonly = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-v") == 0) verbose = true;
    else if (argv[i][0] == '-' || nonly == 64)
      return printf("usage: test_onnx_node [-v] [CASE...]\n"), 2;
    else only[nonly++] = argv[i];
  }
  int ncases = 0, bad = run_scope(only, nonly, &ncases);
  bad += run_ops_dir(OPS_DIR, 1, only, nonly, &ncases);
  int nrefused = 0;
  bad += run_refused_dir(only, nonly, &nrefused);
  printf("\nop type                 passed / in scope   (out of scope)\n");
  int pass = 0, out = 0;
  for (int i = 0; i < ncounts; i++) {
    const op_count *c = &counts[i];
    printf("  %-22s %4d / %-4d         (%d)\n", c->type, c->pass, c->run, c->out);
    pass += c->pass, out += c->out;
  }
  printf("out of scope, by reason:\n");
  for (int i = 0; i < nreasons; i++) printf("  %4d  %s\n", reasons[i].out, reasons[i].type);
  printf("%d of %d in-scope cases pass; %d out of scope; %d refused models checked\n", pass,
         ncases, out, nrefused);
  if (ncases == 0 && nonly == 0) printf("FAIL: no case in scope\n"), bad++;
  if (nrefused == 0 && nonly == 0) printf("FAIL: no refused model\n"), bad++;
  printf("%s: %d failure(s)\n", bad ? "FAIL" : "PASS", bad);
  return bad != 0;
}
