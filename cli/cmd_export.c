/* cmd_export.c — `pock export FT.pock --weights FT.pkw --onnx MODEL.onnx -o FT.onnx`: the
 * ONNX model the artifact was compiled from, with the fine-tuned weights (and batch-norm
 * running statistics) in place of its initializers, in inference mode, for onnxruntime or
 * any ONNX consumer (frontends/onnx/onnx_export.c does the rewriting). */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "pk_frontend.h"
#include "pk_json_check.h"

static const char export_help[] =
    "usage: pock export FT.pock --weights FT.pkw --onnx MODEL.onnx -o FT.onnx\n"
    "\n"
    "Writes MODEL.onnx (the model FT.pock was compiled from) with each initializer that\n"
    "is a parameter or buffer of FT.pock replaced by its value in FT.pkw (from `pock train\n"
    "--save`), every BatchNormalization switched to inference (training_mode 0, running\n"
    "statistics outputs dropped) and every Dropout's training_mode input removed (false).\n"
    "The weights must belong to the artifact (names, shapes, dtypes) and the artifact to\n"
    "the model (its parameters are initializers, its inputs are graph inputs).\n"
    "\n"
    "options:\n"
    "  --weights FT.pkw      the trained weights\n"
    "  --onnx MODEL.onnx     the model the artifact was compiled from\n"
    "  -o FT.onnx            the ONNX file to write (never one of the inputs)\n"
    "\n"
    "Exit status: 0 success, 1 error (unreadable or mismatched files), 2 usage.\n";

typedef struct export_options {
  const char *artifact, *weights, *onnx, *out;
} export_options;

static int parse_options(int argc, char **argv, export_options *o) {
  memset(o, 0, sizeof *o);
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(export_help, stdout);
      return -1;
    }
    if (a[0] != '-' || !a[1]) {
      if (o->artifact)
        return pk_cli_usage("export: one artifact expected, got '%s' and '%s'", o->artifact, a);
      o->artifact = a;
      continue;
    }
    const char **dst = !strcmp(a, "--weights")                    ? &o->weights
                       : !strcmp(a, "--onnx")                     ? &o->onnx
                       : !strcmp(a, "-o") || !strcmp(a, "--output") ? &o->out
                                                                  : NULL;
    if (!dst) return pk_cli_usage("export: unknown option '%s'", a);
    if (i + 1 >= argc) return pk_cli_usage("export: %s needs a value", a);
    *dst = argv[++i];
  }
  if (!o->artifact) return pk_cli_usage("export: expected FT.pock (from `pock compile`)");
  if (!o->weights) return pk_cli_usage("export: --weights FT.pkw is required");
  if (!o->onnx) return pk_cli_usage("export: --onnx MODEL.onnx is required");
  if (!o->out) return pk_cli_usage("export: -o FT.onnx is required");
  return PK_EXIT_OK;
}

/* What the artifact's manifest says about its tensors (docs/artifact-format.md). */
typedef struct manifest_view {
  cJSON *root;
  const cJSON *tensors;
} manifest_view;

static pk_status read_manifest(pk_ctx *ctx, const char *path, manifest_view *mv) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory");
  pkrt_artifact *a = NULL;
  pk_status s = PK_OK;
  if (pkrt_artifact_read(rt, path, &a) != PKRT_OK) {
    s = pk_ctx_fail(ctx, PK_ERR_CHECK, "%s", pkrt_ctx_error(rt));
  } else {
    const pkrt_section *man = pkrt_artifact_find(a, "manifest");
    mv->root = man ? cJSON_ParseWithLength(man->data, man->size) : NULL;
    mv->tensors = mv->root ? cJSON_GetObjectItemCaseSensitive(mv->root, "tensors") : NULL;
    if (!cJSON_IsArray(mv->tensors))
      s = pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: %s", path,
                      !man ? "no 'manifest' section" : "manifest: no tensors (not valid JSON?)");
  }
  pkrt_artifact_free(a);
  pkrt_ctx_free(rt);
  return s;
}

static const char *jstr(const cJSON *o, const char *key) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(j) && j->valuestring ? j->valuestring : "";
}

static const cJSON *find_tensor(const manifest_view *mv, const char *name) {
  const cJSON *t;
  cJSON_ArrayForEach(t, mv->tensors) if (!strcmp(jstr(t, "name"), name)) return t;
  return NULL;
}

/* The manifest entry agrees with the weights file's tensor (dtype and shape). */
static bool same_layout(const cJSON *t, const pkrt_wtensor *w) {
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(t, "shape");
  if (pkrt_dtype_from_name(jstr(t, "dtype")) != w->dtype || !cJSON_IsArray(shape) ||
      cJSON_GetArraySize(shape) != w->ndim)
    return false;
  for (int d = 0; d < w->ndim; d++) {
    const cJSON *e = cJSON_GetArrayItem(shape, d);
    if (!cJSON_IsNumber(e) || (int64_t)e->valuedouble != w->shape[d]) return false;
  }
  return true;
}

