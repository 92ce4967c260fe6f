/* test_random_te.c — property test: random well-formed TE programs (random arithmetic over
 * random reads, random reductions, floor division/modulo on indices, random shapes and
 * dtypes) compiled to C, many kernels per source file, each equal to the interpreter.
 * Programs are generated as text, so the parser and checker are exercised too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"

#define NPROGRAMS 240
#define BATCH 60

typedef struct rng { uint64_t s; } rng;
static uint64_t next_u64(rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int pick(rng *r, int n) { return (int)(next_u64(r) % (uint64_t)n); }

typedef struct tensor_info {
  char name[8];
  int ndim;
  int64_t shape[3];
  const char *dtype;
  bool is_input; /* values are exact: safe to compare and to cast to int */
} tensor_info;

typedef struct gen {
  rng r;
  pk_strbuf *out;
  tensor_info t[8];
  int nt;
  /* axes in scope while generating a body */
  const char *axes[6];
  int naxes;
} gen;

static const int64_t extents[] = {1, 2, 3, 5, 7, 8, 13, 33};
static bool is_float(const char *dt) { return dt[0] == 'f'; }

/* An index expression always inside [0, extent): floor modulo by the extent, over random
 * integer arithmetic on the axes in scope (which can go negative). */
static void gen_index(gen *g, int64_t extent) {
  pk_strbuf *o = g->out;
  const char *a = g->axes[pick(&g->r, g->naxes)];
  const char *b = g->axes[pick(&g->r, g->naxes)];
  switch (pick(&g->r, 6)) {
  case 0: pk_strbuf_printf(o, "%s %% %lld", a, (long long)extent); break;
  case 1: pk_strbuf_printf(o, "(%s * %d - %s * %d + %d) %% %lld", a, 1 + pick(&g->r, 5), b,
                           1 + pick(&g->r, 7), pick(&g->r, 9) - 4, (long long)extent); break;
  case 2: pk_strbuf_printf(o, "((%s - %d) / %d) %% %lld", a, pick(&g->r, 11), 1 + pick(&g->r, 3),
                           (long long)extent); break;
  case 3: pk_strbuf_printf(o, "min(%s, %lld)", a, (long long)extent - 1); break;
  case 4: pk_strbuf_printf(o, "max(min(%s - %d, %lld), 0)", a, pick(&g->r, 4), (long long)extent - 1); break;
  default: pk_strbuf_printf(o, "(%s + %s * %d) %% %lld", a, b, pick(&g->r, 5) - 2, (long long)extent); break;
  }
}

static void gen_read(gen *g, const tensor_info *t) {
  pk_strbuf_printf(g->out, "%s[", t->name);
  for (int d = 0; d < t->ndim; d++) {
    if (d) pk_strbuf_append(g->out, ", ");
    gen_index(g, t->shape[d]);
  }
  pk_strbuf_append(g->out, "]");
}

/* A read of some earlier tensor converted to dtype (exact conversions only). */
static void gen_leaf(gen *g, const char *dtype) {
  pk_strbuf *o = g->out;
  int choice = pick(&g->r, 10);
  if (choice == 0) {
    if (is_float(dtype)) pk_strbuf_printf(o, "%d.%d", pick(&g->r, 4), pick(&g->r, 10));
    else pk_strbuf_printf(o, "%d", pick(&g->r, 19) - 9);
    return;
  }
  if (choice == 1 && !is_float(dtype)) { /* an axis value */
    pk_strbuf_printf(o, "cast(%s, %s)", dtype, g->axes[pick(&g->r, g->naxes)]);
    return;
  }
  const tensor_info *t = &g->t[pick(&g->r, g->nt)];
  if (!strcmp(t->dtype, dtype)) { gen_read(g, t); return; }
  if (is_float(dtype) || t->is_input) {
    /* float -> int only from exact input values scaled by a power of two */
    pk_strbuf_printf(o, "cast(%s, ", dtype);
    if (!is_float(dtype) && is_float(t->dtype)) {
      gen_read(g, t);
      pk_strbuf_append(o, " * 4.0)");
    } else {
      gen_read(g, t);
      pk_strbuf_append(o, ")");
    }
    return;
  }
  pk_strbuf_printf(o, "%d", pick(&g->r, 7) - 3);
}

