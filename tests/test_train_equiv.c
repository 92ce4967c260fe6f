/* test_train_equiv.c — Pock trains like PyTorch: for each case of tests/fixtures/train
 * (model, sparse spec, optimizer; written by scripts/gen_train_fixtures.py) compile, feed the
 * 10 recorded batches, and compare the losses and every parameter with PyTorch's (and,
 * where eval_losses.txt has one, the eval loss of batch 1 after training: model.eval(),
 * batch norm with its running stats). */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_driver.h"
#include "pkrt.h"
#include "pock/pockrt.h"

#ifndef PK_SOURCE_DIR
#error "build with -DPK_SOURCE_DIR=\"...\""
#endif

#define MAX_CASES 64
#define MAX_STEPS 16

static int failures;

/* snprintf for paths: a path that does not fit is a test setup failure, never truncated. */
static void pathf(char *out, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(out, cap, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= cap) {
    printf("FAIL setup: path too long: %s\n", out);
    exit(1);
  }
}

typedef struct tcase {
  char name[64], model[128], spec[128], optim[16], after[128];
  double lr, momentum, weight_decay, tol;
  double torch_loss[MAX_STEPS];
  int nloss;
  bool has_eval;     /* eval_losses.txt gives torch_eval */
  double torch_eval;
} tcase;

/* A batch file: float64 or int32 data of up to 4 dims (what the generator writes). */
typedef struct npy {
  char descr[8];
  int ndim;
  int64_t shape[4];
  int64_t numel;
  void *data;
} npy;

/* Minimal .npy v1/v2 reader for the generator's own files; returns 0 or -1 with msg. */
static int npy_read(const char *path, npy *out, char *msg, size_t cap) {
  memset(out, 0, sizeof *out);
  FILE *f = fopen(path, "rb");
  if (!f) return snprintf(msg, cap, "%s: %s", path, strerror(errno)), -1;
  unsigned char head[10];
  int rc = -1;
  char *hdr = NULL;
  if (fread(head, 1, 10, f) != 10 || memcmp(head, "\x93NUMPY", 6) != 0) {
    snprintf(msg, cap, "%s: not a .npy file", path);
    goto done;
  }
  size_t hlen = head[8] | (size_t)head[9] << 8;
  if (head[6] >= 2) { /* v2: u32 header length; we read 2 of its 4 bytes already */
    unsigned char hi[2];
    if (fread(hi, 1, 2, f) != 2) goto trunc;
    hlen |= (size_t)hi[0] << 16 | (size_t)hi[1] << 24;
  }
  if (hlen > 4096) goto trunc;
  hdr = calloc(1, hlen + 1);
  if (!hdr || fread(hdr, 1, hlen, f) != hlen) goto trunc;
  const char *d = strstr(hdr, "'descr': '"), *s = strstr(hdr, "'shape': (");
  if (!d || !s || strstr(hdr, "'fortran_order': True")) {
    snprintf(msg, cap, "%s: unexpected header %s", path, hdr);
    goto done;
  }
  snprintf(out->descr, sizeof out->descr, "%.3s", d + 10);
  size_t esize = strcmp(out->descr, "<f8") == 0 ? 8 : strcmp(out->descr, "<i4") == 0 ? 4 : 0;
  if (!esize) {
    snprintf(msg, cap, "%s: dtype %s (want <f8 or <i4)", path, out->descr);
    goto done;
  }
  out->numel = 1;
  for (const char *p = s + 10; *p && *p != ')' && out->ndim < 4;) {
    char *e;
    long long v = strtoll(p, &e, 10);
    if (e == p) break;
    out->shape[out->ndim++] = v;
    out->numel *= v;
    p = e + (*e == ',');
    while (*p == ' ') p++;
  }
  out->data = malloc((size_t)out->numel * esize);
  if (!out->data || fread(out->data, esize, (size_t)out->numel, f) != (size_t)out->numel)
    goto trunc;
  rc = 0;
  goto done;
trunc:
  snprintf(msg, cap, "%s: truncated", path);
done:
  free(hdr);
  fclose(f);
  if (rc) free(out->data), out->data = NULL;
  return rc;
}

/* cases.txt: "case model spec optimizer lr momentum weight_decay tolerance after" per line;
 * losses.txt: "case loss1 ... lossN". */
