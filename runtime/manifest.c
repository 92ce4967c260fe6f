/* manifest.c — parses and validates an artifact's manifest (docs/artifact-format.md,
 * version 1) into the model's arena. The manifest is hostile input: every index is range
 * checked, every tensor's bytes must lie inside its region, and each error names the key
 * ("manifest: tensors[3].offset: ..."). What needs the kernel object is checked in model.c. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_impl.h"

const char *const rt_role_names[RT_ROLE_COUNT_] = {
    "input", "label", "param", "activation", "temp", "gradient", "opt_state", "hyper",
    "buffer", "constant", "folded"};
const char *const rt_region_names[RT_REGION_COUNT_] = {"arena", "params", "state", "io",
                                                       "buffers"};
const char *const rt_plan_names[RT_PLAN_COUNT_] = {"train", "eval", "infer", "load"};

/* Limits far above any real model; they keep hostile sizes from overflowing int64. */
#define MAX_BYTES ((int64_t)1 << 40)
#define MAX_ELEMS ((int64_t)1 << 40)
#define MAX_TENSORS (1 << 20)
#define MAX_STEPS (1 << 20)
#define MAX_KERNELS 65536
#define MAX_NBUFS 256
#define MAX_SCALARS 256

typedef struct parser {
  pkrt_ctx *rt;
  pkrt_arena *a;
  pkrt_status st;
} parser;

