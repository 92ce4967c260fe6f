/* cmd_inspect.c — `pock inspect MODEL`: what a model (ONNX or graph JSON) is before any
 * compile: its inputs, outputs, parameters with their counts (and what a sparse spec
 * trains), the op histogram (ONNX op types supported or not; Pock ops for JSON), and the
 * memory plan of the full update beside the spec's (graph/memplan, as compile
 * --print-memory prints it). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pk_frontend.h"
#include "pk_json_check.h"
#include "pk_passes.h"

static const char inspect_help[] =
    "usage: pock inspect MODEL [options]\n"
    "\n"
    "Prints what a model (MODEL.onnx or a graph JSON) holds: inputs and outputs with shapes\n"
    "and dtypes, parameters and buffers with shapes and counts (with --sparse: which train),\n"
    "the op histogram (an ONNX model's op types, each supported or not, even when the\n"
    "model does not import), and the planned training memory of the full update beside\n"
    "the spec's (the kernels' workspace is not counted: they are not scheduled here).\n"
    "\n"
    "options:\n"
    "  --batch B             batch size (default 32)\n"
    "  --sparse SPEC.json    a sparse-update spec (docs/sparse-update.md) to compare\n"
    "  --input-shape NAME=D0,D1,...\n"
    "                        an ONNX input's whole shape, binding its symbolic dims (D0 is\n"
    "                        the batch, as --batch); repeat for several inputs\n"
    "  --json                one JSON object instead of the text (docs/onnx-cli.md); a\n"
    "                        model that does not load gets its ONNX ops and \"error\"\n"
    "\n"
    "Exit status: 0 success, 1 error (bad model or spec, unsupported ops), 2 usage.\n";

typedef struct inspect_options {
  const char *model, *sparse;
  int64_t batch;
  bool json;
  pk_input_shape shapes[PK_CLI_MAX_SHAPES];
  int nshapes;
} inspect_options;

static int parse_options(int argc, char **argv, inspect_options *o) {
  memset(o, 0, sizeof *o);
  o->batch = 32;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(inspect_help, stdout);
      return -1;
    }
    if (!strcmp(a, "--json")) {
      o->json = true;
      continue;
    }
    if (a[0] != '-' || !a[1]) {
      if (o->model)
        return pk_cli_usage("inspect: one MODEL expected, got '%s' and '%s'", o->model, a);
      o->model = a;
      continue;
    }
    if (i + 1 >= argc) return pk_cli_usage("inspect: %s needs a value", a);
    char *v = argv[++i];
    if (!strcmp(a, "--sparse")) {
      o->sparse = v;
    } else if (!strcmp(a, "--input-shape")) {
      if (o->nshapes == PK_CLI_MAX_SHAPES)
        return pk_cli_usage("inspect: at most %d --input-shape options", PK_CLI_MAX_SHAPES);
      int rc = pk_cli_input_shape("inspect", v, &o->shapes[o->nshapes]);
      if (rc != PK_EXIT_OK) return rc;
      o->nshapes++;
    } else if (!strcmp(a, "--batch")) {
      if (!pkrt_cli_parse_i64(v, &o->batch) || o->batch < 1 || o->batch > 1000000)
        return pk_cli_usage("inspect: --batch needs an integer in 1..1000000");
    } else {
      return pk_cli_usage("inspect: unknown option '%s'", a);
    }
  }
  if (!o->model) return pk_cli_usage("inspect: expected MODEL (an ONNX file or a graph JSON)");
  return PK_EXIT_OK;
}

static bool is_onnx(const char *path) {
  size_t n = strlen(path);
  return n >= 5 && !strcmp(path + n - 5, ".onnx");
}

static const char *shape_str(pk_ctx *ctx, int ndim, const int64_t *shape) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_append(&b, "(");
  for (int d = 0; d < ndim; d++) pk_strbuf_printf(&b, "%s%lld", d ? ", " : "", (long long)shape[d]);
  pk_strbuf_append(&b, ndim == 1 ? ",)" : ")");
  return pk_strbuf_finish(ctx, &b);
}

/* A name from the model as the text prints it: as it is when every byte is printable,
 * else quoted with control bytes escaped (a newline in a name must not forge a line). */
static const char *plain(pk_ctx *ctx, const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; *p; p++)
    if (*p < 0x20 || *p == 0x7f) return pk_json_quote(ctx, s);
  return s;
}

