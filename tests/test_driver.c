/* test_driver.c — `pock compile` end to end without the command line: small models built
 * with the graph API are compiled into artifacts, opened with libpockrt and trained; the
 * reference is the TE interpreter run node by node over the same training graph (every
 * node's program in order, views and in-place outputs resolved through their bases). It
 * checks the loss of each step, every parameter and optimizer state after 3 steps (the
 * last batch partial), the forward output and eval loss, for a full update, partial-channel
 * schemes (updates written through strided views, 2-D and 4-D), Adam, f32 and f64, tuned
 * schedules from a database (and an extern best replaced by a schedule record), an
 * inference artifact; that the runtime's arena is the memory plan's; and option errors.
 * PK_TEST_VERBOSE=1 prints each graph, its memory plan and every tensor's error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_driver.h"
#include "pk_passes.h"
#include "pk_search.h"
#include "pk_tunedb.h"
#include "pock/pockrt.h"
#include "pk_test.h"



static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static double urand(void) { /* splitmix64 → [-1, 1) */
  uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return (double)(z >> 11) / 9007199254740992.0 * 2 - 1;
}

/* ---------------------------------------------------------------- models */

static void *init_values(pk_ctx *ctx, pkrt_dtype dt, int64_t n, double scale) {
  void *p = pk_alloc(ctx, (size_t)n * pkrt_dtype_size(dt));
  for (int64_t i = 0; i < n; i++) {
    double v = urand() * scale;
    if (dt == PKRT_DTYPE_F32) ((float *)p)[i] = (float)v;
    else ((double *)p)[i] = v;
  }
  return p;
}

static int param(pk_graph *g, const char *name, pkrt_dtype dt, int ndim, const int64_t *shape, double scale) {
  int64_t n = 1;
  for (int d = 0; d < ndim; d++) n *= shape[d];
  return pk_graph_add_param(g, name, dt, ndim, shape, init_values(g->ctx, dt, n, scale));
}

/* x (B, 6) → fc1 (5) → relu → fc2 (3): logits of 3 classes. */
static pk_graph *mlp(pk_ctx *ctx, pkrt_dtype dt, int64_t batch) {
  pk_graph *g = pk_graph_new(ctx, batch);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, dt, 2, (int64_t[]){batch, 6});
  int w1 = param(g, "fc1.weight", dt, 2, (int64_t[]){5, 6}, 0.5);
  int b1 = param(g, "fc1.bias", dt, 1, (int64_t[]){5}, 0.1);
  int w2 = param(g, "fc2.weight", dt, 2, (int64_t[]){3, 5}, 0.5);
  int b2 = param(g, "fc2.bias", dt, 1, (int64_t[]){3}, 0.1);
  int t, h, y;
  pk_op_attrs tb = {.trans_b = true};
  if (pk_graph_add_op(g, "fc1", PK_OP_MATMUL, &tb, 2, (int[]){x, w1}, "fc1.mm", &t) != PK_OK ||
      pk_graph_add_op(g, "fc1.add", PK_OP_ADD, &(pk_op_attrs){0}, 2, (int[]){t, b1}, "fc1.out", &h) != PK_OK ||
      pk_graph_add_op(g, "act1", PK_OP_RELU, &(pk_op_attrs){0}, 1, (int[]){h}, "h1", &h) != PK_OK ||
      pk_graph_add_op(g, "fc2", PK_OP_MATMUL, &tb, 2, (int[]){h, w2}, "fc2.mm", &t) != PK_OK ||
      pk_graph_add_op(g, "fc2.add", PK_OP_ADD, &(pk_op_attrs){0}, 2, (int[]){t, b2}, "fc2.out", &y) != PK_OK)
    return NULL;
  g->output = y;
  return pk_graph_validate(g) == PK_OK ? g : NULL;
}