static int read_cases(const char *dir, tcase *cs, int *n) {
  char path[1024], line[2048];
  pathf(path, sizeof path, "%s/cases.txt", dir);
  FILE *f = fopen(path, "r");
  if (!f) return printf("FAIL cases: cannot open %s\n", path), -1;
  *n = 0;
  while (fgets(line, sizeof line, f) && *n < MAX_CASES) {
    if (line[0] == '#' || line[0] == '\n') continue;
    tcase *c = &cs[*n];
    memset(c, 0, sizeof *c);
    if (sscanf(line, "%63s %127s %127s %15s %lf %lf %lf %lf %127s", c->name, c->model, c->spec,
               c->optim, &c->lr, &c->momentum, &c->weight_decay, &c->tol, c->after) != 9) {
      fclose(f);
      return printf("FAIL cases: bad line in %s: %s", path, line), -1;
    }
    (*n)++;
  }
  fclose(f);
  pathf(path, sizeof path, "%s/losses.txt", dir);
  if (!(f = fopen(path, "r"))) return printf("FAIL cases: cannot open %s\n", path), -1;
  while (fgets(line, sizeof line, f)) {
    char name[64];
    int off;
    if (line[0] == '#' || sscanf(line, "%63s%n", name, &off) != 1) continue;
    for (int i = 0; i < *n; i++) {
      if (strcmp(cs[i].name, name) != 0) continue;
      char *p = line + off, *e;
      for (double v; cs[i].nloss < MAX_STEPS && (v = strtod(p, &e), e != p); p = e)
        cs[i].torch_loss[cs[i].nloss++] = v;
    }
  }
  fclose(f);
  /* optional: "case loss" of an eval step on batch 1 after training */
  pathf(path, sizeof path, "%s/eval_losses.txt", dir);
  if (!(f = fopen(path, "r"))) return 0;
  while (fgets(line, sizeof line, f)) {
    char name[64];
    double v;
    if (line[0] == '#' || sscanf(line, "%63s %lf", name, &v) != 2) continue;
    for (int i = 0; i < *n; i++)
      if (strcmp(cs[i].name, name) == 0) cs[i].has_eval = true, cs[i].torch_eval = v;
  }
  fclose(f);
  return 0;
}

static const pkrt_wtensor *find_w(const pkrt_wtensor *w, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(w[i].name, name) == 0) return &w[i];
  return NULL;
}

static double elem(const pkrt_wtensor *t, int64_t i) {
  return t->dtype == PKRT_DTYPE_F32 ? ((const float *)t->data)[i] : ((const double *)t->data)[i];
}

static int64_t numel_of(const pkrt_wtensor *t) {
  int64_t n = 1;
  for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
  return n;
}

/* Checks one Pock parameter against PyTorch: trained elements within tol of `after`
 * (which may hold only the slice [:, :S] of a partially trained weight), frozen ones
 * bit-equal to the initial values. Returns 0 or prints FAIL and returns 1. */
static int check_param(const char *cname, const pkrt_wtensor *got, const pkrt_wtensor *init,
                       const pkrt_wtensor *after, double tol, double *max_err) {
  int64_t n = numel_of(got);
  if (!init || numel_of(init) != n || init->dtype != got->dtype)
    return printf("FAIL %s: param %s missing or differently shaped in the initial weights\n",
                  cname, got->name), 1;
  int64_t s_tr = 0, inner = 1, chans = got->ndim >= 2 ? got->shape[1] : 1;
  if (after) {
    int same = after->ndim == got->ndim && after->dtype == got->dtype;
    for (int d = 0; same && d < got->ndim; d++)
      same = after->shape[d] == got->shape[d] || (d == 1 && after->shape[d] < got->shape[d]);
    if (!same)
      return printf("FAIL %s: %s: PyTorch's tensor has another shape or dtype\n", cname,
                    got->name), 1;
    s_tr = got->ndim >= 2 ? after->shape[1] : 1;
    for (int d = 2; d < got->ndim; d++) inner *= got->shape[d];
  }
  double scale = 1.0;
  if (after)
    for (int64_t i = 0, m = numel_of(after); i < m; i++) scale = fmax(scale, fabs(elem(after, i)));
  double err = 0;
  for (int64_t i = 0; i < n; i++) {
    int64_t c = got->ndim >= 2 ? i / inner % chans : 0;
    if (after && c < s_tr) {
      int64_t o = i / (inner * chans); /* index into the (O, S, ...) slice */
      double e = fabs(elem(got, i) - elem(after, (o * s_tr + c) * inner + i % inner));
      if (!(e <= err)) err = e; /* NaN sticks */
    } else if (elem(got, i) != elem(init, i)) {
      return printf("FAIL %s: frozen %s[%lld] changed: %.17g -> %.17g\n", cname, got->name,
                    (long long)i, elem(init, i), elem(got, i)), 1;
    }
  }
  if (!(err <= tol * scale))
    return printf("FAIL %s: %s max |w - w_torch| = %.3g > %.3g\n", cname, got->name, err,
                  tol * scale), 1;
  if (err / scale > *max_err) *max_err = err / scale;
  return 0;
}

