/* cmd_inspect.c — `pock inspect MODEL`: what a model (ONNX or graph JSON) is before any
 * compile: its inputs, outputs, parameters with their counts (and what a sparse spec
 * trains), the op histogram (ONNX op types supported or not; Pock ops for JSON), and the
 * memory plan of the full update beside the spec's (graph/memplan, as compile
 * --print-memory prints it). */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pk_frontend.h"

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
    "\n"
    "Exit status: 0 success, 1 error (bad model or spec, unsupported ops), 2 usage.\n";

typedef struct inspect_options {
  const char *model, *sparse;
  int64_t batch;
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
    if (a[0] != '-' || !a[1]) {
      if (o->model) return pk_cli_usage("inspect: one MODEL expected, got '%s' and '%s'", o->model, a);
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

static void print_onnx_ops(const pk_onnx_summary *sum) {
  int unsupported = 0;
  for (int i = 0; i < sum->nops; i++) unsupported += !sum->ops[i].supported;
  printf("ONNX ops: %d nodes, %d types, %d unsupported\n", sum->nnodes, sum->nops, unsupported);
  for (int i = 0; i < sum->nops; i++) {
    const pk_onnx_op_count *c = &sum->ops[i];
    printf("  %-28s %6d  %s", c->type, c->count, c->supported ? "supported" : "UNSUPPORTED");
    if (!c->supported && c->first_node[0]) printf(" (first: node '%s')", c->first_node);
    putchar('\n');
  }
}

static void print_pock_ops(const pk_graph *g) {
  int count[PK_OP_COUNT_] = {0}, kinds = 0;
  for (int k = 0; k < g->nnodes; k++)
    if (g->nodes[k]->op >= 0 && g->nodes[k]->op < PK_OP_COUNT_) kinds += count[g->nodes[k]->op]++ == 0;
  printf("Pock ops: %d nodes, %d kinds\n", g->nnodes, kinds);
  /* in order of first appearance, as the model reads */
  for (int k = 0; k < g->nnodes; k++) {
    pk_op_kind op = g->nodes[k]->op;
    if (op < 0 || op >= PK_OP_COUNT_ || count[op] == 0) continue;
    printf("  %-28s %6d\n", pk_op_name(op), count[op]);
    count[op] = 0;
  }
}

static void print_io(pk_ctx *ctx, const pk_graph *g) {
  puts("inputs:");
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if (t->role != PK_ROLE_INPUT) continue;
    printf("  %-28s %-20s %s%s\n", t->name, shape_str(ctx, t->ndim, t->shape),
           pkrt_dtype_name(t->dtype), t->no_batch ? "  (no batch dim)" : "");
  }
  const pk_gtensor *y = g->tensors[g->output];
  printf("output:\n  %-28s %-20s %s\n", y->name, shape_str(ctx, y->ndim, y->shape),
         pkrt_dtype_name(y->dtype));
}

/* Params (with what the spec trains) and buffers; the spec is applied already. */
static void print_weights(pk_ctx *ctx, const pk_graph *g, const char *spec) {
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
    printf("  %-28s %-20s %10lld  %s\n", t->name, shape_str(ctx, t->ndim, t->shape),
           (long long)numel(t), how);
  }
  if (!nb) return;
  printf("buffers and constants: %lld tensors, %lld values\n", (long long)nb, (long long)vb);
  for (int i = 0; i < g->ntensors; i++) {
    const pk_gtensor *t = g->tensors[i];
    if ((t->role != PK_ROLE_BUFFER && t->role != PK_ROLE_CONSTANT) || t->base >= 0) continue;
    printf("  %-28s %-20s %10lld  %s\n", t->name, shape_str(ctx, t->ndim, t->shape),
           (long long)numel(t), pk_role_name(t->role));
  }
}

/* The training graph of the params as marked now, and its memory plan. */
static pk_status print_memory(pk_ctx *ctx, const pk_graph *fwd, const pk_model_info *info,
                              const char *title) {
  pk_graph *t;
  pk_memplan *mp;
  pk_status s = pk_train_build(fwd, &info->train, &t);
  if (s == PK_OK) s = pk_memplan_build(t, NULL, &mp);
  if (s != PK_OK) return s;
  pk_train_stats st;
  pk_train_stats_of(t, &st);
  printf("\nmemory, %s (%d forward, %d backward, %d update nodes):\n", title, st.forward_nodes,
         st.backward_nodes, st.update_nodes);
  fputs(pk_memplan_print(ctx, t, mp), stdout);
  return PK_OK;
}

static pk_status inspect(pk_ctx *ctx, const inspect_options *o) {
  pk_onnx_summary sum = {0};
  pk_status s = PK_OK;
  bool onnx = is_onnx(o->model);
  if (onnx) {
    /* the histogram first: an unsupported model still gets it, then the import's error */
    if ((s = pk_onnx_summarize(ctx, o->model, &sum)) != PK_OK) return s;
    printf("model: %s (ONNX IR %lld, opset %lld%s%s)\n", o->model, (long long)sum.ir_version,
           (long long)sum.opset, sum.producer[0] ? ", from " : "", sum.producer);
    print_onnx_ops(&sum);
  }
  pk_graph *g;
  pk_model_info info;
  pk_frontend_opts fo = {.batch = o->batch, .shapes = o->shapes, .nshapes = o->nshapes};
  if ((s = pk_frontend_load_opts(ctx, o->model, &fo, &g, &info)) != PK_OK) return s;
  if (!onnx) printf("model: %s (graph JSON%s%s)\n", o->model, info.name ? ", " : "",
                    info.name ? info.name : "");
  printf("batch: %lld\n", (long long)g->batch);
  print_io(ctx, g);
  pk_sparse_spec *sp = NULL;
  if (o->sparse) {
    char *text;
    size_t len;
    if ((s = pk_read_file(ctx, o->sparse, &text, &len)) != PK_OK ||
        (s = pk_sparse_parse(ctx, text, len, o->sparse, &sp)) != PK_OK)
      return s;
  }
  if ((s = pk_sparse_apply(g, sp)) != PK_OK) return s;
  print_weights(ctx, g, o->sparse);
  if (!onnx) print_pock_ops(g);
  /* full update first, then the spec's (the marks are the spec's again at the end) */
  if (sp && (s = pk_sparse_apply(g, NULL)) != PK_OK) return s;
  if ((s = print_memory(ctx, g, &info, "full update")) != PK_OK) return s;
  if (!sp) return PK_OK;
  if ((s = pk_sparse_apply(g, sp)) != PK_OK) return s;
  return print_memory(ctx, g, &info, pk_sprintf(ctx, "sparse update (%s)", o->sparse));
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
