/* extern_call.c — calls a C function named by library, symbol and signature text through
 * libffi, so the runtime can use whichever extern kernel (OpenBLAS, ...) won tuning
 * without linking it. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <ffi.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"

#define EXTERN_MAX_ARGS 32 /* cblas_sgemm has 14; more suggests a garbled signature */

struct pkrt_extern {
  void *lib;
  void (*fn)(void);
  ffi_cif cif;
  ffi_type *ret;
  int nargs;
  ffi_type *args[EXTERN_MAX_ARGS];
};

/* type := "void" | "i32" | "i64" | "f32" | "f64" | "ptr" */
static ffi_type *type_of(const char *tok, size_t len) {
  static const struct {
    const char *name;
    ffi_type *type;
  } types[] = {{"void", &ffi_type_void}, {"i32", &ffi_type_sint32},
               {"i64", &ffi_type_sint64}, {"f32", &ffi_type_float},
               {"f64", &ffi_type_double}, {"ptr", &ffi_type_pointer}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strlen(types[i].name) == len && memcmp(types[i].name, tok, len) == 0)
      return types[i].type;
  return NULL;
}

static const char *skip_space(const char *p) {
  while (isspace((unsigned char)*p)) p++;
  return p;
}

/* Reads one type token at *p into *type; on failure reports it, naming the token. */
static pkrt_status parse_type(pkrt_ctx *rt, const char *sig, const char **p, ffi_type **type) {
  const char *s = skip_space(*p), *e = s;
  while (isalnum((unsigned char)*e) || *e == '_') e++;
  if (e == s) {
    if (!*s)
      return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN,
                           "extern signature \"%s\": ends where a type was expected", sig);
    return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN,
                         "extern signature \"%s\": expected a type at '%c'", sig, *s);
  }
  *type = type_of(s, (size_t)(e - s));
  if (!*type)
    return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN,
                         "extern signature \"%s\": unknown type '%.*s' "
                         "(use void i32 i64 f32 f64 ptr)",
                         sig, (int)(e - s), s);
  *p = e;
  return PKRT_OK;
}

/* signature := type "(" [ type { "," type } ] ")" */
static pkrt_status parse_signature(pkrt_ctx *rt, const char *sig, pkrt_extern *e) {
  const char *p = sig;
  pkrt_status st = parse_type(rt, sig, &p, &e->ret);
  if (st != PKRT_OK) return st;
  p = skip_space(p);
  if (*p != '(')
    return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN, "extern signature \"%s\": expected '(' after "
                         "the return type", sig);
  p = skip_space(p + 1);
  if (*p != ')') {
    for (;;) {
      ffi_type *t;
      if ((st = parse_type(rt, sig, &p, &t)) != PKRT_OK) return st;
      if (t == &ffi_type_void)
        return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN, "extern signature \"%s\": void is not an "
                             "argument type (write \"()\" for no arguments)", sig);
      if (e->nargs == EXTERN_MAX_ARGS)
        return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN, "extern signature \"%s\": more than %d "
                             "arguments", sig, EXTERN_MAX_ARGS);
      e->args[e->nargs++] = t;
      p = skip_space(p);
      if (*p == ')') break;
      if (!*p)
        return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN, "extern signature \"%s\": missing ')'", sig);
      if (*p != ',')
        return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN,
                             "extern signature \"%s\": expected ',' or ')' at '%c'", sig, *p);
      p++;
    }
  }
  p = skip_space(p + 1);
  if (*p)
    return pkrt_ctx_fail(rt, PKRT_ERR_EXTERN, "extern signature \"%s\": unexpected text "
                         "after ')': \"%s\"", sig, p);
  return PKRT_OK;
}

pkrt_status pkrt_extern_open(pkrt_ctx *rt, const char *library, const char *symbol,
                             const char *signature, pkrt_extern **out) {
  if (!out) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "pkrt_extern_open: out is NULL");
  *out = NULL;
  if (!library || !*library || !symbol || !*symbol || !signature)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "pkrt_extern_open: library, symbol and signature are required");
  pkrt_extern *e = calloc(1, sizeof *e);
  if (!e) return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "out of memory opening %s", symbol);

  /* The signature is checked before the library is touched: a typo costs no dlopen. */
  pkrt_status st = parse_signature(rt, signature, e);
  if (st != PKRT_OK) goto fail;
  if (ffi_prep_cif(&e->cif, FFI_DEFAULT_ABI, (unsigned)e->nargs, e->ret, e->args) != FFI_OK) {
    st = pkrt_ctx_fail(rt, PKRT_ERR_EXTERN, "libffi cannot prepare a call of signature \"%s\"",
                       signature);
    goto fail;
  }
  e->lib = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!e->lib) {
    const char *why = dlerror();
    st = pkrt_ctx_fail(rt, PKRT_ERR_EXTERN, "cannot open extern library %s: %s", library,
                       why ? why : "unknown dlopen error");
    goto fail;
  }
  dlerror();
  void *sym = dlsym(e->lib, symbol);
  if (!sym) {
    const char *why = dlerror();
    st = pkrt_ctx_fail(rt, PKRT_ERR_EXTERN, "extern symbol %s not found in %s: %s", symbol,
                       library, why ? why : "symbol is NULL");
    goto fail;
  }
  /* POSIX guarantees a data pointer from dlsym converts to a function pointer. */
  *(void **)&e->fn = sym;
  *out = e;
  return PKRT_OK;

fail:
  if (e->lib) dlclose(e->lib);
  free(e);
  return st;
}

void pkrt_extern_call(const pkrt_extern *e, void **args, void *ret) {
  /* libffi widens integer results narrower than a register to a full ffi_arg, so the
   * result lands here first and only its own size is copied out to the caller. */
  union {
    ffi_arg i;
    int64_t i64;
    float f32;
    double f64;
    void *ptr;
  } r;
  /* ffi_call does not modify the cif; its prototype just is not const-correct. */
  ffi_call((ffi_cif *)&e->cif, e->fn, &r, args);
  if (!ret) return;
  if (e->ret == &ffi_type_sint32) *(int32_t *)ret = (int32_t)(ffi_sarg)r.i;
  else if (e->ret == &ffi_type_sint64) *(int64_t *)ret = r.i64;
  else if (e->ret == &ffi_type_float) *(float *)ret = r.f32;
  else if (e->ret == &ffi_type_double) *(double *)ret = r.f64;
  else if (e->ret == &ffi_type_pointer) *(void **)ret = r.ptr;
}

int pkrt_extern_nargs(const pkrt_extern *e) { return e ? e->nargs : 0; }

void pkrt_extern_free(pkrt_extern *e) {
  if (!e) return;
  dlclose(e->lib);
  free(e);
}

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

void pkrt_extern_sgemm(const pkrt_extern *e, int trans_a, int trans_b, int32_t m, int32_t n,
                       int32_t k, const float *a, int32_t lda, const float *b, int32_t ldb,
                       float *c, int32_t ldc) {
  int32_t order = CBLAS_ROW_MAJOR;
  int32_t ta = trans_a ? CBLAS_TRANS : CBLAS_NO_TRANS, tb = trans_b ? CBLAS_TRANS : CBLAS_NO_TRANS;
  float alpha = 1.0f, beta = 0.0f; /* C = A·B, overwritten */
  const void *pa = a, *pb = b;
  void *pc = c;
  void *args[] = {&order, &ta, &tb, &m, &n, &k, &alpha, &pa, &lda, &pb, &ldb, &beta, &pc, &ldc};
  pkrt_extern_call(e, args, NULL);
}