/* The batches of input i (x.npy is input 0, x1.npy input 1, ...): f8 or i4, each
 * (steps, batch, elements...), into the model's input of its own dtype. */
#define MAX_INPUTS 4
typedef struct batches {
  npy x[MAX_INPUTS];
  int nx;
  npy y;
} batches;

static int feed_input(pkrt_model *m, int i, const npy *x, int64_t t, int64_t batch) {
  void *in = pkrt_model_input(m, i ? pkrt_model_input_name(m, i) : NULL);
  int dt = pkrt_model_input_dtype(m, i);
  int64_t per = x->numel / x->shape[0]; /* a step's elements */
  if (!in || per != batch * (x->numel / (x->shape[0] * x->shape[1]))) return PKRT_ERR_INPUT;
  for (int64_t e = 0; e < per; e++) {
    int64_t k = t * per + e;
    double v = strcmp(x->descr, "<f8") == 0 ? ((const double *)x->data)[k]
                                            : (double)((const int32_t *)x->data)[k];
    if (dt == PKRT_DTYPE_F32) ((float *)in)[e] = (float)v;
    else if (dt == PKRT_DTYPE_F64) ((double *)in)[e] = v;
    else if (dt == PKRT_DTYPE_I32) ((int32_t *)in)[e] = (int32_t)v;
    else if (dt == PKRT_DTYPE_I64) ((int64_t *)in)[e] = (int64_t)v;
    else return PKRT_ERR_INPUT;
  }
  return PKRT_OK;
}

/* Feeds batch t of every input and of y. */
static int feed(pkrt_model *m, const batches *b, int64_t t, int64_t batch) {
  if (pkrt_model_ninputs(m) != b->nx) return PKRT_ERR_INPUT;
  for (int i = 0; i < b->nx; i++) {
    int s = feed_input(m, i, &b->x[i], t, batch);
    if (s != PKRT_OK) return s;
  }
  /* y is (steps, batch) or (steps, batch, T): a label per token */
  return pkrt_model_set_labels(m, (const int32_t *)b->y.data + t * (b->y.numel / b->y.shape[0]),
                               batch);
}

/* ---- ONNX models (tests/fixtures/onnx-models, scripts/export_onnx_fixtures.py) ----
 * A case whose model is an .onnx file also checks the forward: pkrt_model_infer on batch 1
 * (a fresh instance of the artifact) equals PyTorch's (tol relative to its largest
 * magnitude): model.eval()'s, out_eval.npy, where the model has batch norms (inference
 * normalizes with the running stats), else out_train.npy. As the import makes constants
 * and buffers PyTorch's
 * state_dict does not name, the initial weights frozen params are compared with are
 * Pock's own, saved before training ("SAVED.init"): the forward check and the losses show
 * they are PyTorch's. */
static bool is_onnx(const char *model) {
  size_t n = strlen(model);
  return n > 5 && strcmp(model + n - 5, ".onnx") == 0;
}

