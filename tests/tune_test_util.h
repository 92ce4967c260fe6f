/* tune_test_util.h — a short, deterministic pk_tune of one TE for the tuning-loop tests:
 * batches of 4, 1 ms real timings that the measurer's test hook replaces, the tests'
 * kernel cache. Include after pk_test.h. */
#ifndef PK_TUNE_TEST_UTIL_H
#define PK_TUNE_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_tune.h"

typedef void (*pk_test_timing_fn)(void *arg, const pk_candidate *c, bool confirming,
                                  double *median_ns, double *min_ns);

/* The defaults, then the test's: db, batch 4, 1 ms timings replaced by timing(arg). */
static inline void pk_test_tune_options(pk_tune_options *o, const char *db,
                                        pk_test_timing_fn timing, void *arg) {
  pk_tune_options_default(o);
  o->db = db;
  o->batch = 4;
  o->measure.min_ns = 1000000; /* real timings are taken (and replaced): keep them short */
#ifdef PK_TEST_CACHE_DIR
  if (!getenv("POCK_CACHE_DIR")) o->measure.cc.cache_dir = PK_TEST_CACHE_DIR;
#endif
  o->measure.test_timing = timing;
  o->measure.test_timing_arg = arg;
}

/* Tunes the one kernel of TE text te; false (a FAIL line printed) when it cannot. */
static inline bool pk_test_tune(pk_ctx *ctx, const char *te, const pk_tune_options *o,
                                pk_tune_report *rep) {
  pk_te_program *prog = NULL;
  pk_status s = pk_te_parse(ctx, te, strlen(te), "test.te", &prog);
  pk_tune_input in = {.n = 1, .progs = &prog};
  if (s == PK_OK) s = pk_tune(ctx, o, &in, rep);
  if (s != PK_OK) {
    printf("FAIL pk_tune: %s\n", pk_ctx_error(ctx));
    return false;
  }
  return true;
}

#endif
