/* budget.c — splitting a tuning budget across the tasks of a model: which task's next
 * batch is expected to shorten the training step most (docs/tuning.md, "Budget"). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "search_impl.h"

#define HISTORY 4 /* batches over which a task's recent gain is measured */

typedef struct budget_task {
  double cost_weight;     /* calls per step × FLOPs per call */
  int64_t trials;
  double best_gflops;
  bool done;
  int nhist;
  int64_t hist_trials[HISTORY]; /* (trials, best) after each of the last batches */
  double hist_best[HISTORY];
} budget_task;

struct pk_budget {
  int ntasks, batch;
  int64_t cap;
  budget_task *t;
};

pk_budget *pk_budget_new(const pk_task *tasks, int ntasks, int64_t trials_per_task, int batch) {
  pk_budget *b = pk_xcalloc(1, sizeof *b);
  b->ntasks = ntasks;
  b->batch = batch > 0 ? batch : 1;
  b->cap = trials_per_task;
  b->t = pk_xcalloc((size_t)(ntasks > 0 ? ntasks : 1), sizeof *b->t);
  for (int i = 0; i < ntasks; i++) b->t[i].cost_weight = (tasks[i].weight > 0 ? tasks[i].weight : 1) * (tasks[i].flops > 0 ? tasks[i].flops : 1);
  return b;
}

void pk_budget_free(pk_budget *b) {
  if (!b) return;
  free(b->t);
  free(b);
}

/* Expected time saved per step by one more batch of task i, in ns per step. */
static double expected_gain(const pk_budget *b, const budget_task *t) {
  /* time this task costs per step now: weight × flops / (GFLOP/s) */
  double step_ns = t->cost_weight / t->best_gflops;
  /* recent relative gain per trial (backward-looking), and a decaying optimism so that a
   * task that has plateaued for a short while still gets an occasional batch */
  double recent = 0;
  if (t->nhist >= 2) {
    const int first = 0, last = t->nhist - 1;
    int64_t dt = t->hist_trials[last] - t->hist_trials[first];
    double before = t->hist_best[first], now = t->hist_best[last];
    if (dt > 0 && before > 0) recent = (now - before) / now / (double)dt;
  }
  double optimism = 0.5 / (1.0 + (double)t->trials / b->batch) / b->batch;
  return step_ns * (recent > optimism ? recent : optimism) * b->batch;
}

int pk_budget_next(pk_budget *b) {
  int best = -1;
  double best_score = -1;
  /* every task gets one batch first, the heaviest first */
  for (int i = 0; i < b->ntasks; i++) {
    const budget_task *t = &b->t[i];
    if (t->done || t->trials >= b->cap || t->trials > 0 || t->best_gflops > 0) continue;
    if (t->cost_weight > best_score) {
      best = i;
      best_score = t->cost_weight;
    }
  }
  if (best >= 0) return best;
  for (int i = 0; i < b->ntasks; i++) {
    const budget_task *t = &b->t[i];
    if (t->done || t->trials >= b->cap) continue;
    /* a task with no success yet: as if at 1 GFLOP/s, which is slow, so it gets tried */
    budget_task view = *t;
    if (view.best_gflops <= 0) view.best_gflops = 1;
    double g = expected_gain(b, &view);
    if (g > best_score) {
      best = i;
      best_score = g;
    }
  }
  return best;
}

void pk_budget_report(pk_budget *b, int task, int64_t trials, double best_gflops, bool done) {
  PK_ASSERT(task >= 0 && task < b->ntasks);
  budget_task *t = &b->t[task];
  t->trials = trials;
  t->best_gflops = best_gflops;
  t->done = done;
  if (t->nhist == HISTORY) {
    memmove(t->hist_trials, t->hist_trials + 1, (HISTORY - 1) * sizeof *t->hist_trials);
    memmove(t->hist_best, t->hist_best + 1, (HISTORY - 1) * sizeof *t->hist_best);
    t->nhist--;
  }
  t->hist_trials[t->nhist] = trials;
  t->hist_best[t->nhist] = best_gflops;
  t->nhist++;
}

void pk_budget_split(const pk_task *tasks, int ntasks, int64_t total, int64_t min_each,
                     int64_t *out) {
  if (ntasks <= 0) return;
  double sum = 0;
  for (int i = 0; i < ntasks; i++) sum += (tasks[i].weight > 0 ? tasks[i].weight : 1) * (tasks[i].flops > 0 ? tasks[i].flops : 1);
  int64_t rest = total - min_each * ntasks, given = 0;
  if (rest < 0) rest = 0;
  for (int i = 0; i < ntasks; i++) {
    double w = (tasks[i].weight > 0 ? tasks[i].weight : 1) * (tasks[i].flops > 0 ? tasks[i].flops : 1);
    out[i] = min_each + (int64_t)floor((double)rest * w / sum);
    given += out[i];
  }
  /* what rounding left over goes to the heaviest task */
  int heaviest = 0;
  for (int i = 1; i < ntasks; i++)
    if (tasks[i].weight * tasks[i].flops > tasks[heaviest].weight * tasks[heaviest].flops) heaviest = i;
  if (given < total && total >= min_each * ntasks) out[heaviest] += total - given;
}
