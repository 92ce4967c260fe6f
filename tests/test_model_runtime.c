/* test_model_runtime.c — libpockrt's model executor end to end: builds a tiny training
 * artifact BY HAND (kernels from the operator library through codegen, a hand-written
 * manifest, pkrt_artifact_write), then trains it and checks every weight against a
 * reference computed in C; views with strides, in-place updates, the lr schedule and H,
 * partial batches, weights save/load, corrupted and hostile artifacts, a manifest fuzz
 * loop, the training loop (shuffle determinism, metrics, stop flag) and a malloc-free
 * check of steps 2..N. Prints PASS/FAIL per test. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_codegen.h"
#include "pk_ops.h"
#include "pkrt.h"
#include "pock/pockrt.h"
#include "pk_test.h"

/* ---------------------------------------------------------------- allocation counting
 * Linked with -Wl,--wrap=malloc,... (tests/model_runtime.cmake): every allocation made by
 * libpockrt (linked statically) goes through these while `counting` is set. */
static volatile int counting;
static long nallocs;
void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t al, size_t n);
void *__wrap_malloc(size_t n) {
  if (counting) __atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
  return __real_malloc(n);
}
void *__wrap_calloc(size_t a, size_t b) {
  if (counting) __atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
  return __real_calloc(a, b);
}
void *__wrap_realloc(void *p, size_t n) {
  if (counting) __atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
  return __real_realloc(p, n);
}
void *__wrap_aligned_alloc(size_t al, size_t n) {
  if (counting) __atomic_add_fetch(&nallocs, 1, __ATOMIC_RELAXED);
  return __real_aligned_alloc(al, n);
}

/* ---------------------------------------------------------------- the model, by hand
 * z = x W^T + b, softmax cross-entropy with row weights, SGD with momentum and weight decay.
 * b is updated in place (dense alias); W trains only input channels [S0, S0 + S): its
 * update kernel reads and writes a VIEW of W (strides (F, 1), elem_offset S0), in place. */
enum { B = 4, F = 6, K = 3, S0 = 1, S = 3 };
#define LR 0.2
#define MOMENTUM 0.9
#define WD 0.01
#define STEP_SIZE 2
#define GAMMA 0.5

enum { R_ARENA, R_PARAMS, R_STATE, R_IO };
static const char *const region_names[] = {"arena", "params", "state", "io"};

typedef struct mtensor {
  const char *name, *role;
  const char *dtype; /* NULL: the model's, f64 */
  int ndim;
  int64_t shape[8];
  int region;
  int64_t offset;
  int view, base;
  int64_t strides[8], elem_offset;
} mtensor;

typedef struct mstep {
  int kernel, nbufs, bufs[16];
  const char *node;
  unsigned plans; /* bit 0 train, 1 eval, 2 infer */
} mstep;

typedef struct model_def {
  pk_ctx *ctx;
  int nt, nk, ns;
  mtensor t[64];
  int64_t region_used[4];
  pk_lfunc *funcs[16];
  mstep s[16];
  int x, W, b, T, R, H, Mb, Mw, Z, L;
  int G; /* io.rng: dropout's (seed, step), i64 (no kernel here reads it) */
  double W0[K * F], b0[K];
} model_def;

/* The built artifact's parts, shared by every test. */
static cJSON *g_manifest;
static unsigned char *g_so;
static size_t g_so_len;
static unsigned char *g_weights;
static size_t g_weights_len;
static model_def g_md;

static int add_tensor(model_def *md, const char *name, const char *role, int ndim,
                      const int64_t *shape, int region) {
  mtensor *t = &md->t[md->nt];
  memset(t, 0, sizeof *t);
  t->name = name;
  t->role = role;
  t->ndim = ndim;
  int64_t n = 8;
  for (int d = 0; d < ndim; d++) n *= (t->shape[d] = shape[d]);
  t->region = region;
  t->offset = md->region_used[region];
  t->base = -1;
  md->region_used[region] += (n + 63) / 64 * 64;
  return md->nt++;
}

static int add_alias(model_def *md, const char *name, const char *role, int base, int ndim,
                     const int64_t *shape, const int64_t *strides, int64_t elem_offset) {
  mtensor *t = &md->t[md->nt];
  *t = md->t[base];
  t->name = name;
  t->role = role;
  t->base = base;
  t->ndim = ndim;
  memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
  if (strides) {
    t->view = 1;
    memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
    t->elem_offset = elem_offset;
  }
  return md->nt++;
}

/* Adds a kernel for prog and a step calling it; ids[j] is the tensor of program tensor j,
 * or -1 for a new arena temp (intermediate stages). strides: per program tensor or NULL. */
static int add_node(model_def *md, const char *node, const pk_te_program *prog, int *ids,
                    unsigned plans, const int64_t *const *strides) {
  for (int j = 0; j < prog->ntensors; j++)
    if (ids[j] < 0) {
      const pk_te_tensor *pt = prog->tensors[j];
      ids[j] = add_tensor(md, pk_sprintf(md->ctx, "%s.t%d", node, j), "temp", pt->ndim,
                          pt->shape, R_ARENA);
    }
  pk_lower_options o = {strides ? prog->ntensors : 0, strides};
  pk_lfunc *f;
  char *kname = pk_sprintf(md->ctx, "k%d", md->nk);
  if (pk_sched_lower_opts(md->ctx, prog, NULL, kname, strides ? &o : NULL, &f) != PK_OK) {
    printf("FAIL build: lowering %s: %s\n", node, pk_ctx_error(md->ctx));
    return -1;
  }
  md->funcs[md->nk] = f;
  mstep *s = &md->s[md->ns++];
  s->kernel = md->nk++;
  s->nbufs = prog->ntensors;
  memcpy(s->bufs, ids, sizeof(int) * (size_t)prog->ntensors);
  s->node = node;
  s->plans = plans;
  return 0;
}

static pk_op_input in2(int64_t a, int64_t b) { return (pk_op_input){2, {a, b}, PKRT_DTYPE_F64}; }
static pk_op_input in1(int64_t a) { return (pk_op_input){1, {a}, PKRT_DTYPE_F64}; }

static int build_nodes(model_def *md) {
  pk_ctx *ctx = md->ctx;
  md->x = add_tensor(md, "x", "input", 2, (int64_t[]){B, F}, R_IO);
  md->W = add_tensor(md, "fc.weight", "param", 2, (int64_t[]){K, F}, R_PARAMS);
  md->b = add_tensor(md, "fc.bias", "param", 1, (int64_t[]){K}, R_PARAMS);
  md->T = add_tensor(md, "target", "label", 2, (int64_t[]){B, K}, R_IO);
  md->R = add_tensor(md, "row_weight", "label", 1, (int64_t[]){B}, R_IO);
  md->H = add_tensor(md, "hyper", "hyper", 1, (int64_t[]){4}, R_STATE);
  md->Mb = add_tensor(md, "mom(fc.bias)", "opt_state", 1, (int64_t[]){K}, R_STATE);
  md->Mw = add_tensor(md, "mom(fc.weight)", "opt_state", 2, (int64_t[]){K, S}, R_STATE);
  int mm = add_tensor(md, "fc.mm", "activation", 2, (int64_t[]){B, K}, R_ARENA);
  md->Z = add_tensor(md, "fc.out", "activation", 2, (int64_t[]){B, K}, R_ARENA);
  md->L = add_tensor(md, "loss", "activation", 1, (int64_t[]){1}, R_ARENA);
  int dZ = add_tensor(md, "grad(fc.out)", "gradient", 2, (int64_t[]){B, K}, R_ARENA);
  int db = add_tensor(md, "grad(fc.bias)", "gradient", 1, (int64_t[]){K}, R_ARENA);
  int xs = add_tensor(md, "slice(x)", "activation", 2, (int64_t[]){B, S}, R_ARENA);
  int dWs = add_tensor(md, "grad(fc.weight)", "gradient", 2, (int64_t[]){K, S}, R_ARENA);
  const int64_t vstr[2] = {F, 1};
  int Wv = add_alias(md, "train(fc.weight)", "param", md->W, 2, (int64_t[]){K, S}, vstr, S0);
  int Wv2 = add_alias(md, "upd(fc.weight)", "param", md->W, 2, (int64_t[]){K, S}, vstr, S0);
  int b2 = add_alias(md, "upd(fc.bias)", "param", md->b, 1, (int64_t[]){K}, NULL, 0);
  int Mb2 = add_alias(md, "upd(mom(fc.bias))", "opt_state", md->Mb, 1, (int64_t[]){K}, NULL, 0);
  int Mw2 = add_alias(md, "upd(mom(fc.weight))", "opt_state", md->Mw, 2, (int64_t[]){K, S},
                      NULL, 0);

  pk_te_program *p;
  pk_op_grad g;
  const unsigned ALL = 7, TRAIN = 1, TE = 3;
  pk_op_params mm_p = {.ninputs = 2, .in = {in2(B, F), in2(K, F)}, .attrs = {.trans_b = true}};
  if (pk_op_build(ctx, PK_OP_MATMUL, &mm_p, &p) != PK_OK ||
      add_node(md, "fc", p, (int[]){md->x, md->W, mm}, ALL, NULL))
    return -1;
  pk_op_params add_p = {.ninputs = 2, .in = {in2(B, K), in1(K)}};
  if (pk_op_build(ctx, PK_OP_ADD, &add_p, &p) != PK_OK ||
      add_node(md, "fc.add", p, (int[]){mm, md->b, md->Z}, ALL, NULL))
    return -1;
  pk_op_params sce_p = {.ninputs = 3, .in = {in2(B, K), in2(B, K), in1(B)}};
  if (pk_op_build(ctx, PK_OP_SOFTMAX_CROSS_ENTROPY, &sce_p, &p) != PK_OK ||
      add_node(md, "loss", p, (int[]){md->Z, md->T, md->R, -1, -1, -1, md->L}, TE, NULL))
    return -1;
  /* Gradient programs: placeholders are the grad args in order, the last tensor dX. */
  if (pk_op_grad_build(ctx, PK_OP_SOFTMAX_CROSS_ENTROPY, &sce_p, 0, &g) != PK_OK) return -1;
  {
    int ids[16];
    for (int j = 0; j < g.prog->ntensors; j++) ids[j] = -1;
    int fwd_in[3] = {md->Z, md->T, md->R};
    for (int a = 0; a < g.nargs; a++) ids[a] = fwd_in[g.args[a].index];
    ids[g.prog->ntensors - 1] = dZ;
    if (add_node(md, "loss.grad0", g.prog, ids, TRAIN, NULL)) return -1;
  }
  if (pk_op_grad_build(ctx, PK_OP_ADD, &add_p, 1, &g) != PK_OK || g.nargs != 1 ||
      g.args[0].kind != PK_GRAD_ARG_DY || g.prog->ntensors != 2)
    return -1;
  if (add_node(md, "fc.add.grad1", g.prog, (int[]){dZ, db}, TRAIN, NULL)) return -1;
  pk_op_params sgd_b = {.ninputs = 4, .in = {in1(K), in1(K), in1(K), in1(4)},
                        .attrs = {.momentum = MOMENTUM, .weight_decay = WD}};
  if (pk_op_build(ctx, PK_OP_SGD_UPDATE, &sgd_b, &p) != PK_OK ||
      add_node(md, "sgd(fc.bias)", p, (int[]){md->b, db, md->Mb, md->H, Mb2, b2}, TRAIN, NULL))
    return -1;
  pk_op_params sl_p = {.ninputs = 1, .in = {in2(B, F)},
                       .attrs = {.slice_axis = 1, .slice_start = S0, .slice_len = S}};
  if (pk_op_build(ctx, PK_OP_SLICE, &sl_p, &p) != PK_OK ||
      add_node(md, "slice(x)", p, (int[]){md->x, xs}, TRAIN, NULL))
    return -1;
  pk_op_params mms_p = {.ninputs = 2, .in = {in2(B, S), in2(K, S)}, .attrs = {.trans_b = true}};
  if (pk_op_grad_build(ctx, PK_OP_MATMUL, &mms_p, 1, &g) != PK_OK || g.nargs != 2 ||
      g.args[0].kind != PK_GRAD_ARG_INPUT || g.args[1].kind != PK_GRAD_ARG_DY)
    return -1;
  if (add_node(md, "fc.grad1", g.prog, (int[]){xs, dZ, dWs}, TRAIN, NULL)) return -1;
  pk_op_params sgd_w = {.ninputs = 4, .in = {in2(K, S), in2(K, S), in2(K, S), in1(4)},
                        .attrs = {.momentum = MOMENTUM, .weight_decay = WD}};
  const int64_t *vs[6] = {vstr, NULL, NULL, NULL, NULL, vstr};
  if (pk_op_build(ctx, PK_OP_SGD_UPDATE, &sgd_w, &p) != PK_OK ||
      add_node(md, "sgd(fc.weight)", p, (int[]){Wv, dWs, md->Mw, md->H, Mw2, Wv2}, TRAIN, vs))
    return -1;
  md->G = add_tensor(md, "rng", "hyper", 1, (int64_t[]){2}, R_STATE);
  md->t[md->G].dtype = "i64";
  for (int k = 0; k < K; k++) {
    md->b0[k] = 0.05 * k;
    for (int f = 0; f < F; f++) md->W0[k * F + f] = 0.3 * sin(k * F + f + 1.0);
  }
  return 0;
}