static void gen_expr(gen *g, const char *dtype, int depth) {
  pk_strbuf *o = g->out;
  if (depth <= 0) { gen_leaf(g, dtype); return; }
  bool fl = is_float(dtype);
  int choice = pick(&g->r, fl ? 12 : 9);
  switch (choice) {
  case 0: case 1: case 2: {
    static const char *ops[] = {"+", "-", "*"};
    pk_strbuf_append(o, "(");
    gen_expr(g, dtype, depth - 1);
    pk_strbuf_printf(o, " %s ", ops[choice]);
    gen_expr(g, dtype, depth - 1);
    pk_strbuf_append(o, ")");
    return;
  }
  case 3:
    pk_strbuf_printf(o, "%s(", pick(&g->r, 2) ? "min" : "max");
    gen_expr(g, dtype, depth - 1);
    pk_strbuf_append(o, ", ");
    gen_expr(g, dtype, depth - 1);
    pk_strbuf_append(o, ")");
    return;
  case 4: /* a guard on integer axis values: exact in both kernel and interpreter */
    pk_strbuf_printf(o, "select(%s %s %d, ", g->axes[pick(&g->r, g->naxes)],
                     pick(&g->r, 2) ? "<" : ">=", pick(&g->r, 6));
    gen_expr(g, dtype, depth - 1);
    pk_strbuf_append(o, ", ");
    gen_expr(g, dtype, depth - 1);
    pk_strbuf_append(o, ")");
    return;
  case 5:
    pk_strbuf_append(o, "-");
    gen_leaf(g, dtype);
    return;
  case 6:
    if (fl) { /* division away from zero */
      pk_strbuf_append(o, "(");
      gen_expr(g, dtype, depth - 1);
      pk_strbuf_append(o, " / (abs(");
      gen_expr(g, dtype, depth - 1);
      pk_strbuf_append(o, ") + 1.0))");
    } else { /* floor division/modulo, zero and negative divisors included */
      pk_strbuf_append(o, "(");
      gen_expr(g, dtype, depth - 1);
      pk_strbuf_printf(o, " %s ", pick(&g->r, 2) ? "/" : "%");
      gen_expr(g, dtype, depth - 1);
      pk_strbuf_append(o, ")");
    }
    return;
  case 7:
    pk_strbuf_append(o, "abs(");
    gen_expr(g, dtype, depth - 1);
    pk_strbuf_append(o, ")");
    return;
  case 8:
    gen_leaf(g, dtype);
    return;
  default: { /* intrinsics, arguments kept in their domains */
    static const char *wrap[][2] = {{"tanh(", ")"}, {"sigmoid(", ")"}, {"exp(tanh(", "))"},
                                    {"sqrt(abs(", ") + 0.5)"}, {"log(abs(", ") + 1.0)"},
                                    {"erf(", ")"}, {"pow(abs(", ") + 0.5, 1.5)"},
                                    {"rsqrt(abs(", ") + 0.25)"}};
    int w = pick(&g->r, 8);
    pk_strbuf_append(o, wrap[w][0]);
    gen_expr(g, dtype, depth - 1);
    pk_strbuf_append(o, wrap[w][1]);
    return;
  }
  }
}

static const char *pick_dtype(gen *g) {
  static const char *dts[] = {"f32", "f32", "f32", "f64", "i32", "i64"};
  return dts[pick(&g->r, 6)];
}

static void add_tensor(gen *g, const char *dtype, bool input, int ndim) {
  tensor_info *t = &g->t[g->nt];
  snprintf(t->name, sizeof t->name, "%c%d", input ? 'P' : 'C', g->nt);
  t->ndim = ndim;
  t->dtype = dtype;
  t->is_input = input;
  for (int d = 0; d < ndim; d++) t->shape[d] = extents[pick(&g->r, 8)];
  g->nt++;
}

static void print_shape(pk_strbuf *o, const tensor_info *t) {
  pk_strbuf_append(o, "(");
  for (int d = 0; d < t->ndim; d++) pk_strbuf_printf(o, "%s%lld", d ? ", " : "", (long long)t->shape[d]);
  pk_strbuf_append(o, t->ndim == 1 ? ",)" : ")");
}

