/* profile_step.c — where a training step's time goes: compiles a model (as `pock compile`
 * would) and times each kernel call of the train plan alone, cache-warm, on one pinned core.
 *
 *   profile_step MODEL.json [--sparse SPEC.json] [--batch N] [--db DB] [--plan train|eval|infer]
 *                [--passes LIST] [--disable-pass LIST] [--threads N] [--te] [--top K]
 * prints one row per plan step sorted by time (name, kernel, class, schedule source, FLOPs,
 * µs, GFLOP/s, share), then the sum of the rows and the median of whole steps. --te also
 * prints the canonical TE of the slowest kernels (what to look at when scheduling them). */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "model_impl.h"
#include "pk_driver.h"
#include "pk_search.h"

static double now_us(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e6 + t.tv_nsec * 1e-3;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_d);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The last CPU this process may use: away from CPU 0, where interrupts land. */
static int pin_last_cpu(void) {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; c++)
    if (CPU_ISSET(c, &set)) last = c;
  if (last < 0) return -1;
  CPU_ZERO(&set);
  CPU_SET(last, &set);
  return sched_setaffinity(0, sizeof set, &set) == 0 ? last : -1;
}

/* Median µs per call of one plan step: calls batched so each sample lasts >= 50 µs (the
 * clock's cost vanishes), 21 samples. A kernel run again on its own outputs is fine for
 * timing: in-place updates only move the weights a little further. */
static double time_step(pkrt_model *m, const rt_step *st) {
  pkrt_exec_ctx *exec = pkrt_ctx_exec(m->rt);
  double t0 = now_us();
  st->fn(st->bufs, st->nbufs, st->scalars, st->nscalars, m->workspace, exec);
  double once = now_us() - t0;
  int chunk = once > 50 ? 1 : (int)(50 / (once > 0.05 ? once : 0.05)) + 1;
  double samples[21];
  for (int s = 0; s < 21; s++) {
    t0 = now_us();
    for (int c = 0; c < chunk; c++) st->fn(st->bufs, st->nbufs, st->scalars, st->nscalars, m->workspace, exec);
    samples[s] = (now_us() - t0) / chunk;
  }
  return median(samples, 21);
}

typedef struct row {
  const char *node, *cls, *src;
  int kernel;
  double flops, us;
  const pk_te_program *prog;
} row;

static int by_time(const void *a, const void *b) {
  const row *x = a, *y = b;
  return (x->us < y->us) - (x->us > y->us);
}

/* What stage_schedule.c chooses without a database: the space's default schedule
 * ("preset"), or the plain loop nest. */
static const char *schedule_source(pk_ctx *ctx, const pk_task *task) {
  return pk_space_default_schedule(ctx, task, NULL) ? "preset" : "default";
}