static int64_t numel(const pk_gtensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Values a param trains: all, none, or its trained input channels' share. */
static int64_t trained_values(const pk_gtensor *t) {
  if (!t->trainable) return 0;
  if (t->ndim >= 2 && t->train_channels > 0 && t->train_channels < t->shape[1])
    return numel(t) / t->shape[1] * t->train_channels;
  return numel(t);
}

static void print_onnx_ops(pk_ctx *ctx, const pk_onnx_summary *sum) {
  int unsupported = 0;
  for (int i = 0; i < sum->nops; i++) unsupported += !sum->ops[i].supported;
  printf("ONNX ops: %d nodes, %d types, %d unsupported\n", sum->nnodes, sum->nops, unsupported);
  for (int i = 0; i < sum->nops; i++) {
    const pk_onnx_op_count *c = &sum->ops[i];
    printf("  %-28s %6d  %s", plain(ctx, c->type), c->count,
           c->supported ? "supported" : "UNSUPPORTED");
    if (!c->supported && c->first_node[0])
      printf(" (first: node %s)", pk_json_quote(ctx, c->first_node));
    putchar('\n');
  }
}

static void print_pock_ops(const pk_graph *g) {
  int count[PK_OP_COUNT_] = {0}, kinds = 0;
  for (int k = 0; k < g->nnodes; k++)
    if (g->nodes[k]->op >= 0 && g->nodes[k]->op < PK_OP_COUNT_)
      kinds += count[g->nodes[k]->op]++ == 0;
  printf("Pock ops: %d nodes, %d kinds\n", g->nnodes, kinds);
  /* in order of first appearance, as the model reads */
  for (int k = 0; k < g->nnodes; k++) {
    pk_op_kind op = g->nodes[k]->op;
    if (op < 0 || op >= PK_OP_COUNT_ || count[op] == 0) continue;
    printf("  %-28s %6d\n", pk_op_name(op), count[op]);
    count[op] = 0;
  }
}

/* The name column's width: the longest name inspect lists (at least 28, at most 72), so
 * real models' names (encoder.layer.5.attention.output.LayerNorm.weight) keep the
 * columns aligned. */
static int name_width(pk_ctx *ctx, const pk_graph *g) {
  int w = 28;
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    bool listed = t->base < 0 && (t->role == PK_ROLE_INPUT || t->role == PK_ROLE_PARAM ||
                                  t->role == PK_ROLE_BUFFER || t->role == PK_ROLE_CONSTANT ||
                                  i == g->output);
    int n = listed ? (int)strlen(plain(ctx, t->name)) : 0;
    if (n > w) w = n < 72 ? n : 72;
  }
  return w;
}

static void print_io(pk_ctx *ctx, const pk_graph *g) {
  int w = name_width(ctx, g);
  puts("inputs:");
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (t->role != PK_ROLE_INPUT) continue;
    printf("  %-*s %-20s %s%s\n", w, plain(ctx, t->name), shape_str(ctx, t->ndim, t->shape),
           pkrt_dtype_name(t->dtype), t->no_batch ? "  (no batch dim)" : "");
  }
  const pk_gtensor *y = g->tensors[g->output];
  printf("output:\n  %-*s %-20s %s\n", w, plain(ctx, y->name),
         shape_str(ctx, y->ndim, y->shape), pkrt_dtype_name(y->dtype));
}

/* Params (with what the spec trains) and buffers; the spec is applied already. */
static void print_weights(pk_ctx *ctx, const pk_graph *g, const char *spec) {
  int w = name_width(ctx, g);
  int64_t np = 0, vp = 0, vt = 0, nb = 0, vb = 0;
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (t->base >= 0) continue;
    if (t->role == PK_ROLE_PARAM) np++, vp += numel(t), vt += trained_values(t);
    if (t->role == PK_ROLE_BUFFER || t->role == PK_ROLE_CONSTANT) nb++, vb += numel(t);
  }
  printf("parameters: %lld tensors, %lld values; trainable %s: %lld values (%.1f%%)\n",
         (long long)np, (long long)vp, spec ? "under the spec" : "(full update)", (long long)vt,
         vp ? 100.0 * (double)vt / (double)vp : 0.0);
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (t->role != PK_ROLE_PARAM || t->base >= 0) continue;
    int64_t tv = trained_values(t);
    const char *how = !t->trainable     ? "frozen"
                      : tv < numel(t) ? pk_sprintf(ctx, "trains channels 0..%lld of %lld",
                                                   (long long)t->train_channels - 1,
                                                   (long long)t->shape[1])
                                      : "trains";
    printf("  %-*s %-20s %10lld  %s\n", w, plain(ctx, t->name),
           shape_str(ctx, t->ndim, t->shape), (long long)numel(t), how);
  }
  if (!nb) return;
  printf("buffers and constants: %lld tensors, %lld values\n", (long long)nb, (long long)vb);
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if ((t->role != PK_ROLE_BUFFER && t->role != PK_ROLE_CONSTANT) || t->base >= 0) continue;
    printf("  %-*s %-20s %10lld  %s\n", w, plain(ctx, t->name),
           shape_str(ctx, t->ndim, t->shape), (long long)numel(t), pk_role_name(t->role));
  }
}