static pkrt_status fail(parser *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static pkrt_status fail(parser *P, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* Messages quote the file's strings and end up on terminals: no control characters
   * (an escape sequence in a tensor name must not reach one). */
  for (char *c = msg; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = '?';
  P->st = pkrt_ctx_fail(P->rt, PKRT_ERR_INPUT, "manifest: %s", msg);
  return P->st;
}

static const cJSON *get(const cJSON *o, const char *key) {
  return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

/* An integral JSON number in [lo, hi] (doubles hold every integer up to 2^53 exactly). */
static int as_int(const cJSON *j, int64_t lo, int64_t hi, int64_t *out) {
  if (!cJSON_IsNumber(j)) return 0;
  double d = j->valuedouble;
  if (!isfinite(d) || d < (double)lo || d > (double)hi || d != floor(d)) return 0;
  *out = (int64_t)d;
  return 1;
}

/* Required (or optional with a default) integer member; `where` names the object. */
static int get_int(parser *P, const cJSON *o, const char *where, const char *key, int64_t lo,
                   int64_t hi, int required, int64_t def, int64_t *out) {
  const cJSON *j = get(o, key);
  if (!j || cJSON_IsNull(j)) {
    if (!required) {
      *out = def;
      return 1;
    }
    fail(P, "%s%s%s: missing", where, *where ? "." : "", key);
    return 0;
  }
  if (!as_int(j, lo, hi, out)) {
    fail(P, "%s%s%s: must be an integer in [%lld, %lld]", where, *where ? "." : "", key,
         (long long)lo, (long long)hi);
    return 0;
  }
  return 1;
}

static int get_num(parser *P, const cJSON *o, const char *where, const char *key, double lo,
                   double hi, int required, double def, double *out) {
  const cJSON *j = get(o, key);
  if (!j || cJSON_IsNull(j)) {
    if (!required) {
      *out = def;
      return 1;
    }
    fail(P, "%s.%s: missing", where, key);
    return 0;
  }
  if (!cJSON_IsNumber(j) || !isfinite(j->valuedouble) || j->valuedouble < lo ||
      j->valuedouble > hi) {
    fail(P, "%s.%s: must be a number in [%g, %g]", where, key, lo, hi);
    return 0;
  }
  *out = j->valuedouble;
  return 1;
}

/* A required string member copied into the arena. */
static const char *get_str(parser *P, const cJSON *o, const char *where, const char *key,
                           int required) {
  const cJSON *j = get(o, key);
  if (!j || cJSON_IsNull(j)) {
    if (required) fail(P, "%s%s%s: missing", where, *where ? "." : "", key);
    return NULL;
  }
  if (!cJSON_IsString(j) || !j->valuestring) {
    fail(P, "%s%s%s: must be a string", where, *where ? "." : "", key);
    return NULL;
  }
  const char *s = pkrt_arena_strdup(P->a, j->valuestring);
  if (!s) P->st = pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
  return s;
}

static int index_of(const char *s, const char *const *names, int n) {
  for (int i = 0; s && i < n; i++)
    if (strcmp(s, names[i]) == 0) return i;
  return -1;
}

/* [lo, hi) bytes a tensor can touch, relative to its region; 0 on overflow or negative
 * reach. Dims are >= 1 and |strides| <= MAX_ELEMS, so each term fits comfortably. */
static int tensor_extent(rt_tensor *t) {
  size_t es = pkrt_dtype_size(t->dtype);
  int64_t min = t->elem_offset, max = t->elem_offset;
  for (int d = 0; d < t->ndim; d++) {
    int64_t span;
    if (__builtin_mul_overflow(t->shape[d] - 1, t->strides[d], &span)) return 0;
    if (span < 0 ? __builtin_add_overflow(min, span, &min)
                 : __builtin_add_overflow(max, span, &max))
      return 0;
  }
  if (min < 0 || max >= MAX_ELEMS) return 0;
  t->lo = t->offset + min * (int64_t)es;
  t->hi = t->offset + (max + 1) * (int64_t)es;
  return 1;
}

static pkrt_status parse_tensor(parser *P, const cJSON *j, int i, rt_manifest *mf) {
  char w[48];
  snprintf(w, sizeof w, "tensors[%d]", i);
  rt_tensor *t = &mf->tensors[i];
  if (!cJSON_IsObject(j)) return fail(P, "%s: must be an object", w);
  t->name = get_str(P, j, w, "name", 1);
  if (!t->name) return P->st;
  if (!*t->name) return fail(P, "%s.name: empty", w);
  const char *role = get_str(P, j, w, "role", 1);
  if (!role) return P->st;
  int r = index_of(role, rt_role_names, RT_ROLE_COUNT_);
  if (r < 0) return fail(P, "%s.role: unknown role '%s'", w, role);
  t->role = (rt_role)r;
  const char *dt = get_str(P, j, w, "dtype", 1);
  if (!dt) return P->st;
  t->dtype = pkrt_dtype_from_name(dt);
  if (pkrt_dtype_size(t->dtype) == 0 || t->dtype == PKRT_DTYPE_F16 || t->dtype == PKRT_DTYPE_BF16)
    return fail(P, "%s.dtype: '%s' is not a buffer dtype (f32, f64, i32, i64)", w, dt);
  const cJSON *sh = get(j, "shape");
  if (!cJSON_IsArray(sh)) return fail(P, "%s.shape: missing or not an array", w);
  int nd = cJSON_GetArraySize(sh);
  if (nd > RT_MAX_DIMS) return fail(P, "%s.shape: rank %d (at most %d)", w, nd, RT_MAX_DIMS);
  t->ndim = nd;
  t->numel = 1;
  for (int d = 0; d < nd; d++) {
    if (!as_int(cJSON_GetArrayItem(sh, d), 1, MAX_ELEMS, &t->shape[d]))
      return fail(P, "%s.shape[%d]: must be an integer in [1, %lld]", w, d,
                  (long long)MAX_ELEMS);
    if (t->shape[d] > MAX_ELEMS / t->numel)
      return fail(P, "%s.shape: more than %lld elements", w, (long long)MAX_ELEMS);
    t->numel *= t->shape[d];
  }
  const char *reg = get_str(P, j, w, "region", 1);
  if (!reg) return P->st;
  int rg = index_of(reg, rt_region_names, RT_REGION_COUNT_);
  if (rg < 0) return fail(P, "%s.region: unknown region '%s'", w, reg);
  t->region = (rt_region)rg;
  if (!get_int(P, j, w, "offset", 0, MAX_BYTES, 1, 0, &t->offset)) return P->st;
  int64_t es = (int64_t)pkrt_dtype_size(t->dtype);
  if (t->offset % es != 0)
    return fail(P, "%s.offset: %lld is not a multiple of the element size %lld", w,
                (long long)t->offset, (long long)es);
  const cJSON *st = get(j, "strides");
  if (st && !cJSON_IsNull(st)) {
    if (!cJSON_IsArray(st) || cJSON_GetArraySize(st) != nd)
      return fail(P, "%s.strides: must be an array of %d integers", w, nd);
    for (int d = 0; d < nd; d++)
      if (!as_int(cJSON_GetArrayItem(st, d), -MAX_ELEMS, MAX_ELEMS, &t->strides[d]))
        return fail(P, "%s.strides[%d]: must be an integer in [-%lld, %lld]", w, d,
                    (long long)MAX_ELEMS, (long long)MAX_ELEMS);
    t->view = true;
  } else {
    int64_t s = 1;
    for (int d = nd - 1; d >= 0; d--) {
      t->strides[d] = s;
      s *= t->shape[d];
    }
  }
  if (!get_int(P, j, w, "elem_offset", 0, MAX_ELEMS, 0, 0, &t->elem_offset)) return P->st;
  if (t->elem_offset) t->view = true;
  int64_t base;
  if (!get_int(P, j, w, "base", -1, MAX_TENSORS, 0, -1, &base)) return P->st;
  t->base = (int)base;
  const cJSON *tr = get(j, "trainable");
  if (tr && !cJSON_IsBool(tr)) return fail(P, "%s.trainable: must be true or false", w);
  t->trainable = tr && cJSON_IsTrue(tr);
  const cJSON *bt = get(j, "batch");
  if (bt && (!cJSON_IsBool(bt) || t->role != RT_ROLE_INPUT))
    return fail(P, "%s.batch: only an input may say, as true or false, whether it has the "
                "batch dim", w);
  t->no_batch = bt && cJSON_IsFalse(bt);
  if (!tensor_extent(t))
    return fail(P, "%s: strides and elem_offset reach outside the tensor's storage "
                   "(a negative or huge element index)", w);
  if (t->hi > mf->region_bytes[t->region])
    return fail(P, "%s: bytes [%lld, %lld) lie outside region '%s' (%lld bytes)", w,
                (long long)t->lo, (long long)t->hi, rt_region_names[t->region],
                (long long)mf->region_bytes[t->region]);
  return PKRT_OK;
}

/* Sort keys for finding weights (by storage, then index) and duplicate names. */
typedef struct wkey {
  rt_region region;
  int64_t offset;
  int index;
  const char *name;
} wkey;

static int by_storage(const void *a, const void *b) {
  const wkey *x = a, *y = b;
  if (x->region != y->region) return x->region < y->region ? -1 : 1;
  if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
  return x->index - y->index;
}

static int by_name(const void *a, const void *b) {
  const wkey *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : x->index - y->index;
}

/* Aliases: a base must be a different, non-aliasing tensor of the same region and dtype
 * whose bytes contain the alias's. Then which params are weights of their own. */
static pkrt_status check_bases(parser *P, rt_manifest *mf) {
  for (int i = 0; i < mf->ntensors; i++) {
    rt_tensor *t = &mf->tensors[i];
    if (t->base < 0) continue;
    if (t->base >= mf->ntensors || t->base == i)
      return fail(P, "tensors[%d].base: %d is not another tensor's index", i, t->base);
    const rt_tensor *b = &mf->tensors[t->base];
    if (b->base >= 0) return fail(P, "tensors[%d].base: tensor %d is itself an alias", i, t->base);
    if (b->region != t->region || b->dtype != t->dtype)
      return fail(P, "tensors[%d].base: tensor %d has another region or dtype", i, t->base);
    if (t->lo < b->lo || t->hi > b->hi)
      return fail(P, "tensors[%d]: bytes [%lld, %lld) lie outside its base '%s' [%lld, %lld)",
                  i, (long long)t->lo, (long long)t->hi, b->name, (long long)b->lo,
                  (long long)b->hi);
  }
  /* A weight is a dense param with storage of its own. Without "base" keys an in-place
   * update's output looks like a second param at the same bytes: the first one (the
   * model's own name, created first) is the weight. Sorting keeps hostile manifests with
   * a million tensors from making this quadratic. */
  int nw = 0;
  wkey *k = pkrt_arena_alloc(P->a, sizeof(wkey) * (size_t)mf->ntensors, 0);
  if (!k) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
  for (int i = 0; i < mf->ntensors; i++) {
    const rt_tensor *t = &mf->tensors[i];
    /* buffers and constants are saved and loaded with the weights too */
    bool state = t->role == RT_ROLE_PARAM || t->role == RT_ROLE_BUFFER ||
                 t->role == RT_ROLE_CONSTANT;
    if (state && t->base < 0 && !t->view)
      k[nw++] = (wkey){t->region, t->offset, i, t->name};
  }
  qsort(k, (size_t)nw, sizeof *k, by_storage);
  for (int i = 0; i < nw; i++)
    mf->tensors[k[i].index].weight =
        i == 0 || k[i].region != k[i - 1].region || k[i].offset != k[i - 1].offset;
  /* Weight names must be unique: they are the keys of the weights file. */
  int n = 0;
  for (int i = 0; i < nw; i++)
    if (mf->tensors[k[i].index].weight) k[n++] = k[i];
  qsort(k, (size_t)n, sizeof *k, by_name);
  for (int i = 1; i < n; i++)
    if (strcmp(k[i].name, k[i - 1].name) == 0)
      return fail(P, "tensors[%d].name: parameter name '%s' is used twice", k[i].index,
                  k[i].name);
  return PKRT_OK;
}

/* io.inputs: [tensor index, ...], every input the executor feeds; the first is io.input.
 * Each is a dense input of the model's dtype, i32 or i64; one with the batch dim has it
 * first. Absent: io.input alone (a one-input artifact). */
static pkrt_status parse_inputs(parser *P, const cJSON *io, rt_manifest *mf) {
  const cJSON *a = get(io, "inputs");
  if (!a) {
    mf->ninputs = 1;
    mf->inputs[0] = mf->input;
  } else {
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > RT_MAX_INPUTS)
      return fail(P, "io.inputs: must be an array of 1..%d tensor indices", RT_MAX_INPUTS);
    mf->ninputs = 0;
    for (const cJSON *e = a->child; e; e = e->next) {
      int64_t v;
      if (!as_int(e, 0, mf->ntensors - 1, &v))
        return fail(P, "io.inputs[%d]: must be a tensor index in [0, %d]", mf->ninputs,
                    mf->ntensors - 1);
      for (int k = 0; k < mf->ninputs; k++)
        if (mf->inputs[k] == v) return fail(P, "io.inputs[%d]: tensor %lld is listed twice",
                                            mf->ninputs, (long long)v);
      mf->inputs[mf->ninputs++] = (int)v;
    }
    if (mf->inputs[0] != mf->input)
      return fail(P, "io.inputs[0]: must be io.input (%d), not %d", mf->input, mf->inputs[0]);
  }
  for (int k = 0; k < mf->ninputs; k++) {
    const rt_tensor *t = &mf->tensors[mf->inputs[k]];
    if (t->role != RT_ROLE_INPUT || t->view)
      return fail(P, "io.inputs[%d]: tensor '%s' must be a dense input", k, t->name);
    if (t->dtype != mf->dtype && t->dtype != PKRT_DTYPE_I32 && t->dtype != PKRT_DTYPE_I64)
      return fail(P, "io.inputs[%d]: tensor '%s' has dtype %s (the model's %s, i32 or i64)", k,
                  t->name, pkrt_dtype_name(t->dtype), pkrt_dtype_name(mf->dtype));
    if (!t->no_batch && (t->ndim < 1 || t->shape[0] != mf->batch))
      return fail(P, "io.inputs[%d]: tensor '%s' must have the batch (%lld) as its first dim "
                  "(or \"batch\": false)", k, t->name, (long long)mf->batch);
    if (k == 0 && t->no_batch)
      return fail(P, "io.input: tensor '%s' must have the batch dim", t->name);
    /* A version-1 reader would feed only io.input: such models are format 2. */
    if (mf->format < 2 && (k > 0 || t->no_batch || t->dtype != mf->dtype))
      return fail(P, "io.inputs[%d]: tensor '%s': several inputs, integer inputs and inputs "
                  "without the batch dim need manifest format 2 (this one says 1)", k, t->name);
  }
  return PKRT_OK;
}

static pkrt_status parse_io(parser *P, const cJSON *root, rt_manifest *mf) {
  const cJSON *io = get(root, "io");
  if (!cJSON_IsObject(io)) return fail(P, "io: missing or not an object");
  struct { const char *key; int *dst; bool need; } f[] = {
      {"input", &mf->input, true},        {"output", &mf->output, true},
      {"target", &mf->target_t, mf->train}, {"row_weight", &mf->row_weight, false},
      {"loss", &mf->loss, mf->train},     {"hyper", &mf->hyper, mf->train},
  };
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    int64_t v;
    if (!get_int(P, io, "io", f[i].key, -1, mf->ntensors - 1, f[i].need, -1, &v)) return P->st;
    if (f[i].need && v < 0) return fail(P, "io.%s: missing", f[i].key);
    *f[i].dst = (int)v;
    if (v < 0) continue;
    const rt_tensor *t = &mf->tensors[v];
    if (f[i].dst == &mf->input) continue; /* io.inputs below checks every input */
    /* integer class labels (the cross_entropy loss) */
    if (&mf->target_t == f[i].dst && t->dtype == PKRT_DTYPE_I64 && mf->classes > 0) {
      mf->int_labels = true;
      continue;
    }
    if (t->dtype != mf->dtype)
      return fail(P, "io.%s: tensor '%s' has dtype %s, the model %s", f[i].key, t->name,
                  pkrt_dtype_name(t->dtype), pkrt_dtype_name(mf->dtype));
  }
  /* What the executor writes or reads row by row must be dense with the batch first. */
  int rowwise[] = {mf->input, mf->output, mf->target_t, mf->row_weight};
  const char *names[] = {"input", "output", "target", "row_weight"};
  for (int i = 0; i < 4; i++) {
    if (rowwise[i] < 0) continue;
    const rt_tensor *t = &mf->tensors[rowwise[i]];
    if (t->view || t->ndim < 1 || t->shape[0] != mf->batch)
      return fail(P, "io.%s: tensor '%s' must be dense with the batch (%lld) as its first dim",
                  names[i], t->name, (long long)mf->batch);
  }
  pkrt_status ist = parse_inputs(P, io, mf);
  if (ist != PKRT_OK) return ist;
  if (mf->train && mf->row_weight < 0 && !mf->int_labels)
    return fail(P, "io.row_weight: missing (needed in mode \"train\" unless the target holds "
                "i64 class labels)");
  if (mf->row_weight >= 0 && mf->tensors[mf->row_weight].ndim != 1)
    return fail(P, "io.row_weight: tensor '%s' must have shape (batch)",
                mf->tensors[mf->row_weight].name);
  mf->label_width = 1;
  /* an inference artifact of a per-token classifier: output (batch, T, classes) */
  if (mf->target_t < 0 && mf->classes > 0 && mf->output >= 0 &&
      mf->tensors[mf->output].ndim == 3 &&
      mf->tensors[mf->output].shape[2] == mf->classes)
    mf->label_width = mf->tensors[mf->output].shape[1];
  if (mf->int_labels) {
    const rt_tensor *t = &mf->tensors[mf->target_t];
    if (t->ndim > 2)
      return fail(P, "io.target: tensor '%s' must have shape (batch) or (batch, tokens)",
                  t->name);
    mf->label_width = t->ndim == 2 ? t->shape[1] : 1;
    if (mf->output >= 0 && mf->tensors[mf->output].numel != t->numel * mf->classes)
      return fail(P, "io.output: tensor '%s' must have classes (%lld) elements per label",
                  mf->tensors[mf->output].name, (long long)mf->classes);
  } else if (mf->target_t >= 0 && mf->classes > 0) {
    const rt_tensor *t = &mf->tensors[mf->target_t];
    if (t->ndim != 2 || t->shape[1] != mf->classes)
      return fail(P, "io.target: tensor '%s' must have shape (batch, classes = %lld)", t->name,
                  (long long)mf->classes);
  }
  if (mf->output >= 0 && mf->classes > 0 && mf->tensors[mf->output].numel !=
                                               mf->batch * mf->classes * mf->label_width)
    return fail(P, "io.output: tensor '%s' must have batch x classes elements",
                mf->tensors[mf->output].name);
  if (mf->loss >= 0 && mf->tensors[mf->loss].numel != 1)
    return fail(P, "io.loss: tensor '%s' must have one element", mf->tensors[mf->loss].name);
  if (mf->hyper >= 0 &&
      (mf->tensors[mf->hyper].numel != 4 || mf->tensors[mf->hyper].view))
    return fail(P, "io.hyper: tensor '%s' must be dense with 4 elements",
                mf->tensors[mf->hyper].name);
  /* dropout's (seed, step): integers, so not of the model dtype */
  int64_t rng;
  if (!get_int(P, io, "io", "rng", -1, mf->ntensors - 1, false, -1, &rng)) return P->st;
  mf->rng = (int)rng;
  if (rng >= 0) {
    const rt_tensor *t = &mf->tensors[rng];
    if (t->dtype != PKRT_DTYPE_I64 || t->numel != 2 || t->view)
      return fail(P, "io.rng: tensor '%s' must be a dense i64 tensor of 2 elements (seed, step)",
                  t->name);
  }
  return PKRT_OK;
}

#define MAX_EXTERNS 16

/* "externs": the library kernels the plans call (backend switching); each must be the one
 * call this runtime knows, cblas_sgemm. */
static pkrt_status parse_externs(parser *P, const cJSON *root, rt_manifest *mf) {
  const cJSON *ex = get(root, "externs");
  if (!ex || cJSON_IsNull(ex)) return PKRT_OK;
  if (!cJSON_IsArray(ex)) return fail(P, "externs: must be an array");
  int n = cJSON_GetArraySize(ex);
  if (n > MAX_EXTERNS) return fail(P, "externs: %d entries (at most %d)", n, MAX_EXTERNS);
  mf->nexterns = n;
  mf->externs = pkrt_arena_alloc(P->a, sizeof(rt_extern) * (size_t)(n + 1), 0);
  if (!mf->externs) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
  int i = 0;
  for (const cJSON *e = ex->child; e; e = e->next, i++) {
    char w[32];
    snprintf(w, sizeof w, "externs[%d]", i);
    rt_extern *X = &mf->externs[i];
    if (!cJSON_IsObject(e)) return fail(P, "%s: must be an object", w);
    if (!(X->library = get_str(P, e, w, "library", 1)) ||
        !(X->symbol = get_str(P, e, w, "symbol", 1)) ||
        !(X->signature = get_str(P, e, w, "signature", 1)))
      return P->st;
    if (!*X->library) return fail(P, "%s.library: empty", w);
    /* C artifacts call cblas_sgemm through libffi; CUDA artifacts call cuBLAS's sgemm on
     * device memory (gpu_cublas.c); OpenCL artifacts call no library. */
    if (mf->gpu_api == PKRT_GPU_OPENCL)
      return fail(P, "externs: OpenCL artifacts call no extern kernel");
    const char *sym = mf->gpu_api ? PKRT_CUBLAS_SGEMM_SYM : PKRT_SGEMM_SYM;
    const char *sig = mf->gpu_api ? PKRT_CUBLAS_SGEMM_SIGNATURE : PKRT_SGEMM_SIGNATURE;
    if (strcmp(X->symbol, sym) || strcmp(X->signature, sig))
      return fail(P, "%s: this runtime calls only %s with signature %s in %s artifacts", w,
                  sym, sig, mf->gpu_api ? "CUDA" : "C");
  }
  return PKRT_OK;
}

/* A kernel's "extern" and "sgemm": the call's shape must be a consistent row-major one
 * over three distinct buffers of the kernel. */
static pkrt_status parse_kernel_extern(parser *P, const cJSON *k, const char *w, rt_kernel *K,
                                       const rt_manifest *mf) {
  int64_t ext;
  if (!get_int(P, k, w, "extern", -1, mf->nexterns - 1, 0, -1, &ext)) return P->st;
  K->ext = (int)ext;
  if (ext < 0) return PKRT_OK;
  const cJSON *c = get(k, "sgemm");
  char cw[48];
  snprintf(cw, sizeof cw, "%s.sgemm", w);
  if (!cJSON_IsObject(c)) return fail(P, "%s: missing or not an object", cw);
  static const char *const keys[11] = {"a", "b", "c", "m", "n", "k", "lda", "ldb", "ldc",
                                       "trans_a", "trans_b"};
  int64_t v[11];
  for (int j = 0; j < 11; j++)
    if (!get_int(P, c, cw, keys[j], j < 3 ? 0 : j < 9 ? 1 : 0,
                 j < 3 ? K->nbufs - 1 : j < 9 ? INT32_MAX : 1, 1, 0, &v[j]))
      return P->st;
  rt_sgemm *g = &K->sgemm;
  *g = (rt_sgemm){.a = (int)v[0], .b = (int)v[1], .c = (int)v[2], .m = (int32_t)v[3],
                  .n = (int32_t)v[4], .k = (int32_t)v[5], .lda = (int32_t)v[6],
                  .ldb = (int32_t)v[7], .ldc = (int32_t)v[8], .trans_a = v[9] != 0,
                  .trans_b = v[10] != 0};
  if (g->a == g->b || g->a == g->c || g->b == g->c)
    return fail(P, "%s: a, b and c must be three different buffers", cw);
  if (g->lda != (g->trans_a ? g->m : g->k) || g->ldb != (g->trans_b ? g->k : g->n) ||
      g->ldc != g->n)
    return fail(P, "%s: lda, ldb, ldc do not match dense row-major operands of m, n, k", cw);
  return PKRT_OK;
}

/* A GPU kernel's launch (format 3): scalars, grid, block and dynamic shared memory. */
static pkrt_status parse_launch(parser *P, const cJSON *k, const char *w, rt_kernel *K) {
  pkrt_gpu_kernel_desc *d = &K->gdesc;
  int64_t v;
  d->name = K->name;
  d->nbufs = K->nbufs;
  d->workspace_bytes = K->workspace;
  if (!get_int(P, k, w, "nscalars", 0, MAX_SCALARS, 1, 0, &v)) return P->st;
  d->nscalars = (int32_t)v;
  if (!get_int(P, k, w, "shared", 0, 1 << 20, 0, 0, &v)) return P->st;
  d->shared_bytes = (uint32_t)v;
  const char *keys[2] = {"grid", "block"};
  for (int j = 0; j < 2; j++) {
    const cJSON *a = get(k, keys[j]);
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != 3)
      return fail(P, "%s.%s: must be 3 integers", w, keys[j]);
    for (int i = 0; i < 3; i++) {
      if (!as_int(cJSON_GetArrayItem(a, i), 1, INT32_MAX, &v))
        return fail(P, "%s.%s[%d]: must be an integer in [1, %d]", w, keys[j], i, INT32_MAX);
      (j ? d->block : d->grid)[i] = (uint32_t)v;
    }
  }
  return PKRT_OK;
}