/* The weights file's params and buffers, checked against the artifact: every tensor is a
 * weight of it with its layout, and every param it trains is there. Constants (masks,
 * folded shape data) never change in training and are not ONNX initializers: skipped. */
static pk_status select_weights(pk_ctx *ctx, const export_options *o, const manifest_view *mv,
                                const pkrt_wtensor *w, int nw, pkrt_wtensor *sel, int *nsel) {
  *nsel = 0;
  for (int i = 0; i < nw; i++) {
    const cJSON *t = find_tensor(mv, w[i].name);
    const char *role = t ? jstr(t, "role") : "";
    bool weight = !strcmp(role, "param") || !strcmp(role, "buffer");
    if (!t || (!weight && strcmp(role, "constant")))
      return pk_ctx_fail(ctx, PK_ERR_CHECK,
                         "%s: tensor %s is not a weight of %s (weights of another model?)",
                         o->weights, pk_json_quote(ctx, w[i].name), o->artifact);
    if (!same_layout(t, &w[i]))
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: tensor %s differs from %s's in dtype or shape",
                         o->weights, pk_json_quote(ctx, w[i].name), o->artifact);
    if (weight) sel[(*nsel)++] = w[i];
  }
  const cJSON *t;
  cJSON_ArrayForEach(t, mv->tensors) {
    if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(t, "trainable"))) continue;
    bool found = false;
    for (int i = 0; i < nw && !found; i++) found = !strcmp(w[i].name, jstr(t, "name"));
    if (!found)
      return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s: the trained param %s of %s is missing",
                         o->weights, pk_json_quote(ctx, jstr(t, "name")), o->artifact);
  }
  return PK_OK;
}

static pk_status export_model(pk_ctx *ctx, const export_options *o, pkrt_ctx *rt,
                              pkrt_arena *arena, const manifest_view *mv,
                              pk_onnx_export_result *res) {
  pkrt_wtensor *w;
  int nw;
  if (pkrt_weights_read(rt, arena, o->weights, &w, &nw) != PKRT_OK)
    return pk_ctx_fail(ctx, PK_ERR_CHECK, "%s", pkrt_ctx_error(rt));
  pkrt_wtensor *sel = pk_alloc(ctx, sizeof *sel * (size_t)(nw + 1));
  int nsel;
  pk_status s = select_weights(ctx, o, mv, w, nw, sel, &nsel);
  if (s != PK_OK) return s;
  int nin = 0;
  size_t ntensors = (size_t)cJSON_GetArraySize(mv->tensors);
  const char **inputs = pk_alloc(ctx, sizeof *inputs * (ntensors + 1));
  const cJSON *t;
  cJSON_ArrayForEach(t, mv->tensors) {
    if (!strcmp(jstr(t, "role"), "input")) inputs[nin++] = jstr(t, "name");
  }
  pk_onnx_export_options eo = {.tensors = sel, .ntensors = nsel, .inputs = inputs, .ninputs = nin};
  return pk_onnx_export(ctx, o->onnx, &eo, res);
}

int pk_cmd_export(int argc, char **argv) {
  export_options o;
  int rc = parse_options(argc, argv, &o);
  if (rc < 0) return PK_EXIT_OK; /* --help */
  if (rc != PK_EXIT_OK) return rc;
  const char *const inputs[] = {o.artifact, o.weights, o.onnx};
  /* The output rules first (runtime/rt_file.h): never an input, never a device or FIFO. */
  if (pkrt_cli_check_output("pock", o.out, 0, inputs, 3) != 0) return PK_EXIT_ERROR;
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_arena *arena = pkrt_arena_new(0);
  manifest_view mv = {0};
  pk_onnx_export_result res;
  pk_status s = !rt || !arena ? pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory") : PK_OK;
  if (s == PK_OK) s = read_manifest(ctx, o.artifact, &mv);
  if (s == PK_OK) s = export_model(ctx, &o, rt, arena, &mv, &res);
  if (s != PK_OK) {
    rc = pk_cli_fail(ctx, s);
  } else if (pkrt_cli_write_file("pock", o.out, res.bytes, res.len, inputs, 3) != 0) {
    rc = PK_EXIT_ERROR;
  } else {
    printf("wrote %s: %d initializers replaced, %d batch norms and %d dropouts switched to "
           "inference, %zu bytes\n", o.out, res.nreplaced, res.nbatchnorm, res.ndropout, res.len);
  }
  cJSON_Delete(mv.root);
  if (arena) pkrt_arena_free(arena);
  if (rt) pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return rc;
}
