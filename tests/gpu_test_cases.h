/* gpu_test_cases.h — the kernels the GPU tests run over: every operator's forward program
 * (the op examples) and every gradient program of test_op_grad's cases, as tasks for a
 * GPU target, each with its preset GPU schedule; and configs sampled from the GPU spaces,
 * at least `per_class` legal ones for each op class (matmul, conv, reduction, injective),
 * drawn round-robin over the class's programs. Header-only; include after pk_test.h. */
#ifndef GPU_TEST_CASES_H
#define GPU_TEST_CASES_H

#include <stdlib.h>
#include <string.h>

#include "pk_gpu.h"
#include "pk_ops.h"
#include "pk_search.h"
#include "test_op_grad_cases.h"

typedef struct gpu_case {
  const char *label;
  pk_te_program *prog;
  pk_task task;
  pk_schedule *preset;   /* the GPU preset; NULL: the default loop nest (one thread) */
  const char *why;       /* why there is no preset */
} gpu_case;

typedef struct gpu_sample {
  const gpu_case *c;
  pk_schedule *sched;
  const char *knobs;
} gpu_sample;

/* POCK_TEST_SCALE=full: the 200 sampled configs per class; else 20. */
static inline int gpu_test_per_class(void) {
  const char *scale = getenv("POCK_TEST_SCALE");
  return scale && !strcmp(scale, "full") ? 200 : 20;
}

static inline void gpu_case_add(pk_ctx *ctx, const pk_target *t, gpu_case *c, const char *label,
                                pk_te_program *p) {
  c->label = label;
  c->prog = p;
  pk_task_for_target(ctx, p, t, &c->task);
  c->preset = pk_space_default_schedule(ctx, &c->task, &c->why);
}

/* Every forward and gradient program as a case for target t; NULL on a build failure. */
static inline gpu_case *gpu_test_cases(pk_ctx *ctx, const pk_target *t, int *n) {
  int count;
  const pk_op_example *ex = pk_op_examples(&count);
  int cap = count + GRAD_CASES * PK_OP_MAX_INPUTS;
  gpu_case *cases = pk_alloc(ctx, sizeof *cases * (size_t)cap);
  *n = 0;
  for (int i = 0; i < count; i++) {
    pk_te_program *p;
    if (pk_op_build(ctx, ex[i].op, &ex[i].prm, &p) != PK_OK) return NULL;
    gpu_case_add(ctx, t, &cases[(*n)++], ex[i].label, p);
  }
  for (int c = 0; c < GRAD_CASES; c++)
    for (int i = 0; i < grad_cases[c].prm.ninputs; i++) {
      if (!(pk_op_diff_inputs(grad_cases[c].op) >> i & 1)) continue;
      pk_op_grad g;
      if (pk_op_grad_build(ctx, grad_cases[c].op, &grad_cases[c].prm, i, &g) != PK_OK) return NULL;
      gpu_case_add(ctx, t, &cases[(*n)++],
                   pk_sprintf(ctx, "grad_%s_input%d", grad_cases[c].label, i), g.prog);
    }
  return cases;
}

/* Up to per_class legal sampled configs (not the preset) of each op class, round-robin
 * over the class's cases; *n gets how many, counts[cls] per class. */
static inline gpu_sample *gpu_test_samples(pk_ctx *ctx, gpu_case *cases, int ncases, int per_class,
                                           uint64_t seed, int *n, int counts[4]) {
  gpu_sample *out = pk_alloc(ctx, sizeof *out * (size_t)(4 * per_class + 1));
  *n = 0;
  pk_rng rng;
  pk_rng_seed(&rng, seed);
  for (int cls = 0; cls < 4; cls++) {
    counts[cls] = 0;
    int members[512], nm = 0;
    for (int i = 0; i < ncases && nm < 512; i++)
      if ((int)cases[i].task.cls == cls) members[nm++] = i;
    pk_space **spaces = pk_alloc(ctx, sizeof *spaces * (size_t)(nm + 1));
    for (int m = 0; m < nm; m++)
      if (pk_space_new(ctx, &cases[members[m]].task, &spaces[m]) != PK_OK) spaces[m] = NULL;
    for (int tries = 0; nm && counts[cls] < per_class && tries < 40 * per_class; tries++) {
      int m = tries % nm;
      if (!spaces[m]) continue;
      pk_config cfg;
      pk_space_sample(spaces[m], &rng, &cfg);
      pk_candidate cand;
      pk_schedule *s;
      if (pk_space_build(spaces[m], &cfg, &cand) != PK_OK ||
          pk_sched_from_json(ctx, cases[members[m]].prog, cand.trace, &s) != PK_OK) {
        pk_ctx_clear_error(ctx); /* an illegal config: the tuner skips it too */
        continue;
      }
      out[*n] = (gpu_sample){&cases[members[m]], s, cand.knobs};
      ++*n;
      counts[cls]++;
    }
    for (int m = 0; m < nm; m++) pk_space_free(spaces[m]);
  }
  return out;
}

/* The presets of the first `per_class` f32 cases of the matmul, conv and injective classes
 * whose space has the knob that vectorizes (`vector`: the shared panels' fetch; `items`:
 * an injective stage's consecutive elements per thread), with that knob at 2 and at 4:
 * what the emitter must turn into vector accesses (vload4, float4). *n gets how many. */
static inline gpu_sample *gpu_test_vector_samples(pk_ctx *ctx, gpu_case *cases, int ncases,
                                                  int per_class, int *n) {
  static const struct { pk_task_class cls; const char *knob; } kinds[] = {
      {PK_TASK_MATMUL, "vector"}, {PK_TASK_CONV, "vector"}, {PK_TASK_INJECTIVE, "items"}};
  gpu_sample *out = pk_alloc(ctx, sizeof *out * (size_t)(6 * per_class + 1));
  *n = 0;
  for (int c = 0; c < 3; c++)
    for (int i = 0, found = 0; i < ncases && found < per_class; i++) {
      gpu_case *gc = &cases[i];
      int64_t numel = pk_te_tensor_numel(gc->prog->tensors[gc->prog->ntensors - 1]);
      if (gc->task.cls != kinds[c].cls || !gc->preset || numel < 16 ||
          gc->prog->tensors[gc->prog->ntensors - 1]->dtype != PKRT_DTYPE_F32)
        continue;
      pk_space *sp;
      pk_config cfg;
      if (pk_space_new(ctx, &gc->task, &sp) != PK_OK) {
        pk_ctx_clear_error(ctx);
        continue;
      }
      int knob = pk_space_knob_index(sp, kinds[c].knob);
      bool ok = knob >= 0 && pk_space_preset(sp, &cfg), any = false;
      for (int v = 0; ok && v < pk_space_knob(sp, knob)->nvalues; v++) {
        int64_t width = pk_space_knob(sp, knob)->values[v];
        if (width != 2 && width != 4) continue;
        cfg.idx[knob] = v;
        pk_candidate cand;
        pk_schedule *sched;
        if (pk_space_build(sp, &cfg, &cand) != PK_OK ||
            pk_sched_from_json(ctx, gc->prog, cand.trace, &sched) != PK_OK) {
          pk_ctx_clear_error(ctx);
          continue;
        }
        out[(*n)++] = (gpu_sample){gc, sched, cand.knobs};
        any = true;
      }
      found += any;
      pk_space_free(sp);
    }
  return out;
}

#endif
