/* test_cc_select.c — guards the host-compiler flags against GCC 12's miscompilation of a
 * guarded select in a short inner loop (c[i] = a[i] > 0 ? b[i] : 0 over a 5 x 7 nest):
 * the kernel built with the default flags must equal the interpreter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"

static const char *const cases[] = {
    "X = placeholder((5, 7), f32)\nD = placeholder((5, 7), f32)\n"
    "Y = compute((5, 7), (i, j) => select(X[i, j] > 0.0, D[i, j], 0.0))\n",
    "X = placeholder((5, 7), f32)\nD = placeholder((5, 7), f32)\n"
    "Y = compute((5, 7), (i, j) => select(X[i, j] <= 0.0, 0.0, D[i, j]))\n",
    "X = placeholder((3, 33), f64)\nD = placeholder((3, 33), f64)\n"
    "Y = compute((3, 33), (i, j) => select(X[i, j] > 0.0, D[i, j], 0.0))\n",
};

int main(void) {
  int failed = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    pk_ctx *ctx = pk_ctx_new();
    pkrt_ctx *rt = pkrt_ctx_new(1);
    pk_cc_options o = {NULL, getenv("TEST_CC_FLAGS"), PK_TEST_CACHE_DIR};
    pk_cc *cc;
    pk_te_program *p;
    pkrt_module *m = NULL;
    pk_kernel_check_result res;
    pk_status s = pk_te_parse(ctx, cases[c], strlen(cases[c]), "select.te", &p);
    if (s == PK_OK) s = pk_cc_new(ctx, &o, &cc);
    if (s == PK_OK) s = pk_build_programs(ctx, cc, rt, &p, 1, &m);
    for (uint64_t seed = 1; s == PK_OK && seed <= 4; seed++)
      s = pk_kernel_check(ctx, rt, p, pkrt_module_find(m, "k0"), seed, &res);
    printf("%s case %zu%s%s\n", s == PK_OK ? "PASS" : "FAIL", c, s == PK_OK ? "" : ": ",
           s == PK_OK ? "" : pk_ctx_error(ctx));
    failed += s != PK_OK;
    if (m) pkrt_module_free(m);
    pkrt_ctx_free(rt);
    pk_ctx_free(ctx);
  }
  return failed != 0;
}