int main(int argc, char **argv) {
  pk_compile_options o = pk_compile_defaults();
  const char *plan_name = "train";
  bool te = false;
  int top = 8, threads = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--sparse") && v) o.sparse = argv[++i];
    else if (!strcmp(a, "--batch") && v) o.batch = atoll(argv[++i]);
    else if (!strcmp(a, "--db") && v) o.db = argv[++i];
    else if (!strcmp(a, "--plan") && v) plan_name = argv[++i];
    else if (!strcmp(a, "--passes") && v) o.passes = argv[++i]; /* as pock compile's */
    else if (!strcmp(a, "--disable-pass") && v) o.disable_passes = argv[++i]; /* a comma list */
    else if (!strcmp(a, "--top") && v) top = atoi(argv[++i]);
    else if (!strcmp(a, "--threads") && v) threads = atoi(argv[++i]); /* > 1: not pinned */
    else if (!strcmp(a, "--te")) te = true;
    else if (a[0] != '-' && !o.model) o.model = a;
    else {
      fprintf(stderr, "usage: profile_step MODEL.json [--sparse SPEC] [--batch N] [--db DB] "
                      "[--plan train|eval|infer] [--passes LIST] [--disable-pass LIST] [--threads N] [--te] "
                      "[--top K]\n");
      return 2;
    }
  }
  rt_plan_kind pk = !strcmp(plan_name, "eval") ? RT_PLAN_EVAL : !strcmp(plan_name, "infer") ? RT_PLAN_INFER : RT_PLAN_TRAIN;
  if (!o.model) return fprintf(stderr, "profile_step: no model file\n"), 2;
  char path[] = "/tmp/profile_step_XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) return perror("profile_step: mkstemp"), 1;
  close(fd);
  o.out = path;
  FILE *devnull = fopen("/dev/null", "w");
  o.log = devnull;
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_result res;
  double c0 = now_us();
  if (pk_compile(ctx, &o, &res) != PK_OK) {
    fprintf(stderr, "profile_step: %s\n", pk_ctx_error(ctx));
    unlink(path);
    return 1;
  }
  double compile_ms = (now_us() - c0) / 1e3;
  int cpu = threads > 1 ? -1 : pin_last_cpu(); /* a pool's threads need every core */
  pkrt_model *m;
  char err[512];
  pkrt_open_options oo = {.nthreads = threads > 1 ? threads : 1};
  int rc = pkrt_model_open(path, &oo, &m, err, sizeof err);
  unlink(path);
  if (rc != 0) return fprintf(stderr, "profile_step: %s\n", err), 1;

  /* a batch of pseudo-random inputs and labels: kernels' speed does not depend on values,
   * but max-pool and ReLU branches should see realistic mixes of signs */
  int64_t b = pkrt_model_batch(m), classes = pkrt_model_classes(m);
  uint64_t seed = 1;
  for (int k = 0; k < m->mf.ninputs; k++) { /* every input: floats, or small token ids */
    const rt_tensor *t = &m->mf.tensors[m->mf.inputs[k]];
    void *in = pkrt_model_input(m, t->name);
    for (int64_t i = 0; in && i < t->numel; i++) {
      seed = seed * 6364136223846793005ull + 1442695040888963407ull;
      float v = (float)((seed >> 40) & 0xffff) / 65536.0f - 0.25f;
      switch (t->dtype) {
        case PKRT_DTYPE_F32: ((float *)in)[i] = v; break;
        case PKRT_DTYPE_F64: ((double *)in)[i] = v; break;
        case PKRT_DTYPE_I32: ((int32_t *)in)[i] = (int32_t)(i % 7); break;
        case PKRT_DTYPE_I64: ((int64_t *)in)[i] = i % 7; break;
        default: break;
      }
    }
  }
  int64_t width = m->mf.label_width > 1 ? m->mf.label_width : 1; /* per-token labels: (b, T) */
  int32_t *labels = calloc((size_t)(b * width), sizeof *labels);
  for (int64_t r = 0; r < b * width; r++) labels[r] = classes > 0 ? (int32_t)(r % classes) : 0;
  if (classes > 0 && pkrt_model_set_labels(m, labels, b) != 0)
    return fprintf(stderr, "profile_step: %s\n", pkrt_model_error(m)), 1;

  /* whole steps first (the model's real sequence), then each call alone */
  int nsteps = 0;
  double steps[400], spent = 0, loss;
  for (int w = 0; w < 3; w++) rt_plan_run(m, pk);
  while (nsteps < 400 && (nsteps < 15 || spent < 300e3)) {
    double t0 = now_us();
    int r2 = pk == RT_PLAN_TRAIN ? pkrt_model_train_step(m, &loss) : (int)rt_plan_run(m, pk);
    if (r2 != 0) return fprintf(stderr, "profile_step: %s\n", pkrt_model_error(m)), 1;
    steps[nsteps] = now_us() - t0;
    spent += steps[nsteps++];
  }
  double step_us = median(steps, nsteps);

  const rt_plan *plan = &m->mf.plans[pk];
  if (!plan->present) return fprintf(stderr, "profile_step: no %s plan\n", plan_name), 1;
  row *rows = calloc((size_t)plan->n, sizeof *rows);
  double sum_us = 0, sum_flops = 0;
  for (int s = 0; s < plan->n; s++) {
    const rt_step *st = &plan->steps[s];
    row *r = &rows[s];
    r->node = st->node;
    r->kernel = st->kernel;
    r->cls = "?";
    r->src = "?";
    for (int n = 0; n < res.graph->nnodes; n++) {
      const pk_gnode *g = res.graph->nodes[n];
      if (strcmp(g->name, st->node) != 0) continue;
      pk_task task;
      if (pk_task_from_program(ctx, g->prog, "c", &task) == PK_OK) {
        r->cls = pk_task_class_name(task.cls);
        r->flops = task.flops;
        r->src = o.db ? "db?" : schedule_source(ctx, &task);
        r->prog = g->prog;
      }
      pk_ctx_clear_error(ctx);
      break;
    }
    r->us = time_step(m, st);
    sum_us += r->us;
    sum_flops += r->flops;
  }
  qsort(rows, (size_t)plan->n, sizeof *rows, by_time);
  printf("profile_step %s batch %lld%s%s plan %s: %d calls, %d kernels, compile %.0f ms, CPU %d\n",
         o.model, (long long)b, o.sparse ? " sparse " : "", o.sparse ? o.sparse : "", plan_name,
         plan->n, m->mf.nkernels, compile_ms, cpu);
  printf("%-40s %-4s %-9s %-7s %10s %9s %8s %6s\n", "node", "k", "class", "sched", "flops", "us",
         "GFLOP/s", "share");
  for (int s = 0; s < plan->n; s++) {
    const row *r = &rows[s];
    printf("%-40.40s k%-3d %-9s %-7s %10.0f %9.2f %8.2f %5.1f%%\n", r->node, r->kernel, r->cls,
           r->src, r->flops, r->us, r->us > 0 ? r->flops / r->us / 1e3 : 0, 100 * r->us / sum_us);
  }
  printf("sum of calls %.1f us (%.2f GFLOP/s over %.0f flops); median whole step %.1f us\n",
         sum_us, sum_us > 0 ? sum_flops / sum_us / 1e3 : 0, sum_flops, step_us);
  for (int s = 0; te && s < plan->n && s < top; s++)
    if (rows[s].prog) printf("\n# %s (k%d)\n%s", rows[s].node, rows[s].kernel, pk_te_print(ctx, rows[s].prog));
  pkrt_model_close(m);
  free(rows);
  free(labels);
  pk_ctx_free(ctx);
  fclose(devnull);
  return 0;
}