static pkrt_status parse_kernels(parser *P, const cJSON *root, rt_manifest *mf) {
  if (parse_externs(P, root, mf) != PKRT_OK) return P->st;
  const cJSON *ks = get(root, "kernels");
  if (!cJSON_IsArray(ks)) return fail(P, "kernels: missing or not an array");
  int n = cJSON_GetArraySize(ks);
  if (n > MAX_KERNELS) return fail(P, "kernels: %d entries (at most %d)", n, MAX_KERNELS);
  mf->nkernels = n;
  mf->kernels = pkrt_arena_alloc(P->a, sizeof(rt_kernel) * (size_t)(n + 1), 0);
  if (!mf->kernels) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
  int i = 0;
  for (const cJSON *k = ks->child; k; k = k->next, i++) {
    char w[32];
    snprintf(w, sizeof w, "kernels[%d]", i);
    rt_kernel *K = &mf->kernels[i];
    K->first_step_plan = -1;
    if (!cJSON_IsObject(k)) return fail(P, "%s: must be an object", w);
    if (!(K->name = get_str(P, k, w, "name", 1))) return P->st;
    if (!*K->name) return fail(P, "%s.name: empty", w);
    int64_t v;
    if (!get_int(P, k, w, "nbufs", 0, MAX_NBUFS, 1, 0, &v)) return P->st;
    K->nbufs = (int)v;
    if (!get_int(P, k, w, "workspace", 0, MAX_BYTES, 0, 0, &K->workspace)) return P->st;
    if (K->workspace > mf->workspace_bytes)
      return fail(P, "%s.workspace: %lld bytes, more than regions.workspace (%lld)", w,
                  (long long)K->workspace, (long long)mf->workspace_bytes);
    if (parse_kernel_extern(P, k, w, K, mf) != PKRT_OK) return P->st;
    /* a cuBLAS call is no launch of the artifact's module */
    if (mf->gpu_api && K->ext < 0 && parse_launch(P, k, w, K) != PKRT_OK) return P->st;
  }
  return PKRT_OK;
}

