/* test_random_schedule.c — property test of schedules: for every operator of te/ops, 60
 * random legal schedules (400 with POCK_TEST_SCALE=full) (random splits with odd factors, tiles, reorders, fuses,
 * vectorize, unroll, parallel, cache_read/cache_write, rfactor, compute_at/inline, drawn
 * through the public primitives: illegal steps are refused and skipped, as the tuner does)
 * each compute exactly what the interpreter computes, on a 2-thread runtime. Every schedule
 * is also replayed from its JSON trace and must give byte-identical C.
 *
 * Usage: test_random_schedule [SCHEDULES_PER_OP [SEED]] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_codegen.h"
#include "pk_ops.h"
#include "pk_schedule.h"

#define BATCH 120 /* kernels per generated source file */

typedef struct rng { uint64_t s; } rng;
static uint64_t next_u64(rng *r) { /* splitmix64 */
  uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
static int pick(rng *r, int n) { return n <= 0 ? 0 : (int)(next_u64(r) % (uint64_t)n); }

static const pk_stage *random_stage(rng *r, const pk_schedule *s) {
  return s->stages[pick(r, s->nstages)];
}
static const char *random_leaf(rng *r, const pk_stage *st) {
  return st->nleaf ? st->leaf[pick(r, st->nleaf)]->name : "i0";
}
static int64_t random_factor(rng *r, int64_t extent) {
  static const int64_t odd[] = {2, 3, 4, 5, 7, 8, 16};
  int64_t f = odd[pick(r, 7)];
  return f > extent ? (extent > 1 ? 1 + pick(r, (int)extent) : 1) : f;
}

/* One random primitive call; its status is the primitive's (PK_ERR_SCHEDULE when illegal). */
static pk_status random_step(rng *r, pk_schedule *s) {
  const pk_stage *st = random_stage(r, s);
  const char *name = st->name;
  switch (pick(r, 14)) {
  case 0: case 1: {
    const pk_iter *it = st->nleaf ? st->leaf[pick(r, st->nleaf)] : NULL;
    return it ? pk_sched_split(s, name, it->name, random_factor(r, it->extent)) : PK_ERR_SCHEDULE;
  }
  case 2: {
    if (st->nleaf < 2) return PK_ERR_SCHEDULE;
    int a = pick(r, st->nleaf - 1);
    return pk_sched_tile(s, name, st->leaf[a]->name, st->leaf[a + 1]->name,
                         random_factor(r, st->leaf[a]->extent), random_factor(r, st->leaf[a + 1]->extent));
  }
  case 3: {
    const char *axes[16];
    int n = st->nleaf < 16 ? st->nleaf : 16;
    for (int i = 0; i < n; i++) axes[i] = st->leaf[i]->name;
    for (int i = n - 1; i > 0; i--) { /* shuffle */
      int j = pick(r, i + 1);
      const char *t = axes[i]; axes[i] = axes[j]; axes[j] = t;
    }
    return pk_sched_reorder(s, name, n, axes);
  }
  case 4: {
    if (st->nleaf < 2) return PK_ERR_SCHEDULE;
    int a = pick(r, st->nleaf - 1);
    return pk_sched_fuse(s, name, st->leaf[a]->name, st->leaf[a + 1]->name);
  }
  case 5: return st->nleaf ? pk_sched_vectorize(s, name, st->leaf[st->nleaf - 1]->name) : PK_ERR_SCHEDULE;
  case 6: return pk_sched_unroll(s, name, random_leaf(r, st), pick(r, 3) * 2);
  case 7: return pk_sched_parallel(s, name, random_leaf(r, st));
  case 13: return pk_sched_partition(s, name, random_leaf(r, st));
  case 8: {
    const pk_stage *target = random_stage(r, s);
    return pk_sched_compute_at(s, name, target->name, random_leaf(r, target));
  }
  case 9: return pk_sched_compute_inline(s, name);
  case 10: return pk_sched_cache_write(s, name, "local");
  case 11: {
    /* cache_read of an input for its first reader, maybe with a blocked layout */
    const pk_te_tensor *t = s->orig->tensors[pick(r, s->orig->ntensors)];
    char tname[16];
    snprintf(tname, sizeof tname, "t%d", t->id);
    const char *readers[] = {name};
    int block_dim = pick(r, 2) ? -1 : pick(r, t->ndim);
    return pk_sched_cache_read(s, tname, pick(r, 2) ? "ws" : "local", 1, readers, block_dim,
                               block_dim < 0 ? 0 : random_factor(r, t->shape[block_dim]));
  }
  default: { /* rfactor takes the inner half of a split reduce axis: make one if needed */
    const pk_iter *red = NULL;
    for (int i = 0; i < st->nleaf; i++)
      if (st->leaf[i]->reduce && (!red || pick(r, 2))) red = st->leaf[i];
    if (!red) return PK_ERR_SCHEDULE;
    if (red->rel != PK_ITER_SPLIT_INNER) {
      pk_status sp = pk_sched_split(s, name, red->name, random_factor(r, red->extent));
      if (sp != PK_OK) return sp;
      red = red->split_inner;
    }
    return pk_sched_rfactor(s, name, red->name);
  }
  }
}

static pk_schedule *random_schedule(pk_ctx *ctx, rng *r, const pk_te_program *p, int *legal) {
  pk_schedule *s = pk_sched_new(ctx, p);
  int want = 1 + pick(r, 7);
  *legal = 0;
  for (int tries = 0; tries < 60 && *legal < want; tries++) {
    pk_status st = random_step(r, s);
    if (st == PK_OK) (*legal)++;
    else if (st != PK_ERR_SCHEDULE) return NULL; /* anything else is a bug */
    pk_ctx_clear_error(ctx);
  }
  return s;
}

static int failures;
static int legal_by_kind[PK_STEP_COUNT_];

/* Lowers both the schedule and its JSON replay; the C must be identical. */
static bool replay_gives_same_c(pk_ctx *ctx, const pk_te_program *p, pk_schedule *s) {
  pk_schedule *again;
  pk_lfunc *f1, *f2;
  char *c1, *c2;
  char *json = pk_sched_to_json(s);
  if (pk_sched_from_json(ctx, p, json, &again) != PK_OK) return false;
  if (strcmp(json, pk_sched_to_json(again)) != 0) return false;
  if (pk_sched_lower(ctx, p, s, "k", &f1) != PK_OK || pk_sched_lower(ctx, p, again, "k", &f2) != PK_OK)
    return false;
  return pk_cgen_c(ctx, &f1, 1, &c1) == PK_OK && pk_cgen_c(ctx, &f2, 1, &c2) == PK_OK && !strcmp(c1, c2);
}

int main(int argc, char **argv) {
  /* 60 a op keeps the CI run near 2.5 minutes with 60+ operators; full: a night's run */
  const char *scale = getenv("POCK_TEST_SCALE");
  int per_op = argc > 1 ? atoi(argv[1]) : scale && strcmp(scale, "full") == 0 ? 400 : 60;
  rng r = {argc > 2 ? strtoull(argv[2], NULL, 10) : 20261130};
  pk_ctx *ctx = pk_ctx_new();
  pkrt_ctx *rt = pkrt_ctx_new(2);
  /* -O1: this test is about correctness, and compile time dominates it. */
  pk_cc_options opts = {NULL, "-O1 -march=native -fPIC -fvisibility=hidden", PK_TEST_CACHE_DIR};
  pk_cc *cc;
  if (pk_cc_new(ctx, &opts, &cc) != PK_OK) {
    printf("FAIL compiler: %s\n", pk_ctx_error(ctx));
    return 1;
  }
  int nex;
  const pk_op_example *ex = pk_op_examples(&nex);
  int total = 0, steps_total = 0;
  for (int op = 0; op < PK_OP_COUNT_; op++) {
    /* the op's examples, in turn */
    int mine[64], nmine = 0;
    for (int i = 0; i < nex && nmine < 64; i++)
      if (ex[i].op == (pk_op_kind)op) mine[nmine++] = i;
    if (!nmine) continue;
    int done = 0;
    while (done < per_op) {
      pk_te_program *progs[BATCH];
      pk_schedule *scheds[BATCH];
      int n = 0, attempts = 0;
      while (n < BATCH && done + n < per_op && attempts++ < 2 * BATCH) {
        const pk_op_example *e = &ex[mine[(done + n) % nmine]];
        if (pk_op_build(ctx, e->op, &e->prm, &progs[n]) != PK_OK) {
          printf("FAIL build %s: %s\n", e->label, pk_ctx_error(ctx));
          return 1;
        }
        int legal;
        scheds[n] = random_schedule(ctx, &r, progs[n], &legal);
        if (!scheds[n]) {
          printf("FAIL %s: a primitive failed with a status other than PK_ERR_SCHEDULE: %s\n",
                 e->label, pk_ctx_error(ctx));
          return 1;
        }
        steps_total += legal;
        if (!replay_gives_same_c(ctx, progs[n], scheds[n])) {
          printf("FAIL %s: JSON replay differs: %s\n  trace %s\n", e->label, pk_ctx_error(ctx),
                 pk_sched_to_json(scheds[n]));
          failures++;
          pk_ctx_clear_error(ctx);
          continue; /* draw another */
        }
        for (int i = 0; i < scheds[n]->nsteps; i++) legal_by_kind[scheds[n]->steps[i].kind]++;
        n++;
      }
      pkrt_module *m;
      if (pk_build_scheduled(ctx, cc, rt, progs, scheds, n, &m) != PK_OK) {
        printf("FAIL %s batch: %s\n", pk_op_name((pk_op_kind)op), pk_ctx_error(ctx));
        pk_ctx_clear_error(ctx);
        /* find the culprit: build them one by one */
        for (int i = 0; i < n; i++)
          if (pk_build_scheduled(ctx, cc, rt, &progs[i], &scheds[i], 1, &m) != PK_OK) {
            printf("  trace %s: %s\n", pk_sched_to_json(scheds[i]), pk_ctx_error(ctx));
            pk_ctx_clear_error(ctx);
          } else {
            pkrt_module_free(m);
          }
        failures++;
        done += n;
        continue;
      }
      for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "k%d", i);
        pk_kernel_check_result res;
        if (pk_kernel_check_scheduled(ctx, rt, progs[i], scheds[i], pkrt_module_find(m, name),
                                      1 + (uint64_t)i, &res) != PK_OK) {
          printf("FAIL %s: %s\n  trace %s\n", pk_op_name((pk_op_kind)op), pk_ctx_error(ctx),
                 pk_sched_to_json(scheds[i]));
          pk_ctx_clear_error(ctx);
          failures++;
        }
      }
      pkrt_module_free(m);
      done += n;
      total += n;
    }
    printf("%s %s: %d random schedules\n", failures ? "...." : "PASS", pk_op_name((pk_op_kind)op), done);
    fflush(stdout);
  }
  /* The test is only as strong as the steps it draws: every primitive the generator
   * calls must have succeeded somewhere (bind and set_scope are GPU-only; compute_root is
   * the default). */
  printf("legal steps by primitive:");
  for (int k = 0; k < PK_STEP_COUNT_; k++) {
    printf(" %s %d", pk_step_kind_name((pk_step_kind)k), legal_by_kind[k]);
    if (!legal_by_kind[k] && k != PK_STEP_BIND && k != PK_STEP_SET_SCOPE &&
        k != PK_STEP_COMPUTE_ROOT && per_op >= 50) {
      printf(" (FAIL: never drawn legally)");
      failures++;
    }
  }
  printf("\n");
  printf("%s random_schedule: %d schedules (%d legal steps) checked, %d failures\n",
         failures ? "FAIL" : "PASS", total, steps_total, failures);
  pkrt_ctx_free(rt);
  pk_ctx_free(ctx);
  return failures ? 1 : 0;
}