static cJSON *int_array(const int64_t *v, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
  return a;
}

static cJSON *manifest_json(const model_def *md) {
  cJSON *m = cJSON_CreateObject();
  cJSON_AddNumberToObject(m, "format", 1);
  cJSON_AddStringToObject(m, "pock_version", "test");
  cJSON_AddStringToObject(m, "target", "c");
  cJSON *fp = cJSON_AddObjectToObject(m, "fingerprint");
  cJSON_AddObjectToObject(fp, "must_match");
  cJSON_AddObjectToObject(fp, "informative");
  cJSON_AddStringToObject(m, "mode", "train");
  cJSON_AddStringToObject(m, "dtype", "f64");
  cJSON_AddNumberToObject(m, "batch", B);
  cJSON_AddNumberToObject(m, "classes", K);
  cJSON *r = cJSON_AddObjectToObject(m, "regions");
  for (int i = 0; i < 4; i++)
    cJSON_AddNumberToObject(r, region_names[i], (double)md->region_used[i]);
  cJSON_AddNumberToObject(r, "workspace", 0);
  cJSON *ts = cJSON_AddArrayToObject(m, "tensors");
  for (int i = 0; i < md->nt; i++) {
    const mtensor *t = &md->t[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", t->name);
    cJSON_AddStringToObject(o, "role", t->role);
    cJSON_AddStringToObject(o, "dtype", t->dtype ? t->dtype : "f64");
    cJSON_AddItemToObject(o, "shape", int_array(t->shape, t->ndim));
    cJSON_AddStringToObject(o, "region", region_names[t->region]);
    cJSON_AddNumberToObject(o, "offset", (double)t->offset);
    if (t->view) {
      cJSON_AddItemToObject(o, "strides", int_array(t->strides, t->ndim));
      cJSON_AddNumberToObject(o, "elem_offset", (double)t->elem_offset);
    }
    if (t->base >= 0) cJSON_AddNumberToObject(o, "base", t->base);
    cJSON_AddItemToArray(ts, o);
  }
  cJSON *io = cJSON_AddObjectToObject(m, "io");
  cJSON_AddNumberToObject(io, "input", md->x);
  cJSON_AddNumberToObject(io, "target", md->T);
  cJSON_AddNumberToObject(io, "row_weight", md->R);
  cJSON_AddNumberToObject(io, "output", md->Z);
  cJSON_AddNumberToObject(io, "loss", md->L);
  cJSON_AddNumberToObject(io, "hyper", md->H);
  cJSON_AddNumberToObject(io, "rng", md->G);
  cJSON *ks = cJSON_AddArrayToObject(m, "kernels");
  for (int i = 0; i < md->nk; i++) {
    cJSON *k = cJSON_CreateObject();
    cJSON_AddStringToObject(k, "name", md->funcs[i]->name);
    cJSON_AddStringToObject(k, "workload", "0");
    cJSON_AddNullToObject(k, "record");
    cJSON_AddNumberToObject(k, "nbufs", md->funcs[i]->nparams);
    cJSON_AddNumberToObject(k, "workspace", 0);
    cJSON_AddItemToArray(ks, k);
  }
  cJSON_AddArrayToObject(m, "externs");
  cJSON *o = cJSON_AddObjectToObject(m, "optimizer");
  cJSON_AddStringToObject(o, "kind", "sgd");
  cJSON_AddNumberToObject(o, "lr", LR);
  cJSON_AddNumberToObject(o, "momentum", MOMENTUM);
  cJSON_AddNumberToObject(o, "weight_decay", WD);
  cJSON *sc = cJSON_AddObjectToObject(o, "schedule");
  cJSON_AddStringToObject(sc, "kind", "step");
  cJSON_AddNumberToObject(sc, "step_size", STEP_SIZE);
  cJSON_AddNumberToObject(sc, "gamma", GAMMA);
  cJSON *plans = cJSON_AddObjectToObject(m, "plans");
  const char *pn[3] = {"train", "eval", "infer"};
  for (int p = 0; p < 3; p++) {
    cJSON *a = cJSON_AddArrayToObject(plans, pn[p]);
    for (int i = 0; i < md->ns; i++) {
      if (!(md->s[i].plans & (1u << p))) continue;
      cJSON *st = cJSON_CreateObject();
      cJSON_AddNumberToObject(st, "kernel", md->s[i].kernel);
      cJSON *bufs = cJSON_AddArrayToObject(st, "buffers");
      for (int j = 0; j < md->s[i].nbufs; j++)
        cJSON_AddItemToArray(bufs, cJSON_CreateNumber(md->s[i].bufs[j]));
      cJSON_AddStringToObject(st, "node", md->s[i].node);
      cJSON_AddItemToArray(a, st);
    }
  }
  return m;
}

/* Builds the kernels, the manifest and the weights section into the g_* globals. */
static int build_model(void) {
  model_def *md = &g_md;
  md->ctx = pk_ctx_new();
  if (build_nodes(md) != 0) {
    printf("FAIL build: %s\n", pk_ctx_error(md->ctx));
    return -1;
  }
  for (int i = 0; i < md->ns; i++)
    if (md->funcs[md->s[i].kernel]->nparams != md->s[i].nbufs) {
      printf("FAIL build: kernel %d has %d params for %d tensors\n", i,
             md->funcs[md->s[i].kernel]->nparams, md->s[i].nbufs);
      return -1;
    }
  char *src;
  pk_cc *cc;
  pk_cc_result res;
  if (pk_cgen_c(md->ctx, md->funcs, md->nk, &src) != PK_OK || pk_cc_new(md->ctx, NULL, &cc) != PK_OK ||
      pk_cc_build(cc, src, &res) != PK_OK) {
    printf("FAIL build: %s\n", pk_ctx_error(md->ctx));
    return -1;
  }
  g_so = pk_test_read_file(res.so_path, &g_so_len);
  if (!g_so) return -1;
  g_weights_len = (size_t)(md->region_used[R_PARAMS] + md->region_used[R_STATE]);
  g_weights = calloc(1, g_weights_len);
  memcpy(g_weights + md->t[md->W].offset, md->W0, sizeof md->W0);
  memcpy(g_weights + md->t[md->b].offset, md->b0, sizeof md->b0);
  g_manifest = manifest_json(md);
  return 0;
}

/* Writes an artifact from a manifest (the shared one when NULL). */
static int write_artifact(const char *path, const cJSON *manifest) {
  char *text = cJSON_PrintUnformatted(manifest ? manifest : g_manifest);
  pkrt_section s[3] = {{"manifest", text, strlen(text)},
                       {"kernels", g_so, g_so_len},
                       {"weights", g_weights, g_weights_len}};
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_status st = pkrt_artifact_write(rt, path, s, 3);
  if (st != PKRT_OK) printf("note: artifact write: %s\n", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  free(text);
  return st;
}

/* ---------------------------------------------------------------- the reference, in C */
typedef struct ref {
  double W[K * F], b[K], Mw[K * S], Mb[K];
  int64_t t;
} ref;

static void ref_init(ref *r) {
  memset(r, 0, sizeof *r);
  memcpy(r->W, g_md.W0, sizeof r->W);
  memcpy(r->b, g_md.b0, sizeof r->b);
}

static void ref_forward(const ref *r, const double *x, double *Z) {
  for (int n = 0; n < B; n++)
    for (int k = 0; k < K; k++) {
      double s = 0;
      for (int f = 0; f < F; f++) s += x[n * F + f] * r->W[k * F + f];
      Z[n * K + k] = s + r->b[k];
    }
}

/* Mean cross-entropy over the valid rows; dZ (may be NULL) its gradient. */
static double ref_loss(const double *Z, const int32_t *lab, int valid, double *dZ) {
  double loss = 0;
  if (dZ) memset(dZ, 0, sizeof(double) * B * K);
  for (int n = 0; n < valid; n++) {
    double m = Z[n * K];
    for (int k = 1; k < K; k++) m = fmax(m, Z[n * K + k]);
    double s = 0;
    for (int k = 0; k < K; k++) s += exp(Z[n * K + k] - m);
    loss += (m + log(s) - Z[n * K + lab[n]]) / valid;
    for (int k = 0; dZ && k < K; k++)
      dZ[n * K + k] = (exp(Z[n * K + k] - m) / s - (k == lab[n])) / valid;
  }
  return loss;
}

static double ref_lr(int64_t t) { return LR * pow(GAMMA, (double)((t - 1) / STEP_SIZE)); }

static double ref_train(ref *r, const double *x, const int32_t *lab, int valid) {
  double Z[B * K], dZ[B * K];
  ref_forward(r, x, Z);
  double loss = ref_loss(Z, lab, valid, dZ);
  double db[K] = {0}, dW[K * S] = {0};
  for (int n = 0; n < B; n++)
    for (int k = 0; k < K; k++) {
      db[k] += dZ[n * K + k];
      for (int s = 0; s < S; s++) dW[k * S + s] += dZ[n * K + k] * x[n * F + S0 + s];
    }
  r->t++;
  double lr = ref_lr(r->t);
  for (int k = 0; k < K; k++) {
    r->Mb[k] = MOMENTUM * r->Mb[k] + db[k] + WD * r->b[k];
    r->b[k] -= lr * r->Mb[k];
    for (int s = 0; s < S; s++) {
      double *w = &r->W[k * F + S0 + s], *m = &r->Mw[k * S + s];
      *m = MOMENTUM * *m + dW[k * S + s] + WD * *w;
      *w -= lr * *m;
    }
  }
  return loss;
}

/* A deterministic batch: rows >= valid are zeros (what the training loop pads with). */
static void make_batch(int seed, int valid, double *x, int32_t *lab) {
  memset(x, 0, sizeof(double) * B * F);
  for (int n = 0; n < B; n++) lab[n] = 0;
  for (int n = 0; n < valid; n++) {
    for (int f = 0; f < F; f++) x[n * F + f] = sin(seed * 7.1 + n * 3.3 + f * 1.7);
    lab[n] = (seed + n * 2) % K;
  }
}

static int close_to(double a, double b, double tol) {
  return fabs(a - b) <= tol * fmax(1, fabs(b));
}

static pkrt_model *open_model(const char *path, int nthreads) {
  pkrt_model *m;
  char err[512];
  pkrt_open_options o = {.nthreads = nthreads};
  if (pkrt_model_open(path, &o, &m, err, sizeof err) != PKRT_OK) {
    printf("note: open %s: %s\n", path, err);
    return NULL;
  }
  return m;
}

static const double *tensor_f64(pkrt_model *m, const char *name) {
  pkrt_tensor_info ti;
  if (pkrt_model_tensor(m, name, &ti) != PKRT_OK) return NULL;
  return (const double *)ti.data + ti.offset;
}

/* ---------------------------------------------------------------- tests */

static void check_training(const char *fn, int nthreads) {
  const char *path = pk_test_path("m.pock");
  if (write_artifact(path, NULL) != PKRT_OK) {
    printf("FAIL %s: write artifact\n", fn);
    failures++;
    return;
  }
  pkrt_model *m = open_model(path, nthreads);
#undef CHECK_FN
#define CHECK_FN(cond, ...)                                  \
  do {                                                       \
    if (!(cond)) {                                           \
      printf("FAIL %s(%d threads): ", fn, nthreads);         \
      printf(__VA_ARGS__);                                   \
      printf(" (line %d)\n", __LINE__);                      \
      failures++;                                            \
      pkrt_model_close(m);                                   \
      return;                                                \
    }                                                        \
  } while (0)
  CHECK_FN(m, "open failed");
  int64_t shp[8];
  CHECK_FN(pkrt_model_batch(m) == B && pkrt_model_dtype(m) == PKRT_DTYPE_F64 &&
               pkrt_model_features(m) == F && pkrt_model_classes(m) == K &&
               pkrt_model_can_train(m) && pkrt_model_input_shape(m, shp) == 2 && shp[1] == F &&
               pkrt_model_output_shape(m, shp) == 2 && shp[1] == K,
           "model description");
  CHECK_FN(pkrt_model_arena_bytes(m) == g_md.region_used[R_ARENA], "arena bytes %lld",
           (long long)pkrt_model_arena_bytes(m));
  ref r;
  ref_init(&r);
  CHECK_FN(pkrt_model_set_seed(m, 77) == PKRT_OK, "set_seed");
  double x[B * F], Z[B * K];
  int32_t lab[B];
  for (int step = 0; step < 6; step++) {
    int valid = step == 3 ? 3 : B; /* one partial batch */
    make_batch(step, valid, x, lab);
    memcpy(pkrt_model_input(m, NULL), x, sizeof x);
    CHECK_FN(pkrt_model_set_labels(m, lab, valid) == PKRT_OK, "set_labels: %s",
             pkrt_model_error(m));
    ref_forward(&r, x, Z);
    double loss, want = ref_train(&r, x, lab, valid);
    CHECK_FN(pkrt_model_train_step(m, &loss) == PKRT_OK, "train_step: %s", pkrt_model_error(m));
    CHECK_FN(close_to(loss, want, 1e-12), "step %d loss %.17g, reference %.17g", step, loss, want);
    const double *out = pkrt_model_output(m);
    for (int i = 0; i < B * K; i++)
      CHECK_FN(close_to(out[i], Z[i], 1e-12), "step %d output[%d] %g, reference %g", step, i,
               out[i], Z[i]);
    const double *H = tensor_f64(m, "hyper");
    int64_t t = step + 1;
    const int64_t *rng = (const int64_t *)(const void *)tensor_f64(m, "rng");
    CHECK_FN(rng && rng[0] == 77 && rng[1] == t, "rng at t=%lld", (long long)t);
    CHECK_FN(pkrt_model_steps(m) == t, "steps %lld", (long long)pkrt_model_steps(m));
    CHECK_FN(H && close_to(H[0], ref_lr(t), 1e-15) && close_to(H[1], 1 - pow(0.9, t), 1e-15) &&
                 close_to(H[2], 1 - pow(0.999, t), 1e-15) && H[3] == 0,
             "H at t=%lld: (%g, %g, %g, %g)", (long long)t, H[0], H[1], H[2], H[3]);
    const double *W = tensor_f64(m, "fc.weight"), *b = tensor_f64(m, "fc.bias");
    for (int i = 0; i < K * F; i++) {
      int f = i % F;
      if (f < S0 || f >= S0 + S)
        CHECK_FN(W[i] == g_md.W0[i], "frozen W[%d] changed: %g -> %g", i, g_md.W0[i], W[i]);
      CHECK_FN(close_to(W[i], r.W[i], 1e-12), "step %d W[%d] %.17g, reference %.17g", step, i,
               W[i], r.W[i]);
    }
    for (int k = 0; k < K; k++)
      CHECK_FN(close_to(b[k], r.b[k], 1e-12), "step %d b[%d] %.17g, reference %.17g", step, k,
               b[k], r.b[k]);
  }
  /* eval and infer use the updated weights and change nothing. */
  make_batch(42, B, x, lab);
  memcpy(pkrt_model_input(m, NULL), x, sizeof x);
  pkrt_model_set_labels(m, lab, B);
  ref_forward(&r, x, Z);
  double loss;
  CHECK_FN(pkrt_model_eval_step(m, &loss) == PKRT_OK, "eval: %s", pkrt_model_error(m));
  const int64_t *rng = (const int64_t *)(const void *)tensor_f64(m, "rng");
  CHECK_FN(rng && rng[0] == 77 && rng[1] == -1, "rng after eval: step %lld (want -1)",
           (long long)(rng ? rng[1] : 0));
  CHECK_FN(close_to(loss, ref_loss(Z, lab, B, NULL), 1e-12), "eval loss %g", loss);
  CHECK_FN(pkrt_model_infer(m) == PKRT_OK, "infer: %s", pkrt_model_error(m));
  const double *out = pkrt_model_output(m);
  for (int i = 0; i < B * K; i++) CHECK_FN(close_to(out[i], Z[i], 1e-12), "infer output[%d]", i);
  CHECK_FN(pkrt_model_steps(m) == 6, "eval/infer counted as steps");
  pkrt_model_close(m);
  printf("PASS %s(%d threads)\n", fn, nthreads);
}

static void test_train_reference(void) {
  check_training(__func__, 1);
  check_training(__func__, 2);
}

/* The caller's activation arena: used when big enough and aligned, refused otherwise. */
static void test_caller_arena(void) {
  size_t need = (size_t)g_md.region_used[R_ARENA];
  unsigned char *buf = aligned_alloc(64, need + 64);
  pkrt_model *m;
  char err[512];
  pkrt_open_options o = {.nthreads = 1, .arena = buf, .arena_bytes = need};
  CHECK(pkrt_model_open(pk_test_path("m.pock"), &o, &m, err, sizeof err) == PKRT_OK, "%s", err);
  ref r;
  ref_init(&r);
  double x[B * F], loss;
  int32_t lab[B];
  make_batch(9, B, x, lab);
  memcpy(pkrt_model_input(m, NULL), x, sizeof x);
  pkrt_model_set_labels(m, lab, B);
  memset(buf, 0xff, need); /* stale contents must not matter */
  CHECK(pkrt_model_train_step(m, &loss) == PKRT_OK, "%s", pkrt_model_error(m));
  CHECK(close_to(loss, ref_train(&r, x, lab, B), 1e-12), "loss %g", loss);
  pkrt_tensor_info ti;
  CHECK(pkrt_model_tensor(m, "loss", &ti) == PKRT_OK && (unsigned char *)ti.data >= buf &&
            (unsigned char *)ti.data < buf + need && !strcmp(ti.role, "activation"),
        "the loss does not live in the caller's arena");
  pkrt_model_close(m);
  o.arena_bytes = need - 1;
  CHECK(pkrt_model_open(pk_test_path("m.pock"), &o, &m, err, sizeof err) == PKRT_ERR_INPUT &&
            strstr(err, "the caller's arena has"),
        "small arena: %s", err);
  o.arena = buf + 8;
  o.arena_bytes = need;
  CHECK(pkrt_model_open(pk_test_path("m.pock"), &o, &m, err, sizeof err) == PKRT_ERR_INPUT &&
            strstr(err, "not 64-byte aligned"),
        "misaligned arena: %s", err);
  free(buf);
  PASS();
}

/* The loss of a padded batch averages over its real rows only: equal to the loss of a
 * batch of just those rows, whatever the padding rows hold. */
static void test_partial_batch(void) {
  pkrt_model *m = open_model(pk_test_path("m.pock"), 1);
  CHECK(m, "open");
  ref r;
  ref_init(&r);
  double x[B * F], Z[B * K];
  int32_t lab[B];
  make_batch(5, 2, x, lab);
  ref_forward(&r, x, Z);
  double want = ref_loss(Z, lab, 2, NULL), l1, l2;
  for (int i = 2 * F; i < B * F; i++) x[i] = 100 + i; /* garbage padding */
  memcpy(pkrt_model_input(m, NULL), x, sizeof x);
  CHECK(pkrt_model_set_labels(m, lab, 2) == PKRT_OK, "%s", pkrt_model_error(m));
  CHECK(pkrt_model_eval_step(m, &l1) == PKRT_OK, "%s", pkrt_model_error(m));
  for (int i = 2 * F; i < B * F; i++) x[i] = -3.0 * i;
  memcpy(pkrt_model_input(m, NULL), x, sizeof x);
  CHECK(pkrt_model_eval_step(m, &l2) == PKRT_OK, "%s", pkrt_model_error(m));
  CHECK(close_to(l1, want, 1e-12) && close_to(l2, want, 1e-12),
        "padded loss %.17g / %.17g, loss of the 2 real rows %.17g", l1, l2, want);
  const double *rw = tensor_f64(m, "row_weight");
  CHECK(rw[0] == 0.5 && rw[1] == 0.5 && rw[2] == 0 && rw[3] == 0, "row weights %g %g %g %g",
        rw[0], rw[1], rw[2], rw[3]);
  /* A training step on it moves the weights exactly as the 2-row reference does. */
  double loss;
  ref_train(&r, x, lab, 2);
  CHECK(pkrt_model_train_step(m, &loss) == PKRT_OK, "%s", pkrt_model_error(m));
  const double *W = tensor_f64(m, "fc.weight");
  for (int i = 0; i < K * F; i++) CHECK(close_to(W[i], r.W[i], 1e-12), "W[%d] after step", i);
  /* Bad labels are refused and name the row; nothing is half-written. */
  int32_t bad[B] = {0, 3, 1, 1};
  CHECK(pkrt_model_set_labels(m, bad, B) == PKRT_ERR_INPUT &&
            strstr(pkrt_model_error(m), "label 3 in row 1 is out of range for 3 classes"),
        "out-of-range label: %s", pkrt_model_error(m));
  bad[1] = -1;
  CHECK(pkrt_model_set_labels(m, bad, B) == PKRT_ERR_INPUT, "negative label accepted");
  CHECK(rw[0] == 0.5 && rw[2] == 0, "refused labels changed the row weights");
  CHECK(pkrt_model_set_labels(m, lab, 0) == PKRT_ERR_INPUT &&
            pkrt_model_set_labels(m, lab, B + 1) == PKRT_ERR_INPUT,
        "valid rows out of range accepted");
  CHECK(pkrt_model_set_lr(m, -1) == PKRT_ERR_INPUT && pkrt_model_set_lr(m, NAN) == PKRT_ERR_INPUT,
        "bad lr accepted");
  pkrt_model_close(m);
  PASS();
}

static void test_weights_io(void) {
  pkrt_model *m = open_model(pk_test_path("m.pock"), 1);
  CHECK(m, "open");
  double x[B * F];
  int32_t lab[B];
  for (int s = 0; s < 2; s++) {
    make_batch(s, B, x, lab);
    memcpy(pkrt_model_input(m, NULL), x, sizeof x);
    pkrt_model_set_labels(m, lab, B);
    CHECK(pkrt_model_train_step(m, NULL) == PKRT_OK, "%s", pkrt_model_error(m));
  }
  const char *w = pk_test_path("w.pkw");
  CHECK(pkrt_model_save_weights(m, w) == PKRT_OK, "save: %s", pkrt_model_error(m));
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_arena *a = pkrt_arena_new(0);
  pkrt_wtensor *t;
  int n;
  CHECK(pkrt_weights_read(rt, a, w, &t, &n) == PKRT_OK, "read: %s", pkrt_ctx_error(rt));
  /* Every parameter once, under its own name: no views, no in-place aliases, no state. */
  CHECK(n == 2 && !strcmp(t[0].name, "fc.weight") && !strcmp(t[1].name, "fc.bias") &&
            t[0].ndim == 2 && t[0].shape[0] == K && t[0].shape[1] == F && t[1].ndim == 1,
        "saved %d tensors: %s ...", n, n ? t[0].name : "");
  const double *W = tensor_f64(m, "fc.weight");
  CHECK(!memcmp(t[0].data, W, sizeof(double) * K * F), "saved weight differs");
  pkrt_model *m2 = open_model(pk_test_path("m.pock"), 1);
  CHECK(m2, "open 2");
  CHECK(pkrt_model_load_weights(m2, w) == PKRT_OK, "load: %s", pkrt_model_error(m2));
  CHECK(!memcmp(tensor_f64(m2, "fc.weight"), W, sizeof(double) * K * F) &&
            !memcmp(tensor_f64(m2, "fc.bias"), tensor_f64(m, "fc.bias"), sizeof(double) * K),
        "loaded weights differ");
  /* A file whose tensor has another shape is refused, naming it, and changes nothing. */
  double junk[K * 5] = {0};
  pkrt_wtensor bad[2] = {{"fc.bias", PKRT_DTYPE_F64, 1, {K}, junk},
                         {"fc.weight", PKRT_DTYPE_F64, 2, {K, 5}, junk}};
  CHECK(pkrt_weights_write(rt, pk_test_path("bad.pkw"), bad, 2) == PKRT_OK, "%s",
        pkrt_ctx_error(rt));
  pkrt_model *m3 = open_model(pk_test_path("m.pock"), 1);
  CHECK(m3, "open 3");
  CHECK(pkrt_model_load_weights(m3, pk_test_path("bad.pkw")) == PKRT_ERR_INPUT &&
            strstr(pkrt_model_error(m3), "'fc.weight' is f64 (3, 5)") &&
            strstr(pkrt_model_error(m3), "(3, 6)"),
        "shape mismatch: %s", pkrt_model_error(m3));
  CHECK(tensor_f64(m3, "fc.bias")[1] == g_md.b0[1], "a refused file changed fc.bias");
  pkrt_wtensor other[1] = {{"conv1.weight", PKRT_DTYPE_F64, 1, {K}, junk}};
  pkrt_weights_write(rt, pk_test_path("other.pkw"), other, 1);
  CHECK(pkrt_model_load_weights(m3, pk_test_path("other.pkw")) == PKRT_ERR_INPUT &&
            strstr(pkrt_model_error(m3), "none of its 1 tensors"),
        "no match: %s", pkrt_model_error(m3));
  CHECK(pkrt_model_load_weights(m3, pk_test_path("missing.pkw")) == PKRT_ERR_IO, "missing file");
  pkrt_model_close(m3);
  pkrt_model_close(m2);
  pkrt_model_close(m);
  pkrt_arena_free(a);
  pkrt_ctx_free(rt);
  PASS();
}

static uint64_t get_u64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* Opens bytes written to a file; returns the error text ("" when it opened). */
static const char *open_bytes(const unsigned char *b, size_t n) {
  static char err[512];
  const char *p = pk_test_path("corrupt.pock");
  pk_test_write_file(p, b, n);
  pkrt_model *m;
  err[0] = 0;
  if (pkrt_model_open(p, NULL, &m, err, sizeof err) == PKRT_OK) pkrt_model_close(m);
  return err;
}

static void test_corruption(void) {
  const char *path = pk_test_path("c.pock");
  CHECK(write_artifact(path, NULL) == PKRT_OK, "write");
  size_t n;
  unsigned char *orig = pk_test_read_file(path, &n), *b = malloc(n + 64);
  CHECK(orig && n > 16 + 3 * 64, "read back");
  CHECK(!memcmp(orig, "POCKART\0\1\0\0\0\3\0\0\0", 16), "header bytes");
  const char *names[3] = {"manifest", "kernels", "weights"};
  for (int i = 0; i < 3; i++) {
    const unsigned char *e = orig + 16 + 64 * i;
    CHECK(!strcmp((const char *)e, names[i]), "section %d is '%s'", i, (const char *)e);
    uint64_t off = get_u64(e + 16), size = get_u64(e + 24);
    CHECK(off % 64 == 0 && off + size <= n, "section %d at %llu", i, (unsigned long long)off);
    uint8_t sum[32];
    pkrt_sha256(orig + off, size, sum);
    CHECK(!memcmp(sum, e + 32, 32), "section %d checksum field", i);
    memcpy(b, orig, n);
    b[off + size / 2] ^= 0x10;
    char want[64];
    snprintf(want, sizeof want, "section '%s' checksum mismatch", names[i]);
    const char *err = open_bytes(b, n);
    CHECK(strstr(err, want) && strstr(err, "corrupt.pock"), "flipped byte in %s: '%s'",
          names[i], err);
  }
  struct {
    const char *what, *want;
    size_t len;
    size_t at;
    unsigned char val;
  } cases[] = {
      {"truncated by one", "truncated", n - 1, 0, 0},
      {"truncated to half", "truncated", n / 2, 0, 0},
      {"truncated header", "truncated", 10, 0, 0},
      {"empty file", "not a Pock artifact", 0, 0, 0},
      {"version 7", "format version 7 is not supported (this runtime reads 1)", n, 8, 7},
      {"bad magic", "not a Pock artifact", n, 0, 'Q'},
      {"zero sections", "section count 0", n, 12, 0},
      {"17 sections", "section count 17", n, 12, 17},
      {"bad name", "malformed name", n, 16, 'M'},
      {"misaligned offset", "not 64-byte aligned", n, 16 + 16, 8},
      {"offset into table", "overlaps the section table", n, 16 + 17, 0},
      {"padding", "non-zero padding", n, 16 + 3 * 64 + 1, 1},
      {"huge size", "truncated", n, 16 + 64 + 24 + 7, 0x7f},
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    memcpy(b, orig, n);
    if (cases[c].len == n || cases[c].at) b[cases[c].at] = cases[c].val;
    if (!strcmp(cases[c].what, "offset into table")) memset(b + 16 + 16, 0, 8);
    const char *err = open_bytes(b, cases[c].len);
    CHECK(strstr(err, cases[c].want), "%s: '%s' (want '%s')", cases[c].what, err, cases[c].want);
  }
  /* Two sections at one offset; bytes after the last section. */
  memcpy(b, orig, n);
  memcpy(b + 16 + 64 + 16, b + 16 + 16, 8);
  CHECK(strstr(open_bytes(b, n), "overlaps"), "overlap: %s", open_bytes(b, n));
  memcpy(b, orig, n);
  b[n] = 0;
  CHECK(strstr(open_bytes(b, n + 1), "unexpected bytes after the last section"), "trailing");
  /* A file without the weights section. */
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_section two[2] = {{"manifest", "{}", 2}, {"kernels", g_so, g_so_len}};
  CHECK(pkrt_artifact_write(rt, pk_test_path("two.pock"), two, 2) == PKRT_OK, "%s",
        pkrt_ctx_error(rt));
  size_t n2;
  unsigned char *b2 = pk_test_read_file(pk_test_path("two.pock"), &n2);
  CHECK(strstr(open_bytes(b2, n2), "no 'weights' section"), "missing section");
  free(b2);
  /* The writer refuses what the reader would. */
  pkrt_section bad[2] = {{"Manifest", "x", 1}, {"kernels", "y", 1}};
  CHECK(pkrt_artifact_write(rt, pk_test_path("bad.pock"), bad, 2) == PKRT_ERR_INPUT,
        "upper-case name");
  bad[0].name = "kernels";
  CHECK(pkrt_artifact_write(rt, pk_test_path("bad.pock"), bad, 2) == PKRT_ERR_INPUT &&
            strstr(pkrt_ctx_error(rt), "duplicate section 'kernels'"),
        "duplicate: %s", pkrt_ctx_error(rt));
  CHECK(pkrt_artifact_write(rt, pk_test_path("bad.pock"), bad, 0) == PKRT_ERR_INPUT, "no sections");
  CHECK(access(pk_test_path("bad.pock"), F_OK) != 0, "a refused write left a file");
  /* Reading the good one through the container API. */
  pkrt_artifact *art;
  CHECK(pkrt_artifact_read(rt, path, &art) == PKRT_OK, "%s", pkrt_ctx_error(rt));
  CHECK(pkrt_artifact_count(art) == 3 && pkrt_artifact_find(art, "kernels")->size == g_so_len &&
            !memcmp(pkrt_artifact_find(art, "kernels")->data, g_so, g_so_len) &&
            !pkrt_artifact_find(art, "signature"),
        "sections read back");
  pkrt_artifact_free(art);
  pkrt_model *m;
  char err[256];
  CHECK(pkrt_model_open(pk_test_path("nonexistent.pock"), NULL, &m, err, sizeof err) ==
                PKRT_ERR_IO &&
            strstr(err, "nonexistent.pock") && !m,
        "missing file: %s", err);
  pkrt_ctx_free(rt);
  free(b);
  free(orig);
  PASS();
}

/* ---------------------------------------------------------------- hostile manifests */

/* The node at a path like "plans.train[0].buffers[1]" (NULL if absent). */
static cJSON *at(cJSON *root, const char *path) {
  cJSON *cur = root;
  const char *p = path;
  while (cur && *p) {
    if (*p == '.') p++;
    if (*p == '[') {
      int i = atoi(p + 1);
      cur = cJSON_GetArrayItem(cur, i);
      p = strchr(p, ']') + 1;
      continue;
    }
    size_t n = strcspn(p, ".[");
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)n, p);
    cur = cJSON_GetObjectItemCaseSensitive(cur, key);
    p += n;
  }
  return cur;
}