static pkrt_status parse_optimizer(parser *P, const cJSON *root, rt_manifest *mf) {
  rt_optimizer *o = &mf->opt;
  o->kind = "sgd";
  o->beta1 = 0.9;
  o->beta2 = 0.999;
  o->gamma = 1;
  const cJSON *j = get(root, "optimizer");
  if (!j || cJSON_IsNull(j)) {
    if (mf->train) return fail(P, "optimizer: missing (needed in mode \"train\")");
    return PKRT_OK;
  }
  if (!cJSON_IsObject(j)) return fail(P, "optimizer: must be an object");
  if (!(o->kind = get_str(P, j, "optimizer", "kind", 1))) return P->st;
  if (strcmp(o->kind, "sgd") && strcmp(o->kind, "adam") && strcmp(o->kind, "adamw"))
    return fail(P, "optimizer.kind: unknown optimizer '%s' (sgd, adam, adamw)", o->kind);
  if (!get_num(P, j, "optimizer", "lr", 0, 1e6, 1, 0, &o->lr) ||
      !get_num(P, j, "optimizer", "beta1", 0, 0.999999999, 0, 0.9, &o->beta1) ||
      !get_num(P, j, "optimizer", "beta2", 0, 0.999999999, 0, 0.999, &o->beta2))
    return P->st;
  if (!get_int(P, j, "optimizer", "accum_steps", 1, INT32_MAX, 0, 1, &o->accum_steps))
    return P->st;
  const cJSON *s = get(j, "schedule");
  if (!s || cJSON_IsNull(s)) return PKRT_OK;
  if (!cJSON_IsObject(s)) return fail(P, "optimizer.schedule: must be an object");
  const char *kind = get_str(P, s, "optimizer.schedule", "kind", 1);
  if (!kind) return P->st;
  const char *w = "optimizer.schedule";
  if (!get_int(P, s, w, "step_size", 0, INT64_C(1) << 50, 0, 0, &o->step_size) ||
      !get_int(P, s, w, "total_steps", 0, INT64_C(1) << 50, 0, 0, &o->total_steps) ||
      !get_int(P, s, w, "warmup_steps", 0, INT64_C(1) << 50, 0, 0, &o->warmup_steps) ||
      !get_num(P, s, w, "gamma", 0, 1e6, 0, 1, &o->gamma) ||
      !get_num(P, s, w, "min_lr", 0, 1e6, 0, 0, &o->min_lr))
    return P->st;
  if (strcmp(kind, "constant") == 0) {
    o->sched = RT_SCHED_CONSTANT;
  } else if (strcmp(kind, "step") == 0) {
    o->sched = RT_SCHED_STEP;
    if (o->step_size < 1) return fail(P, "%s.step_size: must be >= 1 for kind \"step\"", w);
  } else if (strcmp(kind, "cosine") == 0) {
    o->sched = RT_SCHED_COSINE;
    if (o->total_steps < 1) return fail(P, "%s.total_steps: must be >= 1 for kind \"cosine\"", w);
    if (o->warmup_steps > 0 && o->total_steps <= o->warmup_steps)
      return fail(P, "%s.total_steps: must exceed warmup_steps for kind \"cosine\"", w);
  } else {
    return fail(P, "%s.kind: unknown schedule '%s' (constant, step, cosine)", w, kind);
  }
  return PKRT_OK;
}

