/* search_impl.h — the tuner's layout, shared by search.c (what every tuner does: externs
 * first, dedupe, building, stats, early stop) and the strategies tuner_*.c (which configs
 * to try next). Internal to autotune/. */
#ifndef PK_SEARCH_IMPL_H
#define PK_SEARCH_IMPL_H

#include "space_impl.h"

/* A set of 64-bit keys (the first 16 hex digits of trace hashes; open addressing). */
typedef struct key_set {
  uint64_t *slots; /* 0 = empty; key 0 is stored as 1 */
  size_t cap, n;
} key_set;

bool key_set_has(const key_set *s, uint64_t key);
void key_set_add(key_set *s, uint64_t key);
void key_set_free(key_set *s);
uint64_t key_of_hash(const char *hex);

/* Measured configs of this task: what evo's model trains on. y is log GFLOP/s, NaN for a
 * failed measurement. */
typedef struct tuner_rows {
  int n, cap;
  double *x;       /* n × PK_FEATURE_COUNT */
  double *y;
  pk_config *cfg;
  bool *has_cfg;   /* false: seeded from a record whose knobs are not in this space */
} tuner_rows;

void tuner_rows_add(tuner_rows *r, const double *x, double y, const pk_config *cfg);
void tuner_rows_free(tuner_rows *r);

/* A proposed candidate awaiting its measurement. */
typedef struct tuner_pending {
  uint64_t key;
  pk_config cfg;
  double x[PK_FEATURE_COUNT];
} tuner_pending;

typedef struct tuner_strategy {
  const char *name;
  int max_misses;  /* illegal or already seen configs in a row before giving up; 0: never */
  void (*begin_batch)(pk_tuner *t, int n); /* NULL: nothing to prepare */
  bool (*next_config)(pk_tuner *t, pk_config *out); /* false: nothing left */
  void (*free_state)(pk_tuner *t);                   /* NULL: no state */
} tuner_strategy;

extern const tuner_strategy pk_tuner_random_strategy;
extern const tuner_strategy pk_tuner_grid_strategy;
extern const tuner_strategy pk_tuner_evo_strategy;

struct pk_tuner {
  pk_ctx *ctx;
  pk_tuner_kind kind;
  const pk_task *task;
  pk_space *space;
  pk_rng rng;
  pk_tuner_options opt;
  const tuner_strategy *strategy;
  void *state;           /* the strategy's */
  key_set seen;          /* trace hashes proposed or seeded: never proposed again */
  int npending, cap_pending;
  tuner_pending *pending;
  tuner_rows rows;       /* this task's measurements */
  tuner_rows transfer;   /* other tasks' (y centred per task) */
  bool externs_done;
  pk_config *seeds;      /* pk_tuner_seed_configs: proposed first, in order */
  int nseeds, seed_pos;
  pk_tuner_stats stats;
};

/* For strategies: has this config's trace been proposed or measured? Builds it (in the
 * scratch arena); false and *legal = false when it is illegal. */
bool tuner_config_is_new(pk_tuner *t, const pk_config *c, bool *legal, double *features);

#endif