static int onnx_forward(const char *dir, const tcase *c, const batches *b, const char *art,
                        const char *init) {
  char path[1024], msg[512], err[512];
  npy want;
  pathf(path, sizeof path, "%s/out_eval.npy", dir);
  if (access(path, F_OK) != 0) pathf(path, sizeof path, "%s/out_train.npy", dir);
  if (npy_read(path, &want, msg, sizeof msg) != 0)
    return printf("FAIL %s: %s\n", c->name, msg), 1;
  pkrt_model *m;
  int rc = 1;
  if (pkrt_model_open(art, NULL, &m, err, sizeof err) != PKRT_OK) {
    printf("FAIL %s: pkrt_model_open: %s\n", c->name, err);
    free(want.data);
    return 1;
  }
  int64_t oshape[8], on = 1, batch = b->x[0].shape[1];
  for (int d = 0, nd = pkrt_model_output_shape(m, oshape); d < nd; d++) on *= oshape[d];
  if (strcmp(want.descr, "<f8") != 0 || want.numel != on) {
    printf("FAIL %s: the output has %lld elements, %s %lld\n", c->name, (long long)on,
           strrchr(path, '/') + 1, (long long)want.numel);
  } else if (pkrt_model_save_weights(m, init) != PKRT_OK || feed(m, b, 0, batch) != PKRT_OK ||
             pkrt_model_infer(m) != PKRT_OK) {
    printf("FAIL %s: forward: %s\n", c->name, pkrt_model_error(m));
  } else {
    const void *out = pkrt_model_output(m);
    bool f32 = pkrt_model_dtype(m) == PKRT_DTYPE_F32;
    double err_max = 0, scale = 1.0;
    for (int64_t i = 0; i < on; i++) scale = fmax(scale, fabs(((const double *)want.data)[i]));
    for (int64_t i = 0; i < on; i++) {
      double g = f32 ? ((const float *)out)[i] : ((const double *)out)[i];
      double e = fabs(g - ((const double *)want.data)[i]);
      if (!(e <= err_max)) err_max = e; /* NaN sticks */
    }
    if (!(err_max <= c->tol * scale))
      printf("FAIL %s: forward differs from PyTorch's (%s) by %.3g > %.3g\n", c->name,
             strrchr(path, '/') + 1, err_max, c->tol * scale);
    else
      rc = 0, printf("PASS %s: forward on batch 1 equals PyTorch's (%s) within %.2e\n",
                     c->name, strrchr(path, '/') + 1, err_max);
  }
  pkrt_model_close(m);
  free(want.data);
  return rc;
}
/* ---- end of the ONNX block ---- */

/* Compiles the case's model into tmp, runs the batches, saves the weights to `saved`
 * and the losses to loss[] (then loss[steps]: an eval step on batch 1). Returns 0 or
 * prints FAIL. */
static int run_pock(const char *dir, const tcase *c, const batches *b, const char *tmp,
                    char *saved, size_t savedcap, double *loss) {
  const npy *x = &b->x[0];
  char model[1024], spec[1024], art[1024];
  pathf(model, sizeof model, "%s/%s", dir, c->model);
  pathf(spec, sizeof spec, "%s/%s", dir, c->spec);
  pathf(art, sizeof art, "%s/%s.pock", tmp, c->name);
  pathf(saved, savedcap, "%s/%s.out.pkw", tmp, c->name);
  int64_t steps = x->shape[0], batch = x->shape[1], feats = x->numel / (steps * batch);
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = model;
  o.sparse = spec;
  o.batch = batch;
  o.optimizer = c->optim;
  o.lr = c->lr;
  o.momentum = c->momentum;
  o.weight_decay = c->weight_decay;
  o.out = art;
  o.log = fopen("/dev/null", "w");
  pk_compile_result r;
  pk_status st = pk_compile(ctx, &o, &r);
  if (o.log) fclose(o.log);
  if (st != PK_OK) {
    printf("FAIL %s: pk_compile: %s\n", c->name, pk_ctx_error(ctx));
    pk_ctx_free(ctx);
    return 1;
  }
  pk_ctx_free(ctx);
  pkrt_model *m;
  char err[512];
  if (pkrt_model_open(art, NULL, &m, err, sizeof err) != PKRT_OK)
    return printf("FAIL %s: pkrt_model_open: %s\n", c->name, err), 1;
  int rc = 1;
  int64_t ishape[8], inumel = 1;
  int indim = pkrt_model_input_shape(m, ishape);
  for (int d = 1; d < indim; d++) inumel *= ishape[d];
  if (pkrt_model_batch(m) != batch || inumel != feats || pkrt_model_ninputs(m) != b->nx) {
    printf("FAIL %s: artifact batch %lld, %lld features, %d inputs; batches have %lld, %lld, "
           "%d\n", c->name, (long long)pkrt_model_batch(m), (long long)inumel,
           pkrt_model_ninputs(m), (long long)batch, (long long)feats, b->nx);
    goto out;
  }
  char init[1100]; /* ONNX: Pock's initial weights, saved by onnx_forward */
  pathf(init, sizeof init, "%s.init", saved);
  if (is_onnx(c->model) && onnx_forward(dir, c, b, art, init) != 0) goto out;
  for (int64_t t = 0; t < steps; t++) {
    if (feed(m, b, t, batch) != PKRT_OK ||
        pkrt_model_train_step(m, &loss[t]) != PKRT_OK) {
      printf("FAIL %s: step %lld: %s\n", c->name, (long long)t + 1, pkrt_model_error(m));
      goto out;
    }
  }
  if (pkrt_model_save_weights(m, saved) != PKRT_OK) {
    printf("FAIL %s: save weights: %s\n", c->name, pkrt_model_error(m));
    goto out;
  }
  if (feed(m, b, 0, batch) != PKRT_OK ||
      pkrt_model_eval_step(m, &loss[steps]) != PKRT_OK) {
    printf("FAIL %s: eval step: %s\n", c->name, pkrt_model_error(m));
    goto out;
  }
  rc = 0;
out:
  pkrt_model_close(m);
  return rc;
}