/* Two calls of one kernel must pass buffers of the same dtype, shape and strides: a
 * kernel is specialised for them (it checks on entry; this finds it at open). */
static pkrt_status check_signature(parser *P, rt_manifest *mf, int p, int s) {
  const rt_step *st = &mf->plans[p].steps[s];
  rt_kernel *K = &mf->kernels[st->kernel];
  if (K->first_step_plan < 0) {
    K->first_step_plan = p;
    K->first_step = s;
    return PKRT_OK;
  }
  const rt_step *f = &mf->plans[K->first_step_plan].steps[K->first_step];
  for (int b = 0; b < st->nbufs; b++) {
    const rt_tensor *x = &mf->tensors[st->tensors[b]], *y = &mf->tensors[f->tensors[b]];
    bool same = x->dtype == y->dtype && x->ndim == y->ndim;
    for (int d = 0; same && d < x->ndim; d++)
      same = x->shape[d] == y->shape[d] && x->strides[d] == y->strides[d];
    if (!same)
      return fail(P, "plans.%s[%d].buffers[%d]: tensor '%s' does not match what kernel '%s' "
                     "takes there (tensor '%s' in plans.%s[%d]: dtype, shape or strides differ)",
                  rt_plan_names[p], s, b, x->name, K->name, y->name,
                  rt_plan_names[K->first_step_plan], K->first_step);
  }
  return PKRT_OK;
}

