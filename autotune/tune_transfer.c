/* tune_transfer.c — a task tuned for the first time starts from what the database knows
 * about its neighbours: the cost model learns from the other shapes of its program tuned
 * on this target, and the best configs of the nearest shapes are measured first. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_tune.h"

#define TRANSFER_RECORDS 4000 /* the most recent records the model learns from */
#define TRANSFER_SEEDS 3      /* nearest shapes whose best config is proposed first */

/* The dims of a task name "<class>_<d0>x<d1>x..._<dtype>"; 0 when there are none. */
static int name_dims(const char *name, double *d, int max) {
  const char *p = strchr(name, '_'), *end = strrchr(name, '_');
  int n = 0;
  if (!p || p == end) return 0;
  for (p++; p < end && n < max;) {
    char *q;
    double v = strtod(p, &q);
    if (q == p || !(v > 0)) return 0;
    d[n++] = v;
    p = *q == 'x' ? q + 1 : q;
    if (q >= end) break;
  }
  return n;
}

/* Sum of |log a - log b| over the dims; INFINITY when the ranks differ. */
static double shape_distance(const char *a, const char *b) {
  double x[16], y[16];
  int n = name_dims(a, x, 16), m = name_dims(b, y, 16);
  if (!n || n != m) return INFINITY;
  double dist = 0;
  for (int i = 0; i < n; i++) dist += fabs(log(x[i]) - log(y[i]));
  return dist;
}

/* The config of sp nearest to another shape's knobs JSON: each knob the value closest to
 * the other's (a knob it lacks: the first value). False when the JSON is not an object. */
static bool config_near(const pk_space *sp, const char *knobs, pk_config *out) {
  cJSON *root = knobs ? cJSON_Parse(knobs) : NULL;
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return false;
  }
  memset(out, 0, sizeof *out);
  out->n = pk_space_nknobs(sp);
  for (int k = 0; k < out->n; k++) {
    const pk_knob *kn = pk_space_knob(sp, k);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, kn->name);
    if (!cJSON_IsNumber(v)) continue;
    double best = INFINITY;
    for (int i = 0; i < kn->nvalues; i++) {
      double d = fabs((double)kn->values[i] - v->valuedouble);
      if (d < best) best = d, out->idx[k] = i;
    }
  }
  cJSON_Delete(root);
  return true;
}

/* Whether two canonical TE texts are one program at other sizes: equal once every number
 * (shapes, padding, strides, the positional ids of names) is dropped. An NN and an NT
 * matmul, or a padded and an unpadded conv, are different programs: one's best config,
 * mapped knob by knob, is no start for the other. (Their records still teach the cost
 * model, whose features describe the lowered loops whatever the program: trained on one
 * shape of the task's own program alone, it steered an NT matmul to 84 % of its own best
 * in 100 trials; on every shape of the class, to 108 %: docs/performance.md, "Transfer
 * between shapes".) */
static bool same_form(const char *a, const char *b) {
  for (;;) {
    while (*a >= '0' && *a <= '9') a++;
    while (*b >= '0' && *b <= '9') b++;
    if (*a != *b) return false;
    if (!*a) return true;
    a++, b++;
  }
}

/* One workload's fastest record among the transfer records, and its distance. */
typedef struct neighbour {
  const pk_record *best;
  double distance;
} neighbour;

static int by_distance(const void *a, const void *b) {
  const neighbour *x = a, *y = b;
  if (x->distance != y->distance) return x->distance < y->distance ? -1 : 1;
  return strcmp(x->best->workload, y->best->workload);
}

/* The "arch" of a must-match JSON, and whether it lists an ISA (a CPU target). */
static bool cpu_arch(const char *must_match, char *arch, size_t cap) {
  cJSON *root = must_match ? cJSON_Parse(must_match) : NULL;
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(root, "arch");
  bool ok = cJSON_IsString(a) && cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(root, "isa"));
  if (ok) snprintf(arch, cap, "%s", a->valuestring);
  cJSON_Delete(root);
  return ok;
}

/* The records of the task's own workload on other CPU targets of its arch (another ISA
 * level, another machine's caches): the same program, so they teach the model and seed
 * the first batch like a shape at distance 0. Appended to copies of *recs, *names and
 * *texts (*copied: the caller frees them). */