/* Everything inspect reports, gathered before anything is printed (so --json and text
 * show the same facts). */
typedef struct report {
  const inspect_options *o;
  bool onnx;
  pk_onnx_summary sum;      /* ONNX only */
  pk_graph *g;              /* the forward graph, params marked by the spec (or all) */
  pk_model_info info;
  /* memory plans: [0] full update, [1] the spec's (with --sparse) */
  pk_graph *t[2];
  pk_memplan *mp[2];
} report;

/* The training graph of the params as marked now, after the graph passes compile runs by
 * default (docs/passes.md), and its memory plan: the figures compile prints. */
static pk_status plan(report *r, int k) {
  pk_status s = pk_train_build(r->g, &r->info.train, &r->t[k]);
  for (int p = 0; s == PK_OK && p < PK_PASS_COUNT_; p++) {
    const char *note;
    s = pk_passes_table()[p].run(r->t[k], &note);
  }
  return s == PK_OK ? pk_memplan_build(r->t[k], NULL, &r->mp[k]) : s;
}

static pk_status gather(pk_ctx *ctx, report *r) {
  const inspect_options *o = r->o;
  pk_frontend_opts fo = {.batch = o->batch, .shapes = o->shapes, .nshapes = o->nshapes};
  pk_status s = pk_frontend_load_opts(ctx, o->model, &fo, &r->g, &r->info);
  if (s != PK_OK) return s;
  pk_sparse_spec *sp = NULL;
  if (o->sparse) {
    char *text;
    size_t len;
    if ((s = pk_read_file(ctx, o->sparse, &text, &len)) != PK_OK ||
        (s = pk_sparse_parse(ctx, text, len, o->sparse, &sp)) != PK_OK)
      return s;
  }
  /* full update first, then the spec's: the marks are the spec's at the end */
  if ((s = pk_sparse_apply(r->g, NULL)) != PK_OK || (s = plan(r, 0)) != PK_OK) return s;
  if (sp && ((s = pk_sparse_apply(r->g, sp)) != PK_OK || (s = plan(r, 1)) != PK_OK)) return s;
  return PK_OK;
}

static const char *loss_name(pk_loss_kind k) {
  return k == PK_LOSS_MSE ? "mse" : "softmax_cross_entropy";
}
static const char *optim_name(pk_optim_kind k) {
  return k == PK_OPTIM_ADAM ? "adam" : k == PK_OPTIM_ADAMW ? "adamw" : "sgd";
}

static void print_memory(pk_ctx *ctx, const report *r, int k) {
  pk_train_stats st;
  pk_train_stats_of(r->t[k], &st);
  const char *title = k ? pk_sprintf(ctx, "sparse update (%s)", r->o->sparse) : "full update";
  printf("\nmemory, %s (%d forward, %d backward, %d update nodes):\n", title, st.forward_nodes,
         st.backward_nodes, st.update_nodes);
  fputs(pk_memplan_print(ctx, r->t[k], r->mp[k]), stdout);
}

static void print_text(pk_ctx *ctx, const report *r) {
  const pk_model_info *in = &r->info;
  if (!r->onnx)
    printf("model: %s (graph JSON%s%s)\n", r->o->model, in->name ? ", " : "",
           in->name ? plain(ctx, in->name) : "");
  printf("batch: %lld\n", (long long)r->g->batch);
  printf("training: %s", loss_name(in->train.loss));
  if (in->train.loss == PK_LOSS_SOFTMAX_XENT) printf(" over %lld classes", (long long)in->classes);
  printf(", %s lr %g (%s)\n", optim_name(in->train.optim), in->train.lr,
         in->has_training ? "the model's training object" : "defaults: no training object");
  print_io(ctx, r->g);
  print_weights(ctx, r->g, r->o->sparse);
  if (!r->onnx) print_pock_ops(r->g);
  for (int k = 0; k < 2; k++)
    if (r->t[k]) print_memory(ctx, r, k);
  if (!r->t[1]) return;
  /* the two plans side by side: what the spec saves */
  int64_t total[2] = {0, 0}, bp[2];
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < PK_REGION_COUNT_; i++) total[k] += r->mp[k]->region_bytes[i];
    pk_train_stats st;
    pk_train_stats_of(r->t[k], &st);
    bp[k] = st.saved_activation_bytes + st.gradient_bytes + st.opt_state_bytes;
  }
  printf("\nsparse vs full: planned %lld vs %lld bytes (%.1f%%), bp memory %lld vs %lld bytes "
         "(%.1f%%)\n", (long long)total[1], (long long)total[0],
         total[0] ? 100.0 * (double)total[1] / (double)total[0] : 0.0, (long long)bp[1],
         (long long)bp[0], bp[0] ? 100.0 * (double)bp[1] / (double)bp[0] : 0.0);
}