/* "cache" (optional; `pock compile --cache-frozen`): {"prefix_steps": K, "tensors": [ids],
 * "per_row": [bools]}: the train plan's first K steps are the frozen prefix, the tensors
 * its results that later steps read (arena tensors with storage of their own; per-row
 * ones start with the batch dimension). */
static pkrt_status parse_cache(parser *P, const cJSON *root, rt_manifest *mf) {
  const cJSON *c = get(root, "cache");
  if (!c || cJSON_IsNull(c)) return PKRT_OK;
  if (!cJSON_IsObject(c)) return fail(P, "cache: must be an object");
  if (!mf->train) return fail(P, "cache: an inference artifact has no training step to cache");
  int64_t k;
  if (!get_int(P, c, "cache", "prefix_steps", 1, mf->plans[RT_PLAN_TRAIN].n - 1, 1, 0, &k))
    return P->st;
  const cJSON *ts = get(c, "tensors"), *rows = get(c, "per_row");
  if (!cJSON_IsArray(ts) || !cJSON_IsArray(rows) ||
      cJSON_GetArraySize(ts) != cJSON_GetArraySize(rows) || cJSON_GetArraySize(ts) < 1)
    return fail(P, "cache: tensors and per_row must be arrays of one length >= 1");
  int n = cJSON_GetArraySize(ts);
  mf->cache_tensors = pkrt_arena_alloc(P->a, sizeof(int) * (size_t)n, 0);
  mf->cache_per_row = pkrt_arena_alloc(P->a, sizeof(bool) * (size_t)n, 0);
  if (!mf->cache_tensors || !mf->cache_per_row)
    return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
  const cJSON *t = ts->child, *r = rows->child;
  for (int i = 0; i < n; i++, t = t->next, r = r->next) {
    int64_t v;
    if (!as_int(t, 0, mf->ntensors - 1, &v))
      return fail(P, "cache.tensors[%d]: must be a tensor index in [0, %d]", i, mf->ntensors - 1);
    const rt_tensor *x = &mf->tensors[v];
    if (x->region != RT_REGION_ARENA || x->base >= 0 || x->view)
      return fail(P, "cache.tensors[%d]: tensor '%s' is not an arena tensor with storage of "
                  "its own", i, x->name);
    if (!cJSON_IsBool(r)) return fail(P, "cache.per_row[%d]: must be true or false", i);
    mf->cache_per_row[i] = cJSON_IsTrue(r);
    if (mf->cache_per_row[i] && (x->ndim < 1 || x->shape[0] != mf->batch))
      return fail(P, "cache.tensors[%d]: tensor '%s' is per row but does not start with the "
                  "batch dimension (%lld)", i, x->name, (long long)mf->batch);
    mf->cache_tensors[i] = (int)v;
  }
  mf->ncache = n;
  mf->cache_prefix = (int)k;
  return PKRT_OK;
}