/* Replaces the node at path (its parent must exist) with item. */
static void put(cJSON *root, const char *path, cJSON *item) {
  const char *dot = strrchr(path, '.'), *br = strrchr(path, '[');
  char parent[128];
  if (br && (!dot || br > dot)) {
    snprintf(parent, sizeof parent, "%.*s", (int)(br - path), path);
    cJSON_ReplaceItemInArray(at(root, parent), atoi(br + 1), item);
  } else if (dot) {
    snprintf(parent, sizeof parent, "%.*s", (int)(dot - path), path);
    cJSON *o = at(root, parent);
    cJSON_DeleteItemFromObjectCaseSensitive(o, dot + 1);
    cJSON_AddItemToObject(o, dot + 1, item);
  } else {
    cJSON_DeleteItemFromObjectCaseSensitive(root, path);
    cJSON_AddItemToObject(root, path, item);
  }
}

static const char *open_manifest(const cJSON *man, pkrt_model **keep) {
  static char err[512];
  const char *p = pk_test_path("hostile.pock");
  err[0] = 0;
  if (write_artifact(p, man) != PKRT_OK) return "(write failed)";
  pkrt_model *m;
  pkrt_open_options o = {.nthreads = 1};
  if (pkrt_model_open(p, &o, &m, err, sizeof err) == PKRT_OK) {
    if (keep) *keep = m;
    else pkrt_model_close(m);
  }
  return err;
}