/* Pock's results keyed by everything they depend on, so the live check reuses them when
 * the regenerated model, spec and batches are byte-identical to the committed ones. */
typedef struct pock_run {
  char key[65], saved[1024];
  double loss[MAX_STEPS + 1]; /* + the eval loss after training */
} pock_run;

static void hash_files(const char *dir, const tcase *c, char key[65]) {
  const char *names[5 + MAX_INPUTS] = {c->model, NULL, c->spec, "y.npy", "x.npy", "x1.npy",
                                       "x2.npy", "x3.npy"};
  char pkw[160];
  pathf(pkw, sizeof pkw, "%.*s.pkw", (int)(strlen(c->model) - 5), c->model);
  names[1] = pkw;
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  len += (size_t)snprintf(buf, cap, "%s %.17g %.17g %.17g|", c->optim, c->lr, c->momentum,
                          c->weight_decay);
  for (int i = 0; i < 4 + MAX_INPUTS; i++) {
    char path[1024];
    pathf(path, sizeof path, "%s/%s", dir, names[i]);
    FILE *f = fopen(path, "rb");
    if (!f) continue;
    for (size_t k; (k = fread(buf + len, 1, cap - len, f)) > 0;) {
      len += k;
      if (len == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
  }
  pkrt_sha256_hex(buf, len, key);
  free(buf);
}

/* Cases whose name starts with `only` (NULL: all). */
static int run_fixtures(const char *dir, const char *tmp, const char *label, const char *only,
                        pock_run *runs, int *nruns, int *matched) {
  tcase cs[MAX_CASES];
  int n, bad = 0;
  if (read_cases(dir, cs, &n) != 0) return 1;
  char path[1024], msg[512];
  batches b; /* x.npy, x1.npy, ...: one file per model input */
  memset(&b, 0, sizeof b);
  npy *x = &b.x[0], *y = &b.y;
  for (int i = 0; i < MAX_INPUTS; i++) {
    if (i) pathf(path, sizeof path, "%s/x%d.npy", dir, i);
    else pathf(path, sizeof path, "%s/x.npy", dir);
    if (i && access(path, F_OK) != 0) break;
    if (npy_read(path, &b.x[i], msg, sizeof msg) != 0) {
      printf("FAIL %s: %s\n", label, msg);
      bad = 1;
      goto out;
    }
    b.nx++;
  }
  pathf(path, sizeof path, "%s/y.npy", dir);
  if (npy_read(path, y, msg, sizeof msg) != 0) {
    printf("FAIL %s: %s\n", label, msg);
    bad = 1;
    goto out;
  }
  for (int i = 0; i < b.nx; i++)
    bad |= b.x[i].ndim < 3 || b.x[i].shape[0] != y->shape[0] || b.x[i].shape[1] != y->shape[1];
  if (bad || strcmp(y->descr, "<i4") || y->ndim < 2 || y->ndim > 3 || x->shape[0] > MAX_STEPS) {
    printf("FAIL %s: x.npy (x1.npy, ...)/y.npy: want (steps, batch, elements...) f8 or i4 and "
           "(steps, batch[, T]) i4\n", label);
    bad = 1;
    goto out;
  }
  int nrun = 0;
  for (int i = 0; i < n; i++) {
    const tcase *c = &cs[i];
    if (only && strncmp(c->name, only, strlen(only)) != 0) continue;
    nrun++;
    char key[65];
    hash_files(dir, c, key);
    pock_run *pr = NULL;
    for (int k = 0; k < *nruns; k++)
      if (strcmp(runs[k].key, key) == 0) pr = &runs[k];
    if (!pr) {
      pr = &runs[(*nruns)++];
      memcpy(pr->key, key, sizeof key);
      if (run_pock(dir, c, &b, tmp, pr->saved, sizeof pr->saved, pr->loss) != 0) {
        pr->key[0] = 0; /* never reuse a failed run */
        bad++;
        continue;
      }
    }
    /* losses: PyTorch's of the same steps */
    double lerr = 0;
    if (c->nloss != x->shape[0]) {
      printf("FAIL %s: %d PyTorch losses for %lld steps\n", c->name, c->nloss,
             (long long)x->shape[0]);
      bad++;
      continue;
    }
    int lbad = 0; /* a loss mismatch still goes on to show which params differ */
    for (int t = 0; t < c->nloss && !lbad; t++) {
      double e = fabs(pr->loss[t] - c->torch_loss[t]);
      if (!(e <= c->tol * fmax(1.0, fabs(c->torch_loss[t])))) {
        printf("FAIL %s: step %d loss %.17g, PyTorch %.17g\n", c->name, t + 1, pr->loss[t],
               c->torch_loss[t]);
        lbad = 1;
      }
      lerr = fmax(lerr, e);
    }
    double ev = pr->loss[x->shape[0]];
    if (c->has_eval && !(fabs(ev - c->torch_eval) <= c->tol * fmax(1.0, fabs(c->torch_eval)))) {
      printf("FAIL %s: eval loss after training %.17g, PyTorch (model.eval()) %.17g\n",
             c->name, ev, c->torch_eval);
      lbad = 1;
    }
    /* parameters */
    pkrt_ctx *rt = pkrt_ctx_new(1);
    pkrt_arena *a = pkrt_arena_new(0);
    pkrt_wtensor *got, *init, *after;
    int ngot, ninit, nafter;
    char ip[1024], ap[1024];
    if (is_onnx(c->model)) pathf(ip, sizeof ip, "%s.init", pr->saved);
    else pathf(ip, sizeof ip, "%s/%.*s.pkw", dir, (int)(strlen(c->model) - 5), c->model);
    pathf(ap, sizeof ap, "%s/%s", dir, c->after);
    if (pkrt_weights_read(rt, a, pr->saved, &got, &ngot) != PKRT_OK ||
        pkrt_weights_read(rt, a, ip, &init, &ninit) != PKRT_OK ||
        pkrt_weights_read(rt, a, ap, &after, &nafter) != PKRT_OK) {
      printf("FAIL %s: %s\n", c->name, pkrt_ctx_error(rt));
      bad++;
    } else {
      double werr = 0;
      int cbad = 0, ntrained = 0;
      for (int k = 0; k < nafter; k++)
        if (!find_w(got, ngot, after[k].name))
          cbad = (printf("FAIL %s: PyTorch trained %s; Pock's weights have no such param\n",
                         c->name, after[k].name), 1);
      for (int k = 0; k < ngot; k++) { /* every param, so a FAIL shows all that differ */
        const pkrt_wtensor *aw = find_w(after, nafter, got[k].name);
        ntrained += aw != NULL;
        cbad |= check_param(c->name, &got[k], find_w(init, ninit, got[k].name), aw, c->tol,
                            &werr);
      }
      if (!cbad && ngot != ninit)
        cbad = (printf("FAIL %s: Pock saved %d params, the model has %d\n", c->name, ngot,
                       ninit), 1);
      if (cbad || lbad) bad++;
      else
        printf("PASS %s%s: %d params (%d trained), max rel err %.2e, loss err %.2e (tol %g)\n",
               label, c->name, ngot, ntrained, werr, lerr, c->tol);
    }
    pkrt_arena_free(a);
    pkrt_ctx_free(rt);
  }
  *matched += nrun;
out:
  for (int i = 0; i < MAX_INPUTS; i++) free(b.x[i].data);
  free(y->data);
  return bad;
}

static int rm_entry(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  return remove(p);
}

/* test_train_equiv [--only PREFIX] [FIXTURE_DIR...]
 *   The committed fixtures are tests/fixtures/train (the digits models), its graphs/
 *   (a residual net and an attention block written as Pock graphs, full update) and its
 *   optim/ (ignore_index, label smoothing, global clipping, warmup, accumulation) and
 *   tokens/ (a per-token classifier: labels (N, T)).
 *   --only: the cases whose name starts with PREFIX ("mlp", "cnn": ctest runs the two
 *   models as two tests, to keep each short); FIXTURE_DIRs: check these instead of the
 *   committed fixtures and skip the live check (debugging with gen_train_fixtures.py --out). */
int main(int argc, char **argv) {
  const char *only = NULL;
  int ndirs = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (argv[i][0] == '-') return printf("usage: test_train_equiv [--only PREFIX] [DIR...]\n"), 2;
    else argv[++ndirs] = argv[i]; /* compact the directories to argv[1..ndirs] */
  }
  char tmp[] = "/tmp/pock_train_equiv_XXXXXX";
  if (!mkdtemp(tmp)) return printf("FAIL setup: mkdtemp: %s\n", strerror(errno)), 1;
  static pock_run runs[4 * MAX_CASES];
  int nruns = 0, matched = 0;
  for (int i = 1; i <= ndirs; i++)
    failures += run_fixtures(argv[i], tmp, "", only, runs, &nruns, &matched);
  if (ndirs) goto done;
  /* the digits models (10 steps), then the hand-written residual and attention graphs,
   * then the loss and optimizer options on a small MLP (optim/, 5 steps), then the example
   * models of examples/models (tiny sizes, 5 steps; scripts/gen_model_fixtures.py) */
  static const char *const dirs[] = {"", "/graphs", "/optim", "/tokens",
                                     "/models/mobilenet_v2", "/models/resnet18",
                                     "/models/bert", "/models/llama"};
  const int ndir = (int)(sizeof dirs / sizeof dirs[0]);
  for (int i = 0; i < ndir; i++) {
    char dir[1024];
    pathf(dir, sizeof dir, "%s/tests/fixtures/train%s", PK_SOURCE_DIR, dirs[i]);
    failures += run_fixtures(dir, tmp, "", only, runs, &nruns, &matched);
  }

  /* Live: regenerate PyTorch's side now, so a change in models.py or in PyTorch shows. */
  const char *skip = getenv("POCK_SKIP_LIVE_TORCH");
  if (skip && *skip && strcmp(skip, "0") != 0) {
    printf("live PyTorch check: skipped (POCK_SKIP_LIVE_TORCH set)\n");
  } else if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    printf("live PyTorch check: skipped (torch not installed)\n");
  } else {
    char cmd[2048], live[1100], model[64] = "";
    pathf(live, sizeof live, "%s/live", tmp);
    /* --only mlp_ regenerates the mlp cases alone (the script finds the model a case
     * prefix names) */
    if (only && strlen(only) < 40 && strspn(only, "abcdefghijklmnopqrstuvwxyz0123456789_") ==
                                         strlen(only))
      pathf(model, sizeof model, " --only %s", only);
    pathf(cmd, sizeof cmd,
             "/usr/bin/python3 %s/scripts/gen_train_fixtures.py --out %s%s >/dev/null",
             PK_SOURCE_DIR, live, model);
    if (system(cmd) != 0) {
      printf("FAIL live: %s\n", cmd);
      failures++;
    } else {
      for (int i = 0; i < ndir; i++) {
        char dir[1200];
        pathf(dir, sizeof dir, "%s%s", live, dirs[i]);
        /* --only regenerates one model's directory (optim/, tokens/ stand alone) */
        char cases[1300];
        pathf(cases, sizeof cases, "%s/cases.txt", dir);
        if (only && access(cases, F_OK) != 0) continue;
        failures += run_fixtures(dir, tmp, "live ", only, runs, &nruns, &matched);
      }
    }
  }
done:
  if (matched == 0) {
    printf("FAIL: no case matches '%s'\n", only ? only : "");
    failures++;
  }
  nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  printf("%s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