/* x (B, 2, 5, 5) → conv1 3x3 (4) + bias → relu → conv2 3x3 (3) → mean over (2, 3). */
static pk_graph *cnn(pk_ctx *ctx, pkrt_dtype dt, int64_t batch) {
  pk_graph *g = pk_graph_new(ctx, batch);
  int x = pk_graph_add_tensor(g, "x", PK_ROLE_INPUT, dt, 4, (int64_t[]){batch, 2, 5, 5});
  int w1 = param(g, "conv1.weight", dt, 4, (int64_t[]){4, 2, 3, 3}, 0.4);
  int b1 = param(g, "conv1.bias", dt, 3, (int64_t[]){4, 1, 1}, 0.1);
  int w2 = param(g, "conv2.weight", dt, 4, (int64_t[]){3, 4, 3, 3}, 0.4);
  int t, h, y;
  pk_op_attrs mean = {.naxes = 2, .axes = {2, 3}};
  if (pk_graph_add_op(g, "conv1", PK_OP_CONV2D, &(pk_op_attrs){0}, 2, (int[]){x, w1}, "conv1.y", &t) != PK_OK ||
      pk_graph_add_op(g, "conv1.add", PK_OP_ADD, &(pk_op_attrs){0}, 2, (int[]){t, b1}, "conv1.out", &h) != PK_OK ||
      pk_graph_add_op(g, "act1", PK_OP_RELU, &(pk_op_attrs){0}, 1, (int[]){h}, "h1", &h) != PK_OK ||
      pk_graph_add_op(g, "conv2", PK_OP_CONV2D, &(pk_op_attrs){0}, 2, (int[]){h, w2}, "conv2.y", &t) != PK_OK ||
      pk_graph_add_op(g, "pool", PK_OP_MEAN, &mean, 1, (int[]){t}, "logits", &y) != PK_OK)
    return NULL;
  g->output = y;
  return pk_graph_validate(g) == PK_OK ? g : NULL;
}

/* ---------------------------------------------------------------- the reference */

/* Every tensor's storage as doubles; a view or in-place output reads and writes its base. */
typedef struct ref_model {
  pk_ctx *ctx;
  const pk_graph *g;
  double **store; /* per tensor without a base */
} ref_model;

static int64_t numel(const pk_gtensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Position in the root's storage of row-major element f of tensor t. */
static int64_t position(const pk_gtensor *t, int64_t f) {
  if (t->base < 0) return f;
  int64_t pos = t->view_offset;
  for (int d = t->ndim - 1; d >= 0; d--) {
    pos += f % t->shape[d] * t->view_strides[d];
    f /= t->shape[d];
  }
  return pos;
}

static double *root_store(ref_model *R, int id) {
  const pk_gtensor *t = R->g->tensors[id];
  return R->store[t->base >= 0 ? t->base : id];
}

static void ref_init(ref_model *R, pk_ctx *ctx, const pk_graph *g) {
  R->ctx = ctx;
  R->g = g;
  R->store = pk_alloc(ctx, sizeof(double *) * (size_t)g->ntensors);
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (t->base >= 0) continue;
    int64_t n = numel(t);
    R->store[i] = pk_alloc(ctx, sizeof(double) * (size_t)n);
    for (int64_t j = 0; t->init && j < n; j++)
      R->store[i][j] = t->dtype == PKRT_DTYPE_F32 ? ((const float *)t->init)[j] : ((const double *)t->init)[j];
  }
}

