/* test_presets.c — the default schedules (no tuning database) of every kernel that the
 * digits CNN and MLP compile into, for all six sparse schemes at batch 1 and 8: each one
 * schedules, builds and equals the interpreter, and conv and matmul kernels never fall back
 * to the plain loop nest (where the speed of an untuned training step comes from). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"
#include "pk_driver.h"
#include "pk_search.h"

static int failures;

#define CHECK(cond, ...)                 \
  do {                                   \
    if (!(cond)) {                       \
      printf("FAIL ");                   \
      printf(__VA_ARGS__);               \
      printf("\n");                      \
      failures++;                        \
    }                                    \
  } while (0)

#define MAX_KERNELS 256

typedef struct kernel {
  pk_te_program *prog;
  const char *name, *canon, *why;
  pk_task task;
  pk_schedule *sched; /* NULL: the default loop nest */
} kernel;

/* Every distinct program of one model's training graphs (each scheme, batch 1 and 8). */
static int collect(pk_ctx *ctx, const char *model, kernel *ks, int n) {
  static const char *const schemes[] = {"full", "last2", "head", "bias_head",
                                        "partial25_bias_head", "partial25_head_localbias"};
  static const int64_t batches[] = {1, 8};
  for (int s = 0; s < 6; s++)
    for (int b = 0; b < 2; b++) {
      pk_compile_options o = pk_compile_defaults();
      o.model = pk_sprintf(ctx, "%s/examples/digits/models/%s.json", PK_SOURCE_DIR, model);
      o.sparse = pk_sprintf(ctx, "%s/examples/digits/specs/%s_%s.json", PK_SOURCE_DIR, model, schemes[s]);
      o.batch = batches[b];
      pk_model_tasks tasks;
      if (pk_model_tasks_of(ctx, &o, &tasks) != PK_OK) {
        CHECK(0, "%s %s batch %lld: tasks: %s", model, schemes[s], (long long)o.batch, pk_ctx_error(ctx));
        pk_ctx_clear_error(ctx);
        continue;
      }
      for (int t = 0; t < tasks.n && n < MAX_KERNELS; t++) {
        const char *canon = pk_te_print(ctx, tasks.progs[t]);
        bool seen = false;
        for (int j = 0; j < n && !seen; j++) seen = !strcmp(ks[j].canon, canon);
        if (seen) continue;
        kernel *k = &ks[n++];
        k->prog = tasks.progs[t];
        k->canon = canon;
        k->name = pk_sprintf(ctx, "%s b%lld %s", model, (long long)o.batch, tasks.names[t]);
      }
    }
  return n;
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  static kernel ks[MAX_KERNELS];
  int n = collect(ctx, "cnn", ks, 0);
  int ncnn = n;
  n = collect(ctx, "mlp", ks, n);
  printf("%d distinct kernels (cnn %d, mlp %d)\n", n, ncnn, n - ncnn);
  CHECK(n >= 40 && n < MAX_KERNELS, "kernel count %d out of the expected range", n);

  /* the schedules the driver would choose */
  int npreset = 0;
  pk_te_program *progs[MAX_KERNELS];
  pk_schedule *scheds[MAX_KERNELS];
  for (int i = 0; i < n; i++) {
    kernel *k = &ks[i];
    if (pk_task_from_program(ctx, k->prog, "c", &k->task) != PK_OK) {
      CHECK(0, "%s: task: %s", k->name, pk_ctx_error(ctx));
      pk_ctx_clear_error(ctx);
    }
    k->sched = pk_space_default_schedule(ctx, &k->task, &k->why);
    CHECK(pk_ctx_error(ctx)[0] == 0, "%s: error left in ctx: %s", k->name, pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    bool dense = k->task.cls == PK_TASK_CONV || k->task.cls == PK_TASK_MATMUL;
    /* a softmax is classed matmul for its dot product but is not one: the generic
     * reduction template takes it, with or without a preset */
    bool gemm_like = dense && k->prog->tensors[k->prog->ntensors - 1]->ndim >= 2;
    CHECK(!gemm_like || k->sched, "%s (%s): plain default schedule: %s", k->name,
          pk_task_class_name(k->task.cls), k->why ? k->why : "?");
    npreset += k->sched != NULL;
    progs[i] = k->prog;
    scheds[i] = k->sched;
  }
  printf("%d of %d kernels have a preset\n", npreset, n);

  /* one source, one build: then every kernel against the interpreter */
  pk_cc *cc;
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_module *mod = NULL;
  if (pk_cc_new(ctx, NULL, &cc) != PK_OK || pk_build_scheduled(ctx, cc, rt, progs, scheds, n, &mod) != PK_OK) {
    printf("FAIL build: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  int checked = 0;
  for (int i = 0; i < n; i++) {
    const pkrt_kernel_desc *d = pkrt_module_find(mod, pk_sprintf(ctx, "k%d", i));
    pk_kernel_check_result res;
    pk_status st = d ? pk_kernel_check_scheduled(ctx, rt, progs[i], scheds[i], d, 7 + (uint64_t)i, &res)
                     : PK_ERR_CHECK;
    CHECK(st == PK_OK, "%s (%s, %s): differs from the interpreter: %s", ks[i].name,
          pk_task_class_name(ks[i].task.cls), scheds[i] ? pk_sched_to_json(scheds[i]) : "default",
          d ? pk_ctx_error(ctx) : "kernel missing");
    pk_ctx_clear_error(ctx);
    checked += st == PK_OK;
  }
  printf("%s every default schedule equals the interpreter (%d of %d)\n", checked == n ? "PASS" : "FAIL",
         checked, n);
  printf("%s conv and matmul kernels are scheduled\n", failures ? "FAIL" : "PASS");
  pkrt_module_free(mod);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  printf("%d failures\n", failures);
  return failures ? 1 : 0;
}