static pk_status add_other_targets(pk_tunedb *db, const pk_task *task, const pk_target_fp *fp,
                                   pk_record **recs, const char ***names, const char ***texts,
                                   int64_t *n, int *targets, bool *copied) {
  *targets = 0;
  *copied = false;
  char arch[64], other[64];
  if (!cpu_arch(fp->must_match, arch, sizeof arch)) return PK_OK;
  pk_record *el;
  const char **mm;
  int64_t ne;
  pk_status s = pk_db_workload_elsewhere(db, task->workload, fp->key, TRANSFER_RECORDS, &el, &mm, &ne);
  if (s != PK_OK || ne == 0) return s;
  pk_record *all = malloc((size_t)(*n + ne) * sizeof *all);
  const char **an = malloc((size_t)(*n + ne) * sizeof *an), **at = malloc((size_t)(*n + ne) * sizeof *at);
  if (!all || !an || !at) {
    free(all), free(an), free(at);
    return PK_OK; /* transfer is a head start, never a requirement */
  }
  if (*n) {
    memcpy(all, *recs, (size_t)*n * sizeof *all);
    memcpy(an, *names, (size_t)*n * sizeof *an);
    memcpy(at, *texts, (size_t)*n * sizeof *at);
  }
  int64_t m = *n;
  for (int64_t i = 0; i < ne; i++) {
    if (!cpu_arch(mm[i], other, sizeof other) || strcmp(arch, other)) continue;
    bool seen = false;
    for (int64_t j = *n; j < m && !seen; j++) seen = !strcmp(all[j].target_key, el[i].target_key);
    *targets += !seen;
    all[m] = el[i];
    an[m] = task->name;
    at[m++] = task->canonical;
  }
  *recs = all;
  *names = an;
  *texts = at;
  *n = m;
  *copied = true;
  return PK_OK;
}

pk_status pk_tune_transfer(pk_tunedb *db, const pk_task *task, const pk_target_fp *fp,
                           pk_space *sp, pk_tuner *tuner, pk_tune_task_report *rep) {
  if (rep) rep->transfer_records = rep->transfer_shapes = rep->transfer_same = rep->transfer_seeds = rep->transfer_targets = 0;
  pk_record *recs;
  const char **names, **texts;
  int64_t n;
  int targets = 0;
  bool copied = false;
  pk_status s = pk_db_class_records(db, pk_task_class_name(task->cls), fp->key, task->workload,
                                    TRANSFER_RECORDS, &recs, &names, &texts, &n);
  if (s == PK_OK) s = add_other_targets(db, task, fp, &recs, &names, &texts, &n, &targets, &copied);
  if (s != PK_OK || n == 0) {
    if (copied) free(recs), free(names), free(texts);
    return s;
  }
  pk_tuner_add_transfer(tuner, recs, (int)n);
  neighbour *nb = calloc((size_t)n, sizeof *nb);
  int nn = 0, same = 0;
  for (int64_t i = 0; nb && i < n; i++) {
    int j = 0;
    while (j < nn && (strcmp(nb[j].best->workload, recs[i].workload) ||
                      strcmp(nb[j].best->target_key, recs[i].target_key)))
      j++;
    if (j < nn) {
      if (recs[i].meas.gflops > nb[j].best->meas.gflops) nb[j].best = &recs[i];
      continue;
    }
    /* seeds come from the same program only: another's distance is infinite */
    bool sf = same_form(texts[i], task->canonical);
    nb[nn++] = (neighbour){&recs[i], sf ? shape_distance(task->name, names[i]) : INFINITY};
    same += sf && strcmp(recs[i].workload, task->workload) != 0;
  }
  int k = 0;
  if (nb) {
    qsort(nb, (size_t)nn, sizeof *nb, by_distance);
    pk_config cfg[TRANSFER_SEEDS];
    for (int i = 0; i < nn && k < TRANSFER_SEEDS; i++)
      if (isfinite(nb[i].distance) && config_near(sp, nb[i].best->cand.knobs, &cfg[k])) k++;
    pk_tuner_seed_configs(tuner, cfg, k);
  }
  if (rep) {
    rep->transfer_records = (int)n;
    rep->transfer_shapes = nn - targets;
    rep->transfer_same = same;
    rep->transfer_targets = targets;
    rep->transfer_seeds = k;
  }
  free(nb);
  if (copied) free(recs), free(names), free(texts);
  return PK_OK;
}