static void test_hostile_manifests(void) {
  char wv[32], b1[32];
  int Wv = -1;
  for (int i = 0; i < g_md.nt; i++)
    if (!strcmp(g_md.t[i].name, "train(fc.weight)")) Wv = i;
  snprintf(wv, sizeof wv, "tensors[%d]", Wv);
  snprintf(b1, sizeof b1, "tensors[%d]", g_md.b);
  char wv_eo[64], wv_st[64], b_name[64], b_base[64];
  snprintf(wv_eo, sizeof wv_eo, "%s.elem_offset", wv);
  snprintf(wv_st, sizeof wv_st, "%s.strides[0]", wv);
  snprintf(b_name, sizeof b_name, "%s.name", b1);
  snprintf(b_base, sizeof b_base, "%s.base", b1);
  struct {
    const char *path;
    cJSON *(*make)(void);
    double num;
    const char *str;
    const char *want;
  } cases[] = {
      {"plans.train[0].buffers[0]", NULL, 999, NULL, "plans.train[0].buffers[0]: must be a tensor index"},
      {"plans.eval[1].buffers[2]", NULL, -1, NULL, "plans.eval[1].buffers[2]: must be a tensor index"},
      {"tensors[0].offset", NULL, 1e9, NULL, "tensors[0]: bytes [1000000000, 1000000192) lie outside region 'io'"},
      {"tensors[0].offset", NULL, 4, NULL, "tensors[0].offset: 4 is not a multiple of the element size 8"},
      {"kernels[0].nbufs", NULL, 2, NULL, "plans.train[0].buffers: 3 buffers, kernel 'k0' takes 2"},
      {"plans.train[0].kernel", NULL, 99, NULL, "plans.train[0].kernel: must be an integer in [0, 8]"},
      {"plans.train[0].kernel", NULL, 0.5, NULL, "plans.train[0].kernel: must be an integer"},
      {"io.input", NULL, -3, NULL, "io.input: must be an integer"},
      {"io.output", NULL, 1, NULL, "io.output: tensor 'fc.weight' must be dense with the batch (4)"},
      {"io.hyper", NULL, 6, NULL, "io.hyper: tensor 'mom(fc.bias)' must be dense with 4 elements"},
      {"io.rng", NULL, 5, NULL, "io.rng: tensor 'hyper' must be a dense i64 tensor of 2 elements"},
      {"kernels[0].name", NULL, 0, "k99", "kernels[0]: kernel 'k99' is not in the kernel object"},
      {"format", NULL, 4, NULL, "format: manifest version"},
      {"format", NULL, 3, NULL, "format: 3, but target 'c' needs format 1 or 2"},
      {"regions.params", NULL, 64 * 5, NULL, "but the weights section has"},
      {"regions.workspace", NULL, -1, NULL, "regions.workspace: must be an integer"},
      {wv_eo, NULL, 1000, NULL, "lie outside"},
      {wv_st, NULL, -6, NULL, "reach outside the tensor's storage"},
      {wv_st, NULL, 8, NULL, "lie outside its base 'fc.weight'"},
      {"tensors[0].dtype", NULL, 0, "f16", "tensors[0].dtype: 'f16' is not a buffer dtype"},
      {"tensors[0].role", NULL, 0, "weights", "tensors[0].role: unknown role 'weights'"},
      {"tensors[0].region", NULL, 0, "workspace", "tensors[0].region: unknown region"},
      {"tensors[0].shape[1]", NULL, 0, NULL, "tensors[0].shape[1]: must be an integer in [1,"},
      {"mode", NULL, 0, "bogus", "mode: 'bogus' is neither"},
      {"dtype", NULL, 0, "i32", "dtype: 'i32' (models are f32 or f64)"},
      {"batch", NULL, 8, NULL, "io.input: tensor 'x' must be dense with the batch (8)"},
      {"classes", NULL, 4, NULL, "io.target: tensor 'target' must have shape (batch, classes = 4)"},
      {"target", NULL, 0, "cuda -arch=sm_87", "format: 1, but target 'cuda -arch=sm_87' needs format 3"},
      {"target", NULL, 0, "vulkan", "target: 'vulkan' is not supported"},
      {"fingerprint.must_match.arch", NULL, 0, "sparc64", "fingerprint.must_match.arch: the artifact was compiled for arch 'sparc64'"},
      {b_name, NULL, 0, "fc.weight", "parameter name 'fc.weight' is used twice"},
      {b_base, NULL, 2, NULL, "base: 2 is not another tensor's index"},
      {b_base, NULL, 0, NULL, "base: tensor 0 has another region or dtype"},
      {"optimizer.schedule.step_size", NULL, 0, NULL, "optimizer.schedule.step_size: must be >= 1"},
      {"optimizer.kind", NULL, 0, "lion", "optimizer.kind: unknown optimizer 'lion'"},
      {"optimizer.lr", NULL, 0, "fast", "optimizer.lr: must be a number"},
      {"plans.eval[0].buffers[0]", NULL, 3, NULL, "plans.eval[0].buffers[0]: tensor 'target' does not match what kernel 'k0' takes"},
  };
  int f0 = failures;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    cJSON *m = cJSON_Duplicate(g_manifest, 1);
    cJSON *item = cases[c].str ? cJSON_CreateString(cases[c].str) : cJSON_CreateNumber(cases[c].num);
    if (!strcmp(cases[c].path, "fingerprint.must_match.arch"))
      cJSON_AddItemToObject(at(m, "fingerprint.must_match"), "arch", item);
    else if (!strcmp(cases[c].path, b_base))
      cJSON_AddItemToObject(at(m, b1), "base", item);
    else if (!at(m, cases[c].path))
      printf("note: no node at %s\n", cases[c].path), cJSON_Delete(item);
    else
      put(m, cases[c].path, item);
    const char *err = open_manifest(m, NULL);
    if (!strstr(err, cases[c].want)) {
      printf("FAIL %s: %s = ...: got '%s', want '%s'\n", __func__, cases[c].path, err,
             cases[c].want);
      failures++;
    }
    cJSON_Delete(m);
  }
  /* Structural cases. */
  struct {
    const char *what, *want;
  } more[] = {
      {"no plans", "plans: missing or not an object"},
      {"no infer plan", "plans.infer: missing"},
      {"externs", "externs[0].library: missing"},
      /* backend switching: only cblas_sgemm, a kernel's extern index and its call */
      {"extern symbol", "externs[0]: this runtime calls only cblas_sgemm"},
      {"extern index", "kernels[0].extern: must be an integer in [-1, 0]"},
      {"extern call", "kernels[0].sgemm: missing or not an object"},
      {"scalars", "plans.train[0].scalars: 1 scalars, kernel 'k0' takes 0"},
      {"isa", "use CPU feature 'no_such_feature', which this device lacks"},
      {"not json", "manifest: not valid JSON"},
      {"array root", "the top level must be a JSON object"},
      {"rank 9", "tensors[0].shape: rank 9 (at most 8)"},
      /* graph I/O: io.inputs and an input's "batch" */
      {"inputs twice", "is listed twice"},
      {"inputs param", "must be a dense input"},
      {"inputs first", "io.inputs[0]: must be io.input"},
      {"inputs empty", "io.inputs: must be an array of 1..16 tensor indices"},
      {"batch on param", ".batch: only an input may say"},
      {"several inputs in format 1", "need manifest format 2 (this one says 1)"},
  };
  for (size_t c = 0; c < sizeof more / sizeof more[0]; c++) {
    cJSON *m = cJSON_Duplicate(g_manifest, 1);
    const char *w = more[c].what;
    if (!strcmp(w, "no plans")) cJSON_DeleteItemFromObject(m, "plans");
    if (!strcmp(w, "no infer plan")) cJSON_DeleteItemFromObject(at(m, "plans"), "infer");
    if (!strcmp(w, "externs")) cJSON_AddItemToArray(at(m, "externs"), cJSON_CreateObject());
    if (!strncmp(w, "extern ", 7)) {
      cJSON *e = cJSON_CreateObject();
      cJSON_AddStringToObject(e, "library", "libopenblas.so.0");
      bool sym = !strcmp(w, "extern symbol");
      cJSON_AddStringToObject(e, "symbol", sym ? "sin" : PKRT_SGEMM_SYM);
      cJSON_AddStringToObject(e, "signature", sym ? "f64(f64)" : PKRT_SGEMM_SIGNATURE);
      cJSON_AddItemToArray(at(m, "externs"), e);
      if (!sym)
        cJSON_AddNumberToObject(at(m, "kernels[0]"), "extern", !strcmp(w, "extern index"));
    }
    if (!strcmp(w, "scalars"))
      cJSON_AddItemToObject(at(m, "plans.train[0]"), "scalars", int_array((int64_t[]){1}, 1));
    if (!strcmp(w, "isa")) {
      cJSON *isa = cJSON_AddArrayToObject(at(m, "fingerprint.must_match"), "isa");
      cJSON_AddItemToArray(isa, cJSON_CreateString("no_such_feature"));
    }
    if (!strcmp(w, "rank 9"))
      put(m, "tensors[0].shape", int_array((int64_t[]){1, 1, 1, 1, 1, 1, 1, 1, 1}, 9));
    int64_t x = g_md.x, other = g_md.x == 0 ? 1 : 0;
    if (!strcmp(w, "inputs twice"))
      cJSON_AddItemToObject(at(m, "io"), "inputs", int_array((int64_t[]){x, x}, 2));
    if (!strcmp(w, "inputs param"))
      cJSON_AddItemToObject(at(m, "io"), "inputs", int_array((int64_t[]){x, other}, 2));
    if (!strcmp(w, "inputs first"))
      cJSON_AddItemToObject(at(m, "io"), "inputs", int_array((int64_t[]){other}, 1));
    if (!strcmp(w, "inputs empty"))
      cJSON_AddItemToObject(at(m, "io"), "inputs", cJSON_CreateArray());
    if (!strcmp(w, "several inputs in format 1")) {
      /* the label tensor "target" made a second input: dense, (batch, ...), the model dtype */
      cJSON_ReplaceItemInObject(cJSON_GetArrayItem(at(m, "tensors"), g_md.T), "role",
                                cJSON_CreateString("input"));
      cJSON_AddItemToObject(at(m, "io"), "inputs", int_array((int64_t[]){x, g_md.T}, 2));
    }
    if (!strcmp(w, "batch on param"))
      cJSON_AddItemToObject(cJSON_GetArrayItem(at(m, "tensors"), (int)other), "batch",
                            cJSON_CreateFalse());
    const char *err;
    if (!strcmp(w, "not json") || !strcmp(w, "array root")) {
      /* Raw text, not a cJSON tree. */
      const char *text = !strcmp(w, "not json") ? "{\"format\": 1, " : "[1, 2]";
      pkrt_section s[3] = {{"manifest", text, strlen(text)},
                           {"kernels", g_so, g_so_len},
                           {"weights", g_weights, g_weights_len}};
      pkrt_ctx *rt = pkrt_ctx_new(1);
      pkrt_artifact_write(rt, pk_test_path("raw.pock"), s, 3);
      pkrt_ctx_free(rt);
      static char e2[512];
      pkrt_model *mm;
      e2[0] = 0;
      if (pkrt_model_open(pk_test_path("raw.pock"), NULL, &mm, e2, sizeof e2) == PKRT_OK)
        pkrt_model_close(mm);
      err = e2;
    } else {
      err = open_manifest(m, NULL);
    }
    if (!strstr(err, more[c].want)) {
      printf("FAIL %s: %s: got '%s', want '%s'\n", __func__, w, err, more[c].want);
      failures++;
    }
    cJSON_Delete(m);
  }
  /* A manifest consistent with itself but not with the compiled kernel: fc.mm (4, 3) as
   * (3, 4). Open cannot know the kernel's shapes; the kernel's entry check refuses it. */
  {
    cJSON *m = cJSON_Duplicate(g_manifest, 1);
    put(m, "tensors[8].shape", int_array((int64_t[]){3, 4}, 2));
    pkrt_model *mm = NULL;
    const char *err = open_manifest(m, &mm);
    if (!mm) {
      printf("FAIL %s: reshaped fc.mm refused at open: %s\n", __func__, err);
      failures++;
    } else {
      int rc = pkrt_model_infer(mm);
      if (rc != PKRT_ERR_KERNEL ||
          !strstr(pkrt_model_error(mm), "plan 'infer' step 0 (node 'fc', kernel 'k0'): bad arguments")) {
        printf("FAIL %s: kernel entry check: rc %d '%s'\n", __func__, rc, pkrt_model_error(mm));
        failures++;
      }
      pkrt_model_close(mm);
    }
    cJSON_Delete(m);
  }
  if (failures == f0) PASS();
}