static pkrt_status parse_plans(parser *P, const cJSON *root, rt_manifest *mf) {
  const cJSON *plans = get(root, "plans");
  if (!cJSON_IsObject(plans)) return fail(P, "plans: missing or not an object");
  for (int p = 0; p < RT_PLAN_COUNT_; p++) {
    const cJSON *pl = get(plans, rt_plan_names[p]);
    rt_plan *plan = &mf->plans[p];
    if (!pl || cJSON_IsNull(pl)) {
      if (p == RT_PLAN_INFER || (p == RT_PLAN_TRAIN && mf->train))
        return fail(P, "plans.%s: missing", rt_plan_names[p]);
      continue;
    }
    if (!cJSON_IsArray(pl)) return fail(P, "plans.%s: must be an array", rt_plan_names[p]);
    int n = cJSON_GetArraySize(pl);
    if (n > MAX_STEPS) return fail(P, "plans.%s: %d steps (at most %d)", rt_plan_names[p], n,
                                   MAX_STEPS);
    plan->present = true;
    plan->n = n;
    plan->steps = pkrt_arena_alloc(P->a, sizeof(rt_step) * (size_t)(n + 1), 0);
    if (!plan->steps) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
    int s = 0;
    for (const cJSON *j = pl->child; j; j = j->next, s++) {
      char w[48];
      snprintf(w, sizeof w, "plans.%s[%d]", rt_plan_names[p], s);
      rt_step *st = &plan->steps[s];
      if (!cJSON_IsObject(j)) return fail(P, "%s: must be an object", w);
      int64_t k;
      if (mf->nkernels == 0) return fail(P, "%s.kernel: the manifest lists no kernels", w);
      if (!get_int(P, j, w, "kernel", 0, mf->nkernels - 1, 1, 0, &k)) return P->st;
      st->kernel = (int)k;
      const cJSON *bufs = get(j, "buffers");
      if (!cJSON_IsArray(bufs)) return fail(P, "%s.buffers: missing or not an array", w);
      st->nbufs = cJSON_GetArraySize(bufs);
      if (st->nbufs != mf->kernels[k].nbufs)
        return fail(P, "%s.buffers: %d buffers, kernel '%s' takes %d", w, st->nbufs,
                    mf->kernels[k].name, mf->kernels[k].nbufs);
      st->tensors = pkrt_arena_alloc(P->a, sizeof(int) * (size_t)(st->nbufs + 1), 0);
      if (!st->tensors) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
      int b = 0;
      for (const cJSON *x = bufs->child; x; x = x->next, b++) {
        int64_t v;
        if (!as_int(x, 0, mf->ntensors - 1, &v))
          return fail(P, "%s.buffers[%d]: must be a tensor index in [0, %d]", w, b,
                      mf->ntensors - 1);
        st->tensors[b] = (int)v;
      }
      const cJSON *sc = get(j, "scalars");
      if (sc && !cJSON_IsNull(sc)) {
        if (!cJSON_IsArray(sc) || cJSON_GetArraySize(sc) > MAX_SCALARS)
          return fail(P, "%s.scalars: must be an array of at most %d integers", w, MAX_SCALARS);
        st->nscalars = cJSON_GetArraySize(sc);
        st->scalars = pkrt_arena_alloc(P->a, sizeof(int64_t) * (size_t)(st->nscalars + 1), 0);
        if (!st->scalars) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
        int q = 0;
        for (const cJSON *x = sc->child; x; x = x->next, q++)
          if (!as_int(x, -(INT64_C(1) << 53), INT64_C(1) << 53, &st->scalars[q]))
            return fail(P, "%s.scalars[%d]: must be an integer", w, q);
      }
      const cJSON *node = get(j, "node");
      st->node = cJSON_IsString(node) && node->valuestring
                     ? pkrt_arena_strdup(P->a, node->valuestring) : "";
      if (!st->node) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
      if (check_signature(P, mf, p, s) != PKRT_OK) return P->st;
    }
  }
  return PKRT_OK;
}

static pkrt_status parse_fingerprint(parser *P, const cJSON *root, rt_manifest *mf) {
  const cJSON *fp = get(root, "fingerprint");
  if (!fp || cJSON_IsNull(fp)) return PKRT_OK;
  if (!cJSON_IsObject(fp)) return fail(P, "fingerprint: must be an object");
  const cJSON *mm = get(fp, "must_match");
  if (!mm || cJSON_IsNull(mm)) return PKRT_OK;
  if (!cJSON_IsObject(mm)) return fail(P, "fingerprint.must_match: must be an object");
  mf->arch = get_str(P, mm, "fingerprint.must_match", "arch", 0);
  if (P->st != PKRT_OK) return P->st;
  const cJSON *isa = get(mm, "isa");
  if (!isa || cJSON_IsNull(isa)) return PKRT_OK;
  if (!cJSON_IsArray(isa) || cJSON_GetArraySize(isa) > 256)
    return fail(P, "fingerprint.must_match.isa: must be an array of feature names");
  mf->nisa = cJSON_GetArraySize(isa);
  mf->isa = pkrt_arena_alloc(P->a, sizeof(char *) * (size_t)(mf->nisa + 1), 0);
  if (!mf->isa) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
  int i = 0;
  for (const cJSON *x = isa->child; x; x = x->next, i++) {
    if (!cJSON_IsString(x) || !x->valuestring || !*x->valuestring)
      return fail(P, "fingerprint.must_match.isa[%d]: must be a feature name", i);
    if (!(mf->isa[i] = pkrt_arena_strdup(P->a, x->valuestring)))
      return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
  }
  return PKRT_OK;
}

/* "gpu" (format 3): the API, the alignment the plan placed every buffer at, CUDA's arch,
 * OpenCL's binary. */
static pkrt_status parse_gpu(parser *P, const cJSON *root, rt_manifest *mf) {
  const cJSON *g = get(root, "gpu");
  if (!cJSON_IsObject(g)) return fail(P, "gpu: missing or not an object (a GPU target's)");
  const char *api = get_str(P, g, "gpu", "api", 1);
  if (!api) return P->st;
  mf->gpu_api = !strcmp(api, "cuda") ? PKRT_GPU_CUDA : !strcmp(api, "opencl") ? PKRT_GPU_OPENCL : 0;
  if (!mf->gpu_api || strncmp(api, mf->target, strlen(api)))
    return fail(P, "gpu.api: '%s' is not the target's API", api);
  if (!get_int(P, g, "gpu", "align", 64, 1 << 20, 1, 0, &mf->gpu_align)) return P->st;
  if (mf->gpu_align & (mf->gpu_align - 1)) return fail(P, "gpu.align: not a power of two");
  if (mf->gpu_api == PKRT_GPU_CUDA && !(mf->gpu_arch = get_str(P, g, "gpu", "arch", 1)))
    return P->st;
  /* OpenCL: the device the "kernels.clbin" section was built for (all four strings) */
  const cJSON *b = get(g, "binary");
  if (!b || cJSON_IsNull(b) || mf->gpu_api != PKRT_GPU_OPENCL) return PKRT_OK;
  if (!cJSON_IsObject(b)) return fail(P, "gpu.binary: must be an object");
  pkrt_gpu_binary_for *f = &mf->gpu_binary;
  if (!(f->device = get_str(P, b, "gpu.binary", "device", 1)) ||
      !(f->version = get_str(P, b, "gpu.binary", "version", 1)) ||
      !(f->driver = get_str(P, b, "gpu.binary", "driver", 1)) ||
      !(f->platform = get_str(P, b, "gpu.binary", "platform", 1)))
    return P->st;
  return PKRT_OK;
}