static bool ref_run_node(ref_model *R, const pk_gnode *n) {
  pk_te_ref *ref = pk_te_ref_new(R->ctx, n->prog);
  int kin = 0, kout = 0;
  int *gid = pk_alloc(R->ctx, sizeof(int) * (size_t)n->prog->ntensors);
  for (int i = 0; i < n->prog->ntensors; i++) {
    bool ph = n->prog->tensors[i]->kind == PK_TE_PLACEHOLDER;
    gid[i] = ph ? n->inputs[kin++] : n->outputs[kout++];
    if (!ph) continue;
    const pk_gtensor *t = R->g->tensors[gid[i]];
    double *s = root_store(R, gid[i]);
    for (int64_t f = 0; f < numel(t); f++) {
      if (ref->tensors[i].ival) { /* integer labels */
        ref->tensors[i].ival[f] = (int64_t)s[position(t, f)];
        continue;
      }
      ref->tensors[i].val[f] = s[position(t, f)];
      ref->tensors[i].mag[f] = fabs(ref->tensors[i].val[f]);
    }
  }
  if (pk_te_interp_run(R->ctx, n->prog, ref) != PK_OK) return false;
  for (int i = 0; i < n->prog->ntensors; i++) {
    if (n->prog->tensors[i]->kind == PK_TE_PLACEHOLDER) continue;
    const pk_gtensor *t = R->g->tensors[gid[i]];
    double *s = root_store(R, gid[i]);
    for (int64_t f = 0; f < numel(t); f++) s[position(t, f)] = ref->tensors[i].val[f];
  }
  return true;
}

/* One batch: inputs, integer labels (-1 for padding rows: ignored; or, with row weights,
 * one-hot targets and row weights 1/valid, 0 for padding rows), the hyper tensor of step
 * t; then the nodes of the plan. */
static bool ref_step(ref_model *R, const double *x, const int32_t *labels, int64_t valid, int64_t t,
                     const pk_train_spec *sp, pk_phase upto) {
  const pk_graph *g = R->g;
  for (int i = 0; i < g->ntensors; i++)
    if (g->tensors[i]->role == PK_ROLE_INPUT) memcpy(R->store[i], x, sizeof(double) * (size_t)numel(g->tensors[i]));
  if (g->target >= 0 && g->row_weight < 0) {
    for (int64_t r = 0; r < g->batch; r++) R->store[g->target][r] = r < valid ? labels[r] : -1;
  } else if (g->target >= 0) {
    const pk_gtensor *tt = g->tensors[g->target];
    int64_t classes = tt->shape[1];
    memset(R->store[g->target], 0, sizeof(double) * (size_t)numel(tt));
    for (int64_t r = 0; r < valid; r++) R->store[g->target][r * classes + labels[r]] = 1;
    for (int64_t r = 0; r < g->batch; r++) R->store[g->row_weight][r] = r < valid ? 1.0 / (double)valid : 0;
  }
  if (g->hyper >= 0) {
    double b1 = sp->beta1 > 0 ? sp->beta1 : 0.9, b2 = sp->beta2 > 0 ? sp->beta2 : 0.999;
    R->store[g->hyper][0] = sp->lr;
    R->store[g->hyper][1] = 1 - pow(b1, (double)t);
    R->store[g->hyper][2] = 1 - pow(b2, (double)t);
    R->store[g->hyper][3] = 0;
  }
  for (int k = 0; k < g->nnodes; k++)
    if ((g->nodes[k]->phase <= upto || g->nodes[k]->phase == PK_PHASE_LOAD) &&
        !ref_run_node(R, g->nodes[k]))
      return false;
  return true;
}

/* ---------------------------------------------------------------- comparing */

static double read_elem(const void *data, int dtype, int64_t at) {
  return dtype == PKRT_DTYPE_F32 ? ((const float *)data)[at] : ((const double *)data)[at];
}

/* max |runtime - reference| / max(1, |reference|) over tensor id's elements. */
static double tensor_error(ref_model *R, pkrt_model *m, int id, const char **why) {
  const pk_gtensor *t = R->g->tensors[id];
  pkrt_tensor_info info;
  if (pkrt_model_tensor(m, t->name, &info) != 0) {
    *why = "not in the artifact";
    return INFINITY;
  }
  double worst = 0, *s = root_store(R, id);
  for (int64_t f = 0; f < numel(t); f++) {
    int64_t at = info.offset, g = f;
    for (int d = t->ndim - 1; d >= 0; d--) {
      at += g % t->shape[d] * info.strides[d];
      g /= t->shape[d];
    }
    double want = s[position(t, f)], got = read_elem(info.data, info.dtype, at);
    double e = fabs(got - want) / fmax(1, fabs(want));
    if (!(e <= worst)) worst = e; /* NaN wins */
  }
  return worst;
}