/* Every schedule kind, warmup (transformers' rule: optimizer step s = 0, 1, ... uses
 * lr * s / warmup, then the schedule over s - warmup), gradient accumulation (H[3] the
 * micro-step, Adam's t and the schedule counting optimizer steps) and custom betas: H
 * written before each step. */
static void test_lr_schedules(void) {
  struct {
    const char *kind;
    double gamma, min_lr;
    int64_t step_size, total, warmup, accum;
  } cases[] = {{"constant", 1, 0, 0, 0, 0, 1},
               {"step", 0.1, 0, 3, 0, 0, 1},
               {"cosine", 1, 0.01, 0, 4, 0, 1},
               {"cosine", 1, 0, 0, 10, 3, 1},
               {"constant", 1, 0, 0, 0, 2, 1},
               {"step", 0.5, 0, 1, 0, 1, 2},
               {"cosine", 1, 0.1, 0, 4, 1, 3}};
  double x[B * F];
  int32_t lab[B];
  make_batch(2, B, x, lab);
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    cJSON *m = cJSON_Duplicate(g_manifest, 1);
    cJSON *sc = cJSON_CreateObject();
    cJSON_AddStringToObject(sc, "kind", cases[c].kind);
    cJSON_AddNumberToObject(sc, "gamma", cases[c].gamma);
    cJSON_AddNumberToObject(sc, "min_lr", cases[c].min_lr);
    cJSON_AddNumberToObject(sc, "step_size", (double)cases[c].step_size);
    cJSON_AddNumberToObject(sc, "total_steps", (double)cases[c].total);
    cJSON_AddNumberToObject(sc, "warmup_steps", (double)cases[c].warmup);
    put(m, "optimizer.schedule", sc);
    put(m, "optimizer.beta1", cJSON_CreateNumber(0.8));
    put(m, "optimizer.beta2", cJSON_CreateNumber(0.95));
    put(m, "optimizer.accum_steps", cJSON_CreateNumber((double)cases[c].accum));
    pkrt_model *mm = NULL;
    const char *err = open_manifest(m, &mm);
    cJSON_Delete(m);
    CHECK(mm, "%s: %s", cases[c].kind, err);
    CHECK(pkrt_model_set_lr(mm, 0.5) == PKRT_OK && pkrt_model_lr(mm) == 0.5, "set_lr");
    for (int64_t t = 1; t <= 6; t++) {
      memcpy(pkrt_model_input(mm, NULL), x, sizeof x);
      pkrt_model_set_labels(mm, lab, B);
      CHECK(pkrt_model_train_step(mm, NULL) == PKRT_OK, "%s", pkrt_model_error(mm));
      int64_t k = cases[c].accum, topt = (t - 1) / k + 1, s = topt - 1, w = cases[c].warmup;
      double want = 0.5;
      if (s < w) {
        want = 0.5 * (double)s / (double)w;
      } else if (!strcmp(cases[c].kind, "step")) {
        want = 0.5 * pow(cases[c].gamma, (double)((s - w) / cases[c].step_size));
      } else if (!strcmp(cases[c].kind, "cosine")) {
        double T = (double)(cases[c].total - w), p = ((double)(s - w) < T ? s - w : T) / T;
        want = cases[c].min_lr + (0.5 - cases[c].min_lr) * (1 + cos(M_PI * p)) / 2;
      }
      const double *H = tensor_f64(mm, "hyper");
      CHECK(close_to(H[0], want, 1e-14) && close_to(H[1], 1 - pow(0.8, topt), 1e-14) &&
                close_to(H[2], 1 - pow(0.95, topt), 1e-14) && H[3] == (double)((t - 1) % k),
            "%s (warmup %lld, accum %lld) t=%lld: H = (%.17g, %g, %g, %g), want lr %.17g",
            cases[c].kind, (long long)w, (long long)k, (long long)t, H[0], H[1], H[2], H[3],
            want);
    }
    pkrt_model_close(mm);
  }
  PASS();
}