static pkrt_status parse_root(parser *P, const cJSON *root, size_t weights_bytes,
                              rt_manifest *mf) {
  if (!cJSON_IsObject(root)) return fail(P, "the top level must be a JSON object");
  int64_t v;
  const cJSON *fmt = get(root, "format");
  if (!fmt) return fail(P, "format: missing");
  /* The error names the version, so a fleet device says which runtime a file needs. */
  if (!as_int(fmt, 0, INT32_MAX, &v))
    return fail(P, "format: must be an integer manifest version (this runtime reads 1 to 3)");
  if (v < 1 || v > 3)
    return fail(P, "format: manifest version %lld is not supported (this runtime reads 1 to 3)",
                (long long)v);
  mf->format = (int)v;
  if (!(mf->target = get_str(P, root, "", "target", 1))) return P->st;
  /* "c" optionally followed by flags such as "-march=znver4"; GPU targets in format 3 */
  bool c = strcmp(mf->target, "c") == 0 || strncmp(mf->target, "c ", 2) == 0;
  if (!c && strcmp(mf->target, "opencl") != 0 && strncmp(mf->target, "cuda ", 5) != 0)
    return fail(P, "target: '%s' is not supported by this runtime (c, cuda, opencl)",
                mf->target);
  if (c == (mf->format == 3))
    return fail(P, "format: %d, but target '%s' needs %s", mf->format, mf->target,
                c ? "format 1 or 2" : "format 3");
  if (!c && parse_gpu(P, root, mf) != PKRT_OK) return P->st;
  if (parse_fingerprint(P, root, mf) != PKRT_OK) return P->st;
  const char *mode = get_str(P, root, "", "mode", 1);
  if (!mode) return P->st;
  if (strcmp(mode, "train") == 0) mf->train = true;
  else if (strcmp(mode, "inference") != 0)
    return fail(P, "mode: '%s' is neither \"train\" nor \"inference\"", mode);
  const char *dt = get_str(P, root, "", "dtype", 1);
  if (!dt) return P->st;
  mf->dtype = pkrt_dtype_from_name(dt);
  if (mf->dtype != PKRT_DTYPE_F32 && mf->dtype != PKRT_DTYPE_F64)
    return fail(P, "dtype: '%s' (models are f32 or f64)", dt);
  if (!get_int(P, root, "", "batch", 1, INT32_MAX, 1, 0, &mf->batch) ||
      !get_int(P, root, "", "classes", 0, INT32_MAX, 1, 0, &mf->classes))
    return P->st;
  /* optional: the label value a classification loss ignores (PyTorch's ignore_index) */
  mf->has_ignore_index = get(root, "ignore_index") != NULL;
  if (mf->has_ignore_index && !get_int(P, root, "", "ignore_index", -INT32_MAX, INT32_MAX, 1,
                                       0, &mf->ignore_index))
    return P->st;
  const cJSON *rg = get(root, "regions");
  if (!cJSON_IsObject(rg)) return fail(P, "regions: missing or not an object");
  for (int r = 0; r < RT_REGION_COUNT_; r++)
    if (!get_int(P, rg, "regions", rt_region_names[r], 0, MAX_BYTES, r != RT_REGION_BUFFERS, 0,
                 &mf->region_bytes[r]))
      return P->st;
  if (!get_int(P, rg, "regions", "workspace", 0, MAX_BYTES, 1, 0, &mf->workspace_bytes))
    return P->st;
  int64_t want = mf->region_bytes[RT_REGION_PARAMS] + mf->region_bytes[RT_REGION_STATE] +
                 mf->region_bytes[RT_REGION_BUFFERS];
  if ((uint64_t)want != weights_bytes)
    return fail(P, "regions: params + state + buffers = %lld bytes, but the weights section "
                "has %zu", (long long)want, weights_bytes);
  const cJSON *ts = get(root, "tensors");
  if (!cJSON_IsArray(ts)) return fail(P, "tensors: missing or not an array");
  int n = cJSON_GetArraySize(ts);
  if (n < 1 || n > MAX_TENSORS) return fail(P, "tensors: %d entries (1..%d)", n, MAX_TENSORS);
  mf->ntensors = n;
  mf->tensors = pkrt_arena_alloc(P->a, sizeof(rt_tensor) * (size_t)n, 0);
  if (!mf->tensors) return pkrt_ctx_fail(P->rt, PKRT_ERR_NOMEM, "manifest: out of memory");
  int i = 0;
  for (const cJSON *t = ts->child; t; t = t->next, i++)
    if (parse_tensor(P, t, i, mf) != PKRT_OK) return P->st;
  if (check_bases(P, mf) != PKRT_OK || parse_io(P, root, mf) != PKRT_OK ||
      parse_kernels(P, root, mf) != PKRT_OK || parse_optimizer(P, root, mf) != PKRT_OK ||
      parse_plans(P, root, mf) != PKRT_OK || parse_cache(P, root, mf) != PKRT_OK)
    return P->st;
  return PKRT_OK;
}

pkrt_status rt_manifest_parse(pkrt_ctx *rt, pkrt_arena *a, const char *json, size_t len,
                              size_t weights_bytes, rt_manifest *out) {
  memset(out, 0, sizeof *out);
  out->input = out->target_t = out->row_weight = out->output = out->loss = out->hyper = -1;
  out->rng = -1;
  parser P = {rt, a, PKRT_OK};
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, 0);
  if (!root) {
    size_t at = end && end >= json && end <= json + len ? (size_t)(end - json) : 0;
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "manifest: not valid JSON (near byte %zu)", at);
  }
  pkrt_status st = parse_root(&P, root, weights_bytes, out);
  cJSON_Delete(root);
  return st;
}