typedef struct model_case {
  const char *label;
  pk_graph *(*build)(pk_ctx *ctx, pkrt_dtype dt, int64_t batch);
  pkrt_dtype dtype;
  pk_optim_kind optim;
  const char *spec;       /* sparse spec JSON, NULL: full update */
  bool expect_view;       /* a strided view must be in the artifact */
  const char *db;         /* tuning database path or NULL */
  int expect_tuned;
  const char *passes;     /* --passes, NULL: all */
} model_case;

enum { BATCH = 4, CLASSES = 3, STEPS = 3 };

static const char *write_file(const char *name, const char *text) {
  static char path[512];
  snprintf(path, sizeof path, "%s/%s", pk_test_tmpdir(), name);
  FILE *f = fopen(path, "w");
  if (!f) return NULL;
  fputs(text, f);
  fclose(f);
  return path;
}

static pk_train_spec train_spec(pk_optim_kind optim) {
  pk_train_spec sp = {.loss = PK_LOSS_SOFTMAX_XENT, .optim = optim};
  if (optim == PK_OPTIM_SGD) sp.lr = 0.1, sp.momentum = 0.9, sp.weight_decay = 1e-3;
  else sp.lr = 0.01, sp.weight_decay = 0.01;
  return sp;
}

/* Fills the runtime's input from x (doubles) in the model's dtype. */
static void feed(pkrt_model *m, const double *x, int64_t n, const int32_t *labels, int64_t valid) {
  void *in = pkrt_model_input(m, NULL);
  for (int64_t i = 0; i < n; i++) {
    if (pkrt_model_dtype(m) == PKRT_DTYPE_F32) ((float *)in)[i] = (float)x[i];
    else ((double *)in)[i] = x[i];
  }
  pkrt_model_set_labels(m, labels, valid);
}