/* ---- --json: the same facts for tools (docs/onnx-cli.md lists the keys) ---- */
static cJSON *j_shape(int ndim, const int64_t *shape) {
  cJSON *a = cJSON_CreateArray();
  for (int d = 0; d < ndim; d++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)shape[d]));
  return a;
}

static cJSON *j_tensor(const pk_gtensor *t) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "name", t->name);
  cJSON_AddItemToObject(o, "shape", j_shape(t->ndim, t->shape));
  cJSON_AddStringToObject(o, "dtype", pkrt_dtype_name(t->dtype));
  return o;
}

static cJSON *j_memory(const report *r, int k) {
  cJSON *o = cJSON_CreateObject();
  const pk_memplan *mp = r->mp[k];
  cJSON *reg = cJSON_AddObjectToObject(o, "regions");
  int64_t tp = 0, tn = 0;
  for (int i = 0; i < PK_REGION_COUNT_; i++) {
    cJSON *e = cJSON_AddObjectToObject(reg, pk_region_name((pk_region)i));
    cJSON_AddNumberToObject(e, "planned", (double)mp->region_bytes[i]);
    cJSON_AddNumberToObject(e, "naive", (double)mp->naive_bytes[i]);
    tp += mp->region_bytes[i];
    tn += mp->naive_bytes[i];
  }
  cJSON_AddNumberToObject(o, "planned_bytes", (double)tp);
  cJSON_AddNumberToObject(o, "naive_bytes", (double)tn);
  cJSON_AddNumberToObject(o, "arena_live_peak", (double)mp->arena_live_peak);
  pk_train_stats st;
  pk_train_stats_of(r->t[k], &st);
  cJSON_AddNumberToObject(o, "saved_activation_bytes", (double)st.saved_activation_bytes);
  cJSON_AddNumberToObject(o, "gradient_bytes", (double)st.gradient_bytes);
  cJSON_AddNumberToObject(o, "opt_state_bytes", (double)st.opt_state_bytes);
  cJSON_AddNumberToObject(o, "trainable_param_bytes", (double)st.trainable_param_bytes);
  return o;
}