/* ---------------------------------------------------------------- fuzzing */
static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static int collect(cJSON *n, cJSON **out, int cap, int k) {
  for (cJSON *c = n->child; c && k < cap; c = c->next) {
    out[k++] = c;
    k = collect(c, out, cap, k);
  }
  return k;
}

static void mutate(cJSON *root, uint64_t *s) {
  cJSON *nodes[4096];
  int n = collect(root, nodes, 4096, 0);
  if (n == 0) return;
  cJSON *x = nodes[rng(s) % (uint64_t)n];
  if (cJSON_IsNumber(x)) {
    static const double vals[] = {-1, 0, 1, 2, 3, 7, 8, 64, 4096, 1e18, -1e18, 0.5, 1e300};
    double v = rng(s) % 3 == 0 ? x->valuedouble + (rng(s) % 2 ? 1 : -1)
                               : vals[rng(s) % (sizeof vals / sizeof vals[0])];
    cJSON_SetNumberValue(x, v);
  } else if (cJSON_IsString(x)) {
    static const char *vals[] = {"", "x", "f16", "f32", "param", "io", "arena", "k0", "train"};
    cJSON_SetValuestring(x, vals[rng(s) % (sizeof vals / sizeof vals[0])]);
  } else if ((cJSON_IsArray(x) || cJSON_IsObject(x)) && x->child) {
    int m = cJSON_GetArraySize(x);
    if (rng(s) % 2 && cJSON_IsArray(x))
      cJSON_AddItemToArray(x, cJSON_Duplicate(cJSON_GetArrayItem(x, (int)(rng(s) % (uint64_t)m)), 1));
    else
      cJSON_Delete(cJSON_DetachItemViaPointer(x, cJSON_GetArrayItem(x, (int)(rng(s) % (uint64_t)m))));
  }
}