static void run_model_case(const model_case *c) {
  pk_ctx *ctx = pk_ctx_new();
  double tol = c->dtype == PKRT_DTYPE_F64 ? 1e-9 : 2e-4;
  rng_state = 42;
  pk_graph *fwd = c->build(ctx, c->dtype, BATCH);
  if (!fwd) {
    check(false, c->label, "building the graph: %s", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    return;
  }
  pk_train_spec sp = train_spec(c->optim);
  pk_model_info info = {.name = c->label, .has_training = true, .train = sp, .classes = CLASSES};
  pk_compile_options o = pk_compile_defaults();
  char out[512];
  snprintf(out, sizeof out, "%s/%s.pock", pk_test_tmpdir(), c->label);
  o.graph = fwd;
  o.info = &info;
  o.out = out;
  o.db = c->db;
  if (c->passes) o.passes = c->passes;
  o.log = fopen("/dev/null", "w");
  if (c->spec) o.sparse = pk_strdup(ctx, write_file("spec.json", c->spec));
  pk_compile_result res;
  pk_status s = pk_compile(ctx, &o, &res);
  fclose(o.log);
  if (s != PK_OK) {
    check(false, c->label, "compile: %s", pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    return;
  }
  const pk_graph *g = res.graph;
  if (getenv("PK_TEST_VERBOSE")) {
    fputs(pk_graph_print(ctx, g), stdout);
    fputs(pk_memplan_print(ctx, g, res.memplan), stdout);
    for (int i = 0; i < g->ntensors; i++)
      printf("  %%%d %s region %s offset %lld\n", i, g->tensors[i]->name,
             pk_region_name(res.memplan->region[i]), (long long)res.memplan->offset[i]);
  }
  pkrt_model *m;
  char err[512];
  if (pkrt_model_open(out, NULL, &m, err, sizeof err) != 0) {
    check(false, c->label, "open: %s", err);
    pk_ctx_free(ctx);
    return;
  }
  char label[128];
  snprintf(label, sizeof label, "%s_arena_is_memplan", c->label);
  check(pkrt_model_arena_bytes(m) == res.memplan->region_bytes[PK_REGION_ARENA], label,
        "runtime %lld, plan %lld", (long long)pkrt_model_arena_bytes(m),
        (long long)res.memplan->region_bytes[PK_REGION_ARENA]);
  if (c->db) {
    snprintf(label, sizeof label, "%s_tuned_kernels", c->label);
    check(res.ntuned == c->expect_tuned, label, "%d tuned, expected %d", res.ntuned, c->expect_tuned);
  }

  /* A view with the weight's strides: in the graph, and in the artifact as such. */
  if (c->expect_view) {
    bool found = false, same = true;
    for (int i = 0; i < g->ntensors; i++) {
      const pk_gtensor *t = g->tensors[i];
      if (t->base < 0 || t->role != PK_ROLE_PARAM || numel(t) == numel(g->tensors[t->base])) continue;
      pkrt_tensor_info ti;
      found = true;
      same = same && pkrt_model_tensor(m, t->name, &ti) == 0;
      for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == 1 || ti.strides[d] == t->view_strides[d];
    }
    snprintf(label, sizeof label, "%s_view_strides", c->label);
    check(found && same, label, found ? "the artifact's strides differ" : "no partial view in the graph");
  }

  ref_model R;
  ref_init(&R, ctx, g);
  int64_t in_n = numel(g->tensors[0]);
  double worst_loss = 0;
  for (int64_t step = 1; step <= STEPS; step++) {
    double *x = pk_alloc(ctx, sizeof(double) * (size_t)in_n);
    int32_t labels[BATCH];
    int64_t valid = step == STEPS ? BATCH - 1 : BATCH; /* the last batch is partial */
    for (int64_t i = 0; i < in_n; i++) x[i] = c->dtype == PKRT_DTYPE_F32 ? (double)(float)urand() : urand();
    for (int r = 0; r < BATCH; r++) labels[r] = (int32_t)((r * 7 + step) % CLASSES);
    feed(m, x, in_n, labels, valid);
    double loss = NAN;
    if (pkrt_model_train_step(m, &loss) != 0 || !ref_step(&R, x, labels, valid, step, &sp, PK_PHASE_UPDATE)) {
      check(false, c->label, "step %lld: %s %s", (long long)step, pkrt_model_error(m), pk_ctx_error(ctx));
      goto done;
    }
    double want = R.store[g->loss][0], e = fabs(loss - want) / fmax(1, fabs(want));
    if (getenv("PK_TEST_VERBOSE")) printf("  step %lld loss %.12g reference %.12g\n", (long long)step, loss, want);
    if (!(e <= worst_loss)) worst_loss = e;
  }
  snprintf(label, sizeof label, "%s_train_loss", c->label);
  check(worst_loss <= tol, label, "loss error %.3g > %.3g", worst_loss, tol);

  /* Every persistent tensor after the steps: parameters and optimizer state. */
  double worst = 0;
  const char *worst_name = "", *why = "";
  int nchecked = 0;
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (getenv("PK_TEST_VERBOSE") && t->base < 0 && t->role != PK_ROLE_PARAM && t->role != PK_ROLE_OPT_STATE)
      printf("  (arena) %-24s error %.3g\n", t->name, tensor_error(&R, m, i, &why));
    if (t->base >= 0 || (t->role != PK_ROLE_PARAM && t->role != PK_ROLE_OPT_STATE)) continue;
    double e = tensor_error(&R, m, i, &why);
    if (getenv("PK_TEST_VERBOSE")) printf("  %-24s error %.3g\n", t->name, e);
    nchecked++;
    if (!(e <= worst)) worst = e, worst_name = t->name;
  }
  snprintf(label, sizeof label, "%s_weights_after_%d_steps", c->label, STEPS);
  check(worst <= tol && nchecked > 0, label, "%s error %.3g > %.3g %s", worst_name, worst, tol, why);

  /* Forward output and eval loss on a fresh batch. */
  {
    double *x = pk_alloc(ctx, sizeof(double) * (size_t)in_n);
    int32_t labels[BATCH] = {2, 0, 1, 1};
    for (int64_t i = 0; i < in_n; i++) x[i] = c->dtype == PKRT_DTYPE_F32 ? (double)(float)urand() : urand();
    feed(m, x, in_n, labels, BATCH);
    double loss = NAN;
    if (pkrt_model_eval_step(m, &loss) != 0 || !ref_step(&R, x, labels, BATCH, STEPS + 1, &sp, PK_PHASE_LOSS)) {
      check(false, c->label, "eval: %s %s", pkrt_model_error(m), pk_ctx_error(ctx));
      goto done;
    }
    const void *out_data = pkrt_model_output(m);
    double e = 0;
    for (int64_t i = 0; i < numel(g->tensors[g->output]); i++) {
      double want = R.store[g->output][i];
      double d = fabs(read_elem(out_data, c->dtype, i) - want) / fmax(1, fabs(want));
      if (!(d <= e)) e = d;
    }
    snprintf(label, sizeof label, "%s_forward_output", c->label);
    check(e <= tol, label, "output error %.3g", e);
    double want = R.store[g->loss][0];
    snprintf(label, sizeof label, "%s_eval_loss", c->label);
    check(fabs(loss - want) <= tol * fmax(1, fabs(want)), label, "loss %.10g, reference %.10g", loss, want);
  }
done:
  pkrt_model_close(m);
  pk_ctx_free(ctx);
}

/* ---------------------------------------------------------------- a tuning database */

static pk_status add_record(pk_ctx *ctx, pk_tunedb *db, const pk_task *task, const pk_target_fp *fp,
                            int64_t run, pk_candidate cand, double median_ns) {
  pk_record r = {.workload = task->workload, .target_key = fp->key, .cand = cand, .run_id = run,
                 .trial = 1, .codegen_version = PK_CGEN_C_VERSION, .pock_version = POCK_VERSION,
                 .compiler = "test", .flags = "-O2"};
  char hex[2 * PKRT_SHA256_BYTES + 1];
  const char *what = cand.kind == PK_CAND_EXTERN ? "extern:sgemm" : cand.trace;
  pkrt_sha256_hex(what, strlen(what), hex);
  r.cand.trace_hash = pk_strdup(ctx, hex);
  r.meas.status = PK_MEAS_OK;
  r.meas.timing = (pk_timing){median_ns, median_ns, 0, 5};
  r.meas.gflops = 1e3 / median_ns;
  pk_record_make_id(ctx, &r);
  return pk_db_record_commit(db, &r, NULL);
}

/* fc1's forward matmul gets a split schedule (a tail: 5 = 2 + 2 + 1); fc2's an extern
 * record that is fastest and a schedule record that the compiler must use instead. */
static const char *make_db(void) {
  static char path[512];
  snprintf(path, sizeof path, "%s/tune.db", pk_test_tmpdir());
  pk_ctx *ctx = pk_ctx_new();
  rng_state = 42;
  pk_graph *g = mlp(ctx, PKRT_DTYPE_F64, BATCH);
  pk_target_fp fp;
  pk_tunedb *db = NULL;
  int64_t run;
  pk_status s = g ? pk_target_fp_detect(ctx, "c", &fp) : PK_ERR_CHECK;
  if (s == PK_OK) s = pk_db_open(ctx, path, PK_DB_OPEN_CREATE, &db);
  if (s == PK_OK) s = pk_db_target_add(db, &fp);
  if (s == PK_OK) s = pk_db_run_begin(db, "test", "{}", &run);
  const char *axis[2] = {"i1", "i0"};
  for (int k = 0; k < 2 && s == PK_OK; k++) {
    const pk_gnode *n = g->nodes[k == 0 ? 0 : 3]; /* fc1, fc2 */
    pk_task task;
    pk_schedule *sched = NULL;
    s = pk_task_from_program(ctx, n->prog, "c", &task);
    if (s == PK_OK) s = pk_db_workload_add(db, &task);
    if (s == PK_OK) {
      sched = pk_sched_new(ctx, n->prog);
      s = pk_sched_split(sched, "t2", axis[k], 2);
    }
    pk_candidate sc = {.kind = PK_CAND_SCHEDULE, .trace = pk_sched_to_json(sched), .knobs = "{}"};
    if (s == PK_OK) s = add_record(ctx, db, &task, &fp, run, sc, 100);
    if (s == PK_OK && k == 1) {
      pk_candidate ex = {.kind = PK_CAND_EXTERN, .knobs = "{}", .extern_lib = PK_SGEMM_LIB,
                         .extern_sym = PK_SGEMM_SYM, .extern_sig = PK_SGEMM_SIGNATURE};
      s = add_record(ctx, db, &task, &fp, run, ex, 1);
    }
  }
  if (s == PK_OK) s = pk_db_run_finish(db, run, PK_DB_RUN_FINISHED);
  check(s == PK_OK, "tuning_db_fixture", "%s", pk_ctx_error(ctx));
  if (db) pk_db_close(db);
  pk_ctx_free(ctx);
  return s == PK_OK ? path : NULL;
}

/* ---------------------------------------------------------------- other checks */

static void inference_case(void) {
  pk_ctx *ctx = pk_ctx_new();
  rng_state = 7;
  pk_graph *fwd = mlp(ctx, PKRT_DTYPE_F64, BATCH);
  pk_model_info info = {.train = train_spec(PK_OPTIM_SGD), .classes = CLASSES};
  pk_compile_options o = pk_compile_defaults();
  char out[512];
  snprintf(out, sizeof out, "%s/infer.pock", pk_test_tmpdir());
  o.graph = fwd, o.info = &info, o.out = out, o.inference = true, o.log = fopen("/dev/null", "w");
  pk_compile_result res;
  pk_status s = fwd ? pk_compile(ctx, &o, &res) : PK_ERR_CHECK;
  fclose(o.log);
  pkrt_model *m = NULL;
  char err[512] = "";
  bool ok = s == PK_OK && pkrt_model_open(out, NULL, &m, err, sizeof err) == 0;
  if (ok) {
    ref_model R;
    ref_init(&R, ctx, res.graph);
    double x[BATCH * 6];
    int32_t labels[BATCH] = {0};
    for (int i = 0; i < BATCH * 6; i++) x[i] = urand();
    memcpy(pkrt_model_input(m, NULL), x, sizeof x);
    ok = !pkrt_model_can_train(m) && pkrt_model_infer(m) == 0 &&
         ref_step(&R, x, labels, BATCH, 1, &info.train, PK_PHASE_FORWARD);
    const double *y = pkrt_model_output(m);
    for (int i = 0; ok && i < BATCH * CLASSES; i++) ok = fabs(y[i] - R.store[res.graph->output][i]) <= 1e-9;
  }
  check(ok, "inference_artifact", "%s %s", pk_ctx_error(ctx), err);
  if (m) pkrt_model_close(m);
  pk_ctx_free(ctx);
}

/* Tasks for `pock tune MODEL`: distinct programs whose calls add up to the graph's nodes. */
static void model_tasks_case(void) {
  pk_ctx *ctx = pk_ctx_new();
  rng_state = 9;
  pk_model_info info = {.train = train_spec(PK_OPTIM_SGD), .classes = CLASSES};
  pk_compile_options o = pk_compile_defaults();
  o.graph = mlp(ctx, PKRT_DTYPE_F32, BATCH), o.info = &info;
  pk_model_tasks mt;
  pk_status s = o.graph ? pk_model_tasks_of(ctx, &o, &mt) : PK_ERR_CHECK;
  bool ok = s == PK_OK && mt.n > 0;
  double calls = 0;
  for (int i = 0; ok && i < mt.n; i++) {
    calls += mt.calls[i];
    for (int j = 0; j < i; j++) ok = ok && strcmp(pk_te_print(ctx, mt.progs[i]), pk_te_print(ctx, mt.progs[j]));
  }
  /* the training graph of the same forward graph, built again and with its copies
   * eliminated and its chains and epilogues fused as the tasks' graph was
   * (docs/passes.md), has that many nodes */
  pk_graph *t = NULL;
  const char *note;
  if (ok && pk_train_build(o.graph, &info.train, &t) == PK_OK &&
      pk_pass_copy_elim(t, &note) == PK_OK && pk_pass_fuse(t, &note) == PK_OK)
    ok = calls == t->nnodes && mt.n <= t->nnodes;
  check(ok && t, "model_tasks", "%s (n %d, calls %g)", pk_ctx_error(ctx), ok ? mt.n : -1, calls);
  pk_ctx_free(ctx);
}

static void option_errors(void) {
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = "/nonexistent/model.json";
  o.out = "/tmp/never.pock";
  pk_status s = pk_compile(ctx, &o, NULL);
  check(s != PK_OK && strstr(pk_ctx_error(ctx), "/nonexistent/model.json"), "missing_model_named",
        "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  o.dump_after = "lowering";
  s = pk_compile(ctx, &o, NULL);
  check(s == PK_ERR_USAGE && strstr(pk_ctx_error(ctx), "lowering"), "unknown_stage_is_usage", "%s",
        pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  o = pk_compile_defaults();
  o.model = "m.json";
  s = pk_compile(ctx, &o, NULL);
  check(s == PK_ERR_USAGE, "no_output_is_usage", "%s", pk_ctx_error(ctx));
  pk_ctx_free(ctx);
}

int main(void) {
  if (pk_test_tmpdir_make("pock-test-driver-") != 0) return 1;
  const char *partial_fc2 =
      "{\"version\": 1, \"train\": [{\"params\": \"fc2.weight\", \"channels\": 0.4}, {\"biases\": true}]}";
  const char *partial_conv2 =
      "{\"version\": 1, \"train\": [{\"params\": \"conv2.weight\", \"channels\": 0.5}, {\"biases\": true}]}";
  model_case cases[] = {
      {"mlp_full_sgd_f64", mlp, PKRT_DTYPE_F64, PK_OPTIM_SGD, NULL, false, NULL, 0, NULL},
      {"mlp_partial_sgd_f64", mlp, PKRT_DTYPE_F64, PK_OPTIM_SGD, partial_fc2, true, NULL, 0, NULL},
      {"mlp_full_adamw_f32", mlp, PKRT_DTYPE_F32, PK_OPTIM_ADAMW, NULL, false, NULL, 0, NULL},
      {"cnn_partial_sgd_f64", cnn, PKRT_DTYPE_F64, PK_OPTIM_SGD, partial_conv2, true, NULL, 0, NULL},
      {"cnn_partial_adam_f32", cnn, PKRT_DTYPE_F32, PK_OPTIM_ADAM, partial_conv2, true, NULL, 0, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_model_case(&cases[i]);
  const char *db = make_db();
  if (db) {
    /* the records are of the plain matmuls: fusion would make them epilogue programs */
    model_case tuned = {"mlp_tuned_sgd_f64", mlp, PKRT_DTYPE_F64, PK_OPTIM_SGD, NULL, false, db, 2,
                        "copy_elim,reorder"};
    run_model_case(&tuned);
  }
  inference_case();
  model_tasks_case();
  option_errors();
  pk_test_tmpdir_remove();
  printf("%s\n", failures ? "FAILED" : "OK");
  return failures != 0;
}
