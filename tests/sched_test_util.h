/* sched_test_util.h — shared by the schedule tests: PASS/FAIL reporting (check() and
 * failures, from pk_test.h), parsing a TE text, a printable description of a schedule's
 * stages and iters (for comparing structures), and the check that an illegal step leaves
 * the schedule unchanged. */
#ifndef SCHED_TEST_UTIL_H
#define SCHED_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_schedule.h"
#include "pk_test.h"

static pk_te_program *parse_te(pk_ctx *ctx, const char *text) {
  pk_te_program *p = NULL;
  if (pk_te_parse(ctx, text, strlen(text), "test.te", &p) != PK_OK) {
    printf("FAIL parse: %s\n%s\n", pk_ctx_error(ctx), text);
    failures++;
    pk_ctx_clear_error(ctx);
    return NULL;
  }
  return p;
}

/* One line per stage: name, scope, attachment, parameter, roots and leaves with extents
 * and annotations. Two schedules with equal descriptions have the same structure. */
static char *describe(pk_ctx *ctx, const pk_schedule *s) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  for (int i = 0; i < s->nstages; i++) {
    const pk_stage *st = s->stages[i];
    pk_strbuf_printf(&b, "%s %s %s", st->name, pk_mem_scope_name(st->scope),
                     st->attach == PK_ATTACH_ROOT ? "root" : st->attach == PK_ATTACH_INLINE ? "inline" : "at");
    if (st->attach == PK_ATTACH_AT) pk_strbuf_printf(&b, "(%s:%s)", st->attach_stage->name, st->attach_iter->name);
    pk_strbuf_printf(&b, " param=%d tensor=%d roots:", st->param, st->tensor->id);
    for (int r = 0; r < st->nroot; r++)
      pk_strbuf_printf(&b, " %s=%lld%s", st->root[r]->name, (long long)st->root[r]->extent,
                       st->root[r]->reduce ? "r" : "");
    pk_strbuf_append(&b, " leaves:");
    for (int l = 0; l < st->nleaf; l++) {
      const pk_iter *it = st->leaf[l];
      pk_strbuf_printf(&b, " %s=%lld", it->name, (long long)it->extent);
      if (it->kind != PK_LOOP_SERIAL)
        pk_strbuf_printf(&b, "[%s:%lld]", pk_loop_kind_name(it->kind), (long long)it->annotation);
    }
    pk_strbuf_printf(&b, " niters=%d\n", st->niters);
  }
  return pk_strbuf_finish(ctx, &b);
}

/* The leaves of a stage as "a b c". */
static __attribute__((unused)) char *leaves(pk_ctx *ctx, const pk_schedule *s, const char *stage) {
  const pk_stage *st = pk_sched_find_stage(s, stage);
  if (!st) return pk_strdup(ctx, "(no stage)");
  pk_strbuf b;
  pk_strbuf_init(&b);
  for (int l = 0; l < st->nleaf; l++) pk_strbuf_printf(&b, "%s%s", l ? " " : "", st->leaf[l]->name);
  return pk_strbuf_finish(ctx, &b);
}

static char *program_text(pk_ctx *ctx, const pk_te_program *p) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  for (int i = 0; i < p->ntensors; i++) {
    const pk_te_tensor *t = p->tensors[i];
    pk_strbuf_printf(&b, "t%d", t->id);
    if (t->body) pk_strbuf_printf(&b, "=%s", pk_te_print_expr(ctx, t->body));
    pk_strbuf_append(&b, "\n");
  }
  return pk_strbuf_finish(ctx, &b);
}

/* The state an illegal step must leave untouched: trace, structure and program. */
static char *state_of(pk_ctx *ctx, const pk_schedule *s) {
  return pk_sprintf(ctx, "%s\n%s%s", pk_sched_to_json(s), describe(ctx, s), program_text(ctx, s->prog));
}

/* Runs an illegal step (the call evaluated by the macro), expects PK_ERR_SCHEDULE with a
 * message containing want, and the schedule exactly as before. */
#define EXPECT_ILLEGAL(ctx, s, name, want, call)                                                    \
  do {                                                                                               \
    char *before_ = state_of((ctx), (s));                                                           \
    pk_status st_ = (call);                                                                          \
    const char *msg_ = pk_ctx_error(ctx);                                                            \
    bool msg_ok_ = strstr(msg_, (want)) != NULL && strncmp(msg_, "step ", 5) == 0;                   \
    char *after_ = state_of((ctx), (s));                                                            \
    check(st_ == PK_ERR_SCHEDULE && msg_ok_ && strcmp(before_, after_) == 0, (name),                 \
          "status %s, message '%s' (want '%s')%s", pk_status_name(st_), msg_, (want),                \
          strcmp(before_, after_) ? "; schedule changed" : "");                                      \
    if (getenv("VERBOSE")) printf("  message: %s\n", msg_);                                         \
    pk_ctx_clear_error(ctx);                                                                         \
  } while (0)

#define EXPECT_OK(ctx, name, call)                                                                  \
  do {                                                                                               \
    pk_status st_ = (call);                                                                          \
    check(st_ == PK_OK, (name), "status %s: %s", pk_status_name(st_), pk_ctx_error(ctx));           \
    pk_ctx_clear_error(ctx);                                                                         \
  } while (0)

#endif