static void gen_program(gen *g, pk_strbuf *o) {
  g->out = o;
  g->nt = 0;
  int ninputs = 1 + pick(&g->r, 3);
  for (int i = 0; i < ninputs; i++) {
    add_tensor(g, pick_dtype(g), true, 1 + pick(&g->r, 3));
    pk_strbuf_printf(o, "%s = placeholder(", g->t[i].name);
    print_shape(o, &g->t[i]);
    pk_strbuf_printf(o, ", %s)\n", g->t[i].dtype);
  }
  int ncomputes = 1 + pick(&g->r, 2);
  for (int c = 0; c < ncomputes; c++) {
    const char *dtype = pick_dtype(g);
    tensor_info *t = &g->t[g->nt];
    add_tensor(g, dtype, false, 1 + pick(&g->r, 3));
    g->nt--; /* a compute reads only earlier tensors */
    static const char *names[] = {"i", "j", "l"};
    g->naxes = t->ndim;
    for (int d = 0; d < t->ndim; d++) g->axes[d] = names[d];
    int nred = pick(&g->r, 3);
    /* reduce axes are named r<k><compute>, so each compute declares its own */
    char rn[2][8];
    for (int k = 0; k < nred; k++) {
      snprintf(rn[k], sizeof rn[k], "r%d%d", k, c);
      int64_t lo = pick(&g->r, 3) == 0 ? 2 : 0;
      g->axes[g->naxes++] = rn[k];
      pk_strbuf_printf(o, "%s = reduce_axis(%lld, %lld)\n", rn[k], (long long)lo,
                       (long long)(lo + extents[pick(&g->r, 8)]));
    }
    pk_strbuf_printf(o, "%s = compute(", t->name);
    print_shape(o, t);
    pk_strbuf_append(o, ", (");
    for (int d = 0; d < t->ndim; d++) pk_strbuf_printf(o, "%s%s", d ? ", " : "", names[d]);
    pk_strbuf_append(o, ") => ");
    if (nred) {
      static const char *reducers[] = {"sum", "max", "min", "sum"};
      pk_strbuf_printf(o, "%s(", reducers[pick(&g->r, 4)]);
    }
    gen_expr(g, dtype, 1 + pick(&g->r, 3));
    if (nred) {
      for (int k = 0; k < nred; k++) pk_strbuf_printf(o, ", %s", rn[k]);
      pk_strbuf_append(o, ")");
    }
    pk_strbuf_append(o, ")\n");
    g->nt++;
  }
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_cc_options opts = {NULL, NULL, PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  gen g = {.r = {20261130}};
  int failures = 0, checked = 0;
  for (int base = 0; base < NPROGRAMS; base += BATCH) {
    pk_te_program *progs[BATCH];
    char *texts[BATCH];
    int n = 0, attempts = 0;
    /* a generator that writes ill-formed text fails the test; it must not spin forever */
    while (n < BATCH && base + n < NPROGRAMS && attempts++ < 2 * BATCH) {
      pk_strbuf sb;
      pk_strbuf_init(&sb);
      gen_program(&g, &sb);
      texts[n] = pk_strbuf_finish(ctx, &sb);
      if (pk_te_parse(ctx, texts[n], strlen(texts[n]), "random.te", &progs[n]) != PK_OK) {
        printf("FAIL random program %d does not check: %s\n%s\n", base + n, pk_ctx_error(ctx), texts[n]);
        pk_ctx_clear_error(ctx);
        failures++;
        continue;
      }
      n++;
    }
    pkrt_module *m;
    if (pk_build_programs(ctx, cc, rt, progs, n, &m) != PK_OK) {
      printf("FAIL build of batch %d: %s\n", base / BATCH, pk_ctx_error(ctx));
      return 1;
    }
    for (int i = 0; i < n; i++) {
      char name[16];
      snprintf(name, sizeof name, "k%d", i);
      pk_kernel_check_result res;
      if (pk_kernel_check(ctx, rt, progs[i], pkrt_module_find(m, name), 7 + (uint64_t)i, &res) != PK_OK) {
        printf("FAIL random program %d: %s\n%s\n", base + i, pk_ctx_error(ctx), texts[i]);
        pk_ctx_clear_error(ctx);
        failures++;
      }
      checked++;
    }
    pkrt_module_free(m);
  }
  printf("%s random_te: %d programs checked against the interpreter, %d failures\n",
         failures ? "FAIL" : "PASS", checked, failures);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return failures ? 1 : 0;
}
