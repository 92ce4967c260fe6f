/* test_op_grad_codegen.c — every gradient program of test_op_grad's cases compiled to C (one
 * source for all) and compared with the interpreter on random inputs with fixed seeds: the
 * gradients are ordinary kernels. (The training ops' forwards are op examples, which
 * test_ops_codegen compiles.) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"
#include "pk_ops.h"
#include "test_op_grad_cases.h"

static int failures;

static void check(bool ok, const char *label, const char *why) {
  if (ok) printf("PASS %s\n", label);
  else printf("FAIL %s: %s\n", label, why);
  failures += !ok;
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
  int cap = GRAD_CASES * PK_OP_MAX_INPUTS, n = 0;
  pk_te_program **progs = calloc((size_t)cap, sizeof *progs);
  const char **labels = calloc((size_t)cap, sizeof *labels);
  for (int c = 0; c < GRAD_CASES; c++)
    for (int i = 0; i < grad_cases[c].prm.ninputs; i++) {
      if (!(pk_op_diff_inputs(grad_cases[c].op) >> i & 1)) continue;
      pk_op_grad g;
      if (pk_op_grad_build(ctx, grad_cases[c].op, &grad_cases[c].prm, i, &g) != PK_OK) {
        printf("FAIL build grad %s input %d: %s\n", grad_cases[c].label, i, pk_ctx_error(ctx));
        return 1;
      }
      labels[n] = pk_sprintf(ctx, "grad_%s_input%d", grad_cases[c].label, i);
      progs[n++] = g.prog;
    }

  pkrt_module *m;
  if (pk_build_programs(ctx, cc, rt, progs, n, &m) != PK_OK) {
    printf("FAIL codegen: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "k%d", i);
    const pkrt_kernel_desc *k = pkrt_module_find(m, name);
    for (uint64_t seed = 1; seed <= 2; seed++) {
      pk_kernel_check_result res;
      pk_status s = k ? pk_kernel_check(ctx, rt, progs[i], k, seed, &res) : PK_ERR_RUNTIME;
      char label[160];
      snprintf(label, sizeof label, "%s_seed%llu", labels[i], (unsigned long long)seed);
      check(s == PK_OK, label, k ? pk_ctx_error(ctx) : "kernel missing from the module");
      pk_ctx_clear_error(ctx);
    }
  }
  pkrt_module_free(m);
  pkrt_ctx_free(rt);
  free(progs);
  free(labels);
  pk_ctx_free(ctx);
  printf("%s op_grad_codegen: %d gradient kernels\n", failures ? "FAIL" : "PASS", n);
  return failures ? 1 : 0;
}