static void j_graph(cJSON *root, const report *r) {
  const pk_graph *g = r->g;
  cJSON_AddNumberToObject(root, "batch", (double)g->batch);
  cJSON *tr = cJSON_AddObjectToObject(root, "training");
  cJSON_AddStringToObject(tr, "loss", loss_name(r->info.train.loss));
  cJSON_AddNumberToObject(tr, "classes", (double)r->info.classes);
  cJSON_AddStringToObject(tr, "optimizer", optim_name(r->info.train.optim));
  cJSON_AddNumberToObject(tr, "lr", r->info.train.lr);
  cJSON_AddBoolToObject(tr, "from_model", r->info.has_training);
  cJSON *ins = cJSON_AddArrayToObject(root, "inputs");
  cJSON *ps = cJSON_AddArrayToObject(root, "params");
  cJSON *bs = cJSON_AddArrayToObject(root, "buffers");
  int64_t vp = 0, vt = 0;
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (t->role == PK_ROLE_INPUT) {
      cJSON *e = j_tensor(t);
      cJSON_AddBoolToObject(e, "batch", !t->no_batch);
      cJSON_AddItemToArray(ins, e);
    } else if (t->base < 0 && t->role == PK_ROLE_PARAM) {
      cJSON *e = j_tensor(t);
      cJSON_AddNumberToObject(e, "values", (double)numel(t));
      cJSON_AddNumberToObject(e, "trained_values", (double)trained_values(t));
      cJSON_AddItemToArray(ps, e);
      vp += numel(t);
      vt += trained_values(t);
    } else if (t->base < 0 && (t->role == PK_ROLE_BUFFER || t->role == PK_ROLE_CONSTANT)) {
      cJSON *e = j_tensor(t);
      cJSON_AddNumberToObject(e, "values", (double)numel(t));
      cJSON_AddStringToObject(e, "role", pk_role_name(t->role));
      cJSON_AddItemToArray(bs, e);
    }
  }
  cJSON_AddItemToObject(root, "output", j_tensor(g->tensors[g->output]));
  cJSON_AddNumberToObject(root, "param_values", (double)vp);
  cJSON_AddNumberToObject(root, "trained_values", (double)vt);
  if (!r->onnx) {
    cJSON *ops = cJSON_AddArrayToObject(root, "ops");
    int count[PK_OP_COUNT_] = {0};
    for (int k = 0; k < g->nnodes; k++)
      if (g->nodes[k]->op >= 0 && g->nodes[k]->op < PK_OP_COUNT_) count[g->nodes[k]->op]++;
    for (int k = 0; k < g->nnodes; k++) {
      pk_op_kind op = g->nodes[k]->op;
      if (op < 0 || op >= PK_OP_COUNT_ || !count[op]) continue;
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "op", pk_op_name(op));
      cJSON_AddNumberToObject(e, "count", count[op]);
      cJSON_AddItemToArray(ops, e);
      count[op] = 0;
    }
  }
  cJSON *mem = cJSON_AddObjectToObject(root, "memory");
  cJSON_AddItemToObject(mem, "full", j_memory(r, 0));
  if (r->t[1]) cJSON_AddItemToObject(mem, "sparse", j_memory(r, 1));
}

/* One JSON object on stdout; a failed load still reports the ONNX histogram, with "error". */
static void print_json(pk_ctx *ctx, const report *r, pk_status s) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "model", r->o->model);
  cJSON_AddStringToObject(root, "format", r->onnx ? "onnx" : "graph-json");
  if (r->onnx) {
    cJSON_AddNumberToObject(root, "ir_version", (double)r->sum.ir_version);
    cJSON_AddNumberToObject(root, "opset", (double)r->sum.opset);
    cJSON_AddStringToObject(root, "producer", r->sum.producer);
    cJSON *ops = cJSON_AddArrayToObject(root, "onnx_ops");
    for (int i = 0; i < r->sum.nops; i++) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "type", r->sum.ops[i].type);
      cJSON_AddNumberToObject(e, "count", r->sum.ops[i].count);
      cJSON_AddBoolToObject(e, "supported", r->sum.ops[i].supported);
      cJSON_AddStringToObject(e, "first_node", r->sum.ops[i].first_node);
      cJSON_AddItemToArray(ops, e);
    }
  }
  if (s == PK_OK) j_graph(root, r);
  else cJSON_AddStringToObject(root, "error", pk_ctx_error(ctx));
  char *text = cJSON_Print(root);
  if (!text) pk_out_of_memory(0);
  puts(text);
  cJSON_free(text);
  cJSON_Delete(root);
}

static pk_status inspect(pk_ctx *ctx, const inspect_options *o) {
  report r = {.o = o, .onnx = is_onnx(o->model)};
  pk_status s = PK_OK;
  if (r.onnx) {
    /* the histogram first: an unsupported model still gets it, then the import's error */
    if ((s = pk_onnx_summarize(ctx, o->model, &r.sum)) != PK_OK) return s;
    if (!o->json) {
      printf("model: %s (ONNX IR %lld, opset %lld%s%s)\n", o->model,
             (long long)r.sum.ir_version, (long long)r.sum.opset,
             r.sum.producer[0] ? ", from " : "", plain(ctx, r.sum.producer));
      print_onnx_ops(ctx, &r.sum);
    }
  }
  s = gather(ctx, &r);
  if (o->json) print_json(ctx, &r, s);
  else if (s == PK_OK) print_text(ctx, &r);
  return s;
}

int pk_cmd_inspect(int argc, char **argv) {
  inspect_options o;
  int rc = parse_options(argc, argv, &o);
  if (rc < 0) return PK_EXIT_OK; /* --help */
  if (rc != PK_EXIT_OK) return rc;
  pk_ctx *ctx = pk_ctx_new();
  pk_status s = inspect(ctx, &o);
  fflush(stdout); /* what was printed comes before the error */
  rc = s == PK_OK ? PK_EXIT_OK : pk_cli_fail(ctx, s);
  pk_ctx_free(ctx);
  return rc;
}