static void test_manifest_fuzz(void) {
  uint64_t s = 0x2545F4914F6CDD1Dull;
  int opened = 0, refused = 0;
  double x[B * F];
  int32_t lab[B];
  make_batch(1, B, x, lab);
  for (int it = 0; it < 400; it++) {
    cJSON *m = cJSON_Duplicate(g_manifest, 1);
    int k = 1 + (int)(rng(&s) % 3);
    for (int j = 0; j < k; j++) mutate(m, &s);
    pkrt_model *mm = NULL;
    const char *err = open_manifest(m, &mm);
    if (mm) {
      opened++;
      /* Whatever opened must run without touching memory outside its regions. */
      void *in = pkrt_model_input(mm, NULL);
      int64_t shp[8];
      int nd = pkrt_model_input_shape(mm, shp);
      int64_t ne = 1;
      for (int d = 0; d < nd; d++) ne *= shp[d];
      if (pkrt_model_dtype(mm) == PKRT_DTYPE_F64 && ne >= B * F) memcpy(in, x, sizeof x);
      pkrt_model_set_labels(mm, lab, pkrt_model_batch(mm) < B ? pkrt_model_batch(mm) : B);
      pkrt_model_train_step(mm, NULL);
      pkrt_model_eval_step(mm, NULL);
      pkrt_model_infer(mm);
      pkrt_model_save_weights(mm, pk_test_path("fuzz.pkw"));
      pkrt_model_close(mm);
    } else {
      refused++;
      if (!*err) {
        printf("FAIL %s: refused without a message (iteration %d)\n", __func__, it);
        failures++;
        cJSON_Delete(m);
        return;
      }
    }
    cJSON_Delete(m);
  }
  printf("PASS %s (%d opened, %d refused)\n", __func__, opened, refused);
}

/* ---------------------------------------------------------------- no allocation per step */
static void test_no_malloc_per_step(void) {
  pkrt_model *m = open_model(pk_test_path("m.pock"), 2);
  CHECK(m, "open");
  double x[B * F];
  int32_t lab[B];
  make_batch(3, B, x, lab);
  memcpy(pkrt_model_input(m, NULL), x, sizeof x);
  pkrt_model_set_labels(m, lab, B);
  CHECK(pkrt_model_train_step(m, NULL) == PKRT_OK, "step 1: %s", pkrt_model_error(m));
  nallocs = 0;
  counting = 1;
  int rc = 0;
  for (int step = 2; step <= 20; step++) {
    make_batch(step, step % 4 + 1, x, lab);
    memcpy(pkrt_model_input(m, NULL), x, sizeof x);
    double loss;
    rc |= pkrt_model_set_labels(m, lab, step % 4 + 1);
    rc |= pkrt_model_train_step(m, &loss);
    rc |= pkrt_model_eval_step(m, &loss);
    rc |= pkrt_model_infer(m);
  }
  counting = 0;
  long during = nallocs;
  CHECK(rc == 0, "a step failed: %s", pkrt_model_error(m));
  CHECK(during == 0, "%ld allocations during steps 2..20", during);
  /* The counter itself works: saving weights allocates. */
  counting = 1;
  pkrt_model_save_weights(m, pk_test_path("count.pkw"));
  counting = 0;
  CHECK(nallocs > 0, "the allocation counter saw nothing (is --wrap=malloc in effect?)");
  pkrt_model_close(m);
  PASS();
}


/* ---------------------------------------------------------------- the training loop */
enum { NROWS = 10 }; /* 3 batches of 4: the last is padded (2 real rows) */

static void data_row(int r, double *x, int32_t *lab) {
  for (int f = 0; f < F; f++) x[f] = cos(r * 1.3 + f * 0.7) * 2;
  *lab = (r * 5 + 1) % K;
}

static const char *write_csv(void) {
  const char *p = pk_test_path("train.csv");
  FILE *f = fopen(p, "w");
  fprintf(f, "f0,f1,f2,f3,f4,f5,label\n");
  for (int r = 0; r < NROWS; r++) {
    double x[F];
    int32_t lab;
    data_row(r, x, &lab);
    /* Features written at twice their value: the loader's scale halves them. */
    for (int c = 0; c < F; c++) fprintf(f, "%.17g,", 2 * x[c]);
    fprintf(f, "%d\n", lab);
  }
  fclose(f);
  return p;
}

static char *slurp(const char *path) {
  size_t n;
  unsigned char *b = pk_test_read_file(path, &n);
  if (b) b[n] = 0;
  return (char *)b;
}

/* Trains a fresh model on the CSV; returns it (caller closes) with r filled. */
static pkrt_model *train_fresh(const char *csv, pkrt_train_options o, pkrt_train_result *r,
                               int *rc) {
  pkrt_model *m = open_model(pk_test_path("m.pock"), 1);
  if (!m) return NULL;
  char err[512];
  pkrt_dataset *d;
  pkrt_data_options dopt = {.scale = 0.5, .label_column = -1, .model = m};
  if (pkrt_dataset_load(csv, &dopt, &d, err, sizeof err) != 0) {
    printf("note: dataset: %s\n", err);
    pkrt_model_close(m);
    return NULL;
  }
  *rc = pkrt_train_run(m, d, &o, r);
  pkrt_dataset_free(d);
  return m;
}

