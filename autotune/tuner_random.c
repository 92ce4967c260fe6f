/* tuner_random.c — the random tuner: configs drawn uniformly, knob by knob (the baseline
 * the other tuners are measured against). */
#include "search_impl.h"

static bool random_next(pk_tuner *t, pk_config *out) {
  pk_space_sample(t->space, &t->rng, out);
  return true;
}

/* 2000 draws in a row that are illegal or already seen: the space is as good as used up. */
const tuner_strategy pk_tuner_random_strategy = {"random", 2000, NULL, random_next, NULL};