static void test_train_loop(void) {
  const char *csv = write_csv();
  char out_path[512], w_path[512], met_path[512];
  snprintf(out_path, sizeof out_path, "%s", pk_test_path("out.txt"));
  snprintf(w_path, sizeof w_path, "%s", pk_test_path("loop.pkw"));
  snprintf(met_path, sizeof met_path, "%s", pk_test_path("metrics.jsonl"));
  FILE *out = fopen(out_path, "w");
  pkrt_train_options o = {.epochs = 3, .seed = 7, .out = out, .progress = -1,
                          .save_path = w_path, .metrics_path = met_path};
  pkrt_train_result r1, r2, r3, r4;
  int rc;
  pkrt_model *m1 = train_fresh(csv, o, &r1, &rc);
  fclose(out);
  CHECK(m1 && rc == 0, "run 1: %s", m1 ? pkrt_model_error(m1) : "open");
  CHECK(r1.steps == 9 && r1.epochs == 3 && !r1.interrupted && isnan(r1.val_loss),
        "run 1: %lld steps, %d epochs", (long long)r1.steps, r1.epochs);
  char *text = slurp(out_path);
  CHECK(text && strstr(text, "epoch 1/3 loss ") && strstr(text, "epoch 3/3 loss ") &&
            strstr(text, " acc ") && strstr(text, " ms/step ") &&
            strstr(text, "trained 9 steps, ms/step ") && !strstr(text, "val_loss") &&
            !strchr(text, '\r'),
        "output:\n%s", text);
  free(text);
  text = slurp(met_path);
  int lines = 0;
  for (char *q = text; q && (q = strstr(q, "{\"epoch\": ")); q++) lines++;
  CHECK(lines == 3 && strstr(text, "\"steps\": 9") && strstr(text, "\"lr\": "),
        "metrics:\n%s", text);
  free(text);
  CHECK(access(w_path, F_OK) == 0, "weights not saved");
  /* The same seed repeats exactly; another seed trains on another order. */
  o.out = fopen("/dev/null", "w");
  o.save_path = o.metrics_path = NULL;
  pkrt_model *m2 = train_fresh(csv, o, &r2, &rc);
  CHECK(m2 && rc == 0, "run 2");
  o.seed = 8;
  pkrt_model *m3 = train_fresh(csv, o, &r3, &rc);
  CHECK(m3 && rc == 0, "run 3");
  const double *W1 = tensor_f64(m1, "fc.weight"), *W2 = tensor_f64(m2, "fc.weight"),
               *W3 = tensor_f64(m3, "fc.weight");
  CHECK(!memcmp(W1, W2, sizeof(double) * K * F) && r1.loss == r2.loss && r1.acc == r2.acc,
        "seed 7 twice gave different weights");
  CHECK(memcmp(W1, W3, sizeof(double) * K * F) != 0, "seeds 7 and 8 gave the same weights");
  /* In file order the loop is the reference: batches of 4, the last padded. */
  o.no_shuffle = 1;
  o.epochs = 2;
  pkrt_model *m4 = train_fresh(csv, o, &r4, &rc);
  CHECK(m4 && rc == 0, "run 4");
  ref ref;
  ref_init(&ref);
  double loss_sum = 0;
  int correct = 0;
  for (int e = 0; e < 2; e++) {
    loss_sum = 0;
    correct = 0;
    for (int first = 0; first < NROWS; first += B) {
      int valid = NROWS - first < B ? NROWS - first : B;
      double x[B * F] = {0}, Z[B * K];
      int32_t lab[B] = {0};
      for (int i = 0; i < valid; i++) data_row(first + i, x + i * F, &lab[i]);
      ref_forward(&ref, x, Z);
      for (int i = 0; i < valid; i++) {
        int best = 0;
        for (int k = 1; k < K; k++)
          if (Z[i * K + k] > Z[i * K + best]) best = k;
        correct += best == lab[i];
      }
      loss_sum += ref_train(&ref, x, lab, valid) * valid;
    }
  }
  const double *W4 = tensor_f64(m4, "fc.weight");
  for (int i = 0; i < K * F; i++)
    CHECK(close_to(W4[i], ref.W[i], 1e-12), "in-order W[%d] %.17g, reference %.17g", i, W4[i],
          ref.W[i]);
  CHECK(close_to(r4.loss, loss_sum / NROWS, 1e-12) && r4.acc == (double)correct / NROWS,
        "epoch loss %.17g acc %g, reference %.17g %g", r4.loss, r4.acc, loss_sum / NROWS,
        (double)correct / NROWS);
  /* Evaluation over the dataset: the reference's mean loss and accuracy. */
  pkrt_dataset *d;
  char err[512];
  pkrt_data_options dopt = {.scale = 0.5, .label_column = -1, .model = m4};
  CHECK(pkrt_dataset_load(csv, &dopt, &d, err, sizeof err) == 0, "%s", err);
  double el, ea, want_l = 0;
  int want_c = 0;
  CHECK(pkrt_eval_run(m4, d, &el, &ea) == 0, "eval_run: %s", pkrt_model_error(m4));
  for (int r = 0; r < NROWS; r++) {
    double x[B * F] = {0}, Z[B * K];
    int32_t lab[B] = {0};
    data_row(r, x, &lab[0]);
    ref_forward(&ref, x, Z);
    want_l += ref_loss(Z, lab, 1, NULL) / NROWS;
    int best = 0;
    for (int k = 1; k < K; k++)
      if (Z[k] > Z[best]) best = k;
    want_c += best == lab[0];
  }
  CHECK(close_to(el, want_l, 1e-12) && ea == (double)want_c / NROWS,
        "eval_run loss %.17g acc %g, reference %.17g %g", el, ea, want_l,
        (double)want_c / NROWS);
  /* Validation set, a forced progress bar, and the stop flag. */
  FILE *bar = fopen(out_path, "w");
  volatile sig_atomic_t stop = 0;
  pkrt_train_options ov = {.epochs = 1, .val = d, .out = bar, .progress = 1, .stop = &stop};
  pkrt_train_result rv;
  CHECK(pkrt_train_run(m4, d, &ov, &rv) == 0 && !isnan(rv.val_loss) && rv.val_acc >= 0,
        "with validation: %s", pkrt_model_error(m4));
  double vl, va;
  pkrt_eval_run(m4, d, &vl, &va);
  CHECK(vl == rv.val_loss && va == rv.val_acc, "val metrics differ from eval_run");
  stop = 1;
  ov.save_path = w_path;
  unlink(w_path);
  CHECK(pkrt_train_run(m4, d, &ov, &rv) == 0 && rv.interrupted && rv.steps == 0,
        "stop flag: interrupted %d steps %lld", rv.interrupted, (long long)rv.steps);
  fclose(bar);
  text = slurp(out_path);
  CHECK(text && strstr(text, "] 3/3 loss") && strstr(text, "val_loss ") &&
            strstr(text, "interrupted after 0 steps; weights saved to"),
        "bar/interrupt output:\n%s", text);
  free(text);
  CHECK(access(w_path, F_OK) == 0, "weights not saved on interrupt");
  /* Refusals. */
  pkrt_train_options oe = {.epochs = 0, .quiet = 1};
  CHECK(pkrt_train_run(m4, d, &oe, NULL) == PKRT_ERR_INPUT &&
            strstr(pkrt_model_error(m4), "epochs must be >= 1"),
        "epochs 0: %s", pkrt_model_error(m4));
  pkrt_dataset *d32;
  pkrt_data_options o32 = {.scale = 0.5, .label_column = -1};
  CHECK(pkrt_dataset_load(csv, &o32, &d32, err, sizeof err) == 0, "%s", err);
  oe.epochs = 1;
  CHECK(pkrt_train_run(m4, d32, &oe, NULL) == PKRT_ERR_INPUT &&
            strstr(pkrt_model_error(m4), "stored as f32 but the model computes in f64"),
        "dtype: %s", pkrt_model_error(m4));
  pkrt_dataset_free(d32);
  pkrt_data_options o4 = {.label_column = -1, .classes = 2, .features = 6};
  CHECK(pkrt_dataset_load(csv, &o4, &d32, err, sizeof err) != 0 &&
            strstr(err, "out of range for a model with 2 classes"),
        "classes: %s", err);
  pkrt_data_options o5 = {.label_column = -1, .model = m4};
  const char *bad = pk_test_path("five.csv");
  FILE *f5 = fopen(bad, "w");
  fprintf(f5, "1,2,3,4,5,0\n");
  fclose(f5);
  CHECK(pkrt_dataset_load(bad, &o5, &d32, err, sizeof err) != 0 &&
            strstr(err, "5 features per row, but the model's input takes 6"),
        "features: %s", err);
  pkrt_dataset_free(d);
  fclose(o.out);
  pkrt_model_close(m1);
  pkrt_model_close(m2);
  pkrt_model_close(m3);
  pkrt_model_close(m4);
  PASS();
}

/* The median step time without depending on timing: of one step it is that step, of two
 * their mean, so both equal ms_per_step (steps kept as float: 1e-6). The metrics line
 * carries it and the peak RSS (VmHWM: a training process has one on Linux). */
static void test_step_median(void) {
  const char *csv = write_csv();
  const char *met = pk_test_path("median.jsonl");
  for (int64_t n = 1; n <= 2; n++) {
    pkrt_train_options o = {.epochs = 1, .seed = 7, .quiet = 1, .max_steps = n,
                            .metrics_path = met};
    pkrt_train_result r;
    int rc;
    pkrt_model *m = train_fresh(csv, o, &r, &rc);
    CHECK(m && rc == 0 && r.steps == n, "%lld steps: %s", (long long)n,
          m ? pkrt_model_error(m) : "open");
    pkrt_model_close(m);
    CHECK(r.ms_median > 0 && close_to(r.ms_median, r.ms_per_step, 1e-6),
          "%lld steps: median %.9g, mean %.9g", (long long)n, r.ms_median, r.ms_per_step);
    CHECK(r.peak_rss_kb > 0, "peak RSS %lld kB", (long long)r.peak_rss_kb);
  }
  pkrt_train_result r;
  int rc;
  pkrt_train_options o = {.epochs = 3, .seed = 7, .quiet = 1, .metrics_path = met};
  pkrt_model *m = train_fresh(csv, o, &r, &rc);
  CHECK(m && rc == 0 && r.steps == 9 && r.ms_median > 0, "3 epochs: %s",
        m ? pkrt_model_error(m) : "open");
  pkrt_model_close(m);
  char *text = slurp(met);
  int lines = 0;
  for (char *q = text; q && (q = strstr(q, "\"ms_median\": ")); q++) lines++;
  bool rss = text && strstr(text, ", \"peak_rss_kb\": ");
  free(text);
  CHECK(lines == 3 && rss, "metrics: %d lines with ms_median, peak_rss_kb %s", lines,
        rss ? "present" : "missing");
  PASS();
}

/* ---------------------------------------------------------------- main */
int main(void) {
  if (pk_test_tmpdir_make("pk_test_model_rt.") != 0) return 1;
  if (build_model() != 0) return 1;
  test_train_reference();
  test_caller_arena();
  test_partial_batch();
  test_weights_io();
  test_corruption();
  test_hostile_manifests();
  test_lr_schedules();
  test_manifest_fuzz();
  test_no_malloc_per_step();
  test_train_loop();
  test_step_median();
  pk_test_tmpdir_remove();
  cJSON_Delete(g_manifest);
  free(g_so);
  free(g_weights);
  pk_ctx_free(g_md.ctx);
  printf(failures ? "FAIL test_model_runtime (%d)\n" : "PASS test_model_runtime\n", failures);
  return failures != 0;
}
