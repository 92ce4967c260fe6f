/* test_schedule_trace.c — the schedule as a JSON trace: round trips rebuild the same
 * schedule, traces replay on any TE with the same canonical text, malformed traces are
 * refused with PK_ERR_SYNTAX / PK_ERR_SCHEDULE and a message naming the step, and neither
 * mutated traces nor random primitive calls crash, leak, or leave a half-made step (an
 * illegal call changes nothing; every legal schedule still computes the same values). */
#include <stdint.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "sched_test_util.h"
#include "sched_test_values.h"

static const char *MATMUL =
    "A = placeholder((24, 20), f32)\n"
    "B = placeholder((20, 18), f32)\n"
    "S = compute((24, 20), (i, j) => A[i, j] * 0.5)\n"
    "k = reduce_axis(20)\n"
    "C = compute((24, 18), (i, j) => sum(S[i, k] * B[k, j], k))\n"
    "D = compute((24, 18), (i, j) => max(C[i, j], 0.0))\n";

/* The same canonical text: other names, spacing, comments and parentheses. */
static const char *MATMUL_RENAMED =
    "# renamed\n"
    "lhs = placeholder((24, 20), f32)\n"
    "rhs = placeholder( (20,18) , f32 )\n"
    "half = compute((24, 20), (row, col) => (lhs[row, col] * 0.5))\n"
    "red = reduce_axis(20)\n"
    "prod = compute((24, 18), (m, n) =>\n"
    "    sum(half[m, red] * rhs[red, n], red))\n"
    "out = compute((24, 18), (a, b) => max(prod[a, b], 0.0))   # relu\n";

/* ---- round trips ---- */

/* s's trace replayed on p and on other gives the same trace, structure and bodies. */
static void round_trip(pk_ctx *ctx, const char *name, const pk_schedule *s, const pk_te_program *other) {
  char *json = pk_sched_to_json(s);
  const pk_te_program *progs[2] = {s->orig, other};
  for (int i = 0; i < 2; i++) {
    pk_schedule *r;
    const char *what = pk_sprintf(ctx, "%s: %s", name, i ? "replays on the renamed TE" : "round trip");
    if (pk_sched_from_json(ctx, progs[i], json, &r) != PK_OK) {
      check(false, what, "%s\n%s", pk_ctx_error(ctx), json);
      pk_ctx_clear_error(ctx);
      continue;
    }
    check(strcmp(pk_sched_to_json(r), json) == 0 && strcmp(describe(ctx, r), describe(ctx, s)) == 0 &&
              strcmp(program_text(ctx, r->prog), program_text(ctx, s->prog)) == 0,
          what, "\n%s\n%s---\n%s\n%s", json, describe(ctx, s), pk_sched_to_json(r), describe(ctx, r));
    check_same_values(ctx, pk_sprintf(ctx, "%s: same values", what), r);
  }
}

static void test_round_trips(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL), *q = parse_te(ctx, MATMUL_RENAMED);
  check(strcmp(pk_te_print(ctx, p), pk_te_print(ctx, q)) == 0, "renamed TE has the same canonical text", "differs");

  pk_schedule *s = pk_sched_new(ctx, p);
  const char *t3[1] = {"t3"};
  EXPECT_OK(ctx, "cache_read", pk_sched_cache_read(s, "t1", "local", 1, t3, 1, 8));
  EXPECT_OK(ctx, "cache_write", pk_sched_cache_write(s, "t3", "local"));
  EXPECT_OK(ctx, "tile", pk_sched_tile(s, "t3", "i0", "i1", 8, 8));
  EXPECT_OK(ctx, "compute_at .local", pk_sched_compute_at(s, "t3.local", "t3", "i1.o"));
  EXPECT_OK(ctx, "split k", pk_sched_split(s, "t3.local", "k0", 4));
  const char *order[3] = {"k0.o", "i0", "k0.i"};
  EXPECT_OK(ctx, "reorder", pk_sched_reorder(s, "t3.local", 3, order));
  EXPECT_OK(ctx, "unroll", pk_sched_unroll(s, "t3.local", "k0.i", 0));
  EXPECT_OK(ctx, "compute_at panel", pk_sched_compute_at(s, "t1.local", "t3.local", "k0.o"));
  EXPECT_OK(ctx, "vectorize", pk_sched_vectorize(s, "t3", "i1.i"));
  EXPECT_OK(ctx, "parallel", pk_sched_parallel(s, "t3", "i0.o"));
  EXPECT_OK(ctx, "inline", pk_sched_compute_inline(s, "t2"));
  EXPECT_OK(ctx, "fuse", pk_sched_fuse(s, "t4", "i0", "i1"));
  EXPECT_OK(ctx, "root again", pk_sched_compute_root(s, "t2"));
  EXPECT_OK(ctx, "inline again", pk_sched_compute_inline(s, "t2"));
  round_trip(ctx, "GEMM-like schedule", s, q);

  pk_schedule *r = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "split k", pk_sched_split(r, "t3", "k0", 6));
  EXPECT_OK(ctx, "rfactor", pk_sched_rfactor(r, "t3", "k0.i"));
  EXPECT_OK(ctx, "parallel partials", pk_sched_parallel(r, "t3.rf", "i0"));
  EXPECT_OK(ctx, "cache_read ws", pk_sched_cache_read(r, "t2", "ws", 1, (const char *[]){"t3.rf"}, 0, 5));
  round_trip(ctx, "rfactor schedule", r, q);

  pk_schedule *g = pk_sched_new(ctx, p);
  EXPECT_OK(ctx, "bind", pk_sched_bind(g, "t4", "i0", "blockIdx.x"));
  EXPECT_OK(ctx, "bind", pk_sched_bind(g, "t4", "i1", "threadIdx.x"));
  round_trip(ctx, "GPU bindings", g, q);

  /* Whitespace and newlines anywhere JSON allows them. */
  cJSON *doc = cJSON_Parse(pk_sched_to_json(s));
  char *pretty = cJSON_Print(doc);
  cJSON_Delete(doc);
  pk_schedule *pr;
  char *spaced = pk_sprintf(ctx, "\n\t %s \r\n", pretty);
  free(pretty);
  pk_status st = pk_sched_from_json(ctx, p, spaced, &pr);
  check(st == PK_OK && strcmp(pk_sched_to_json(pr), pk_sched_to_json(s)) == 0, "pretty-printed trace replays",
        "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);

  pk_schedule *e;
  st = pk_sched_from_json(ctx, p, "{\"version\":1,\"steps\":[]}", &e);
  check(st == PK_OK && e->nsteps == 0 && e->nstages == 3, "empty trace: default schedule", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

/* The example trace in docs/schedule.md replays on examples/te/matmul_512.te. */
static void test_docs_example(pk_ctx *ctx) {
  char *doc, *te;
  size_t len;
  if (pk_read_file(ctx, PK_SOURCE_DIR "/docs/schedule.md", &doc, &len) != PK_OK ||
      pk_read_file(ctx, PK_SOURCE_DIR "/examples/te/matmul_512.te", &te, &len) != PK_OK) {
    check(false, "docs example", "%s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
    return;
  }
  char *start = strstr(doc, "```json\n"), *end = start ? strstr(start + 8, "```") : NULL;
  pk_te_program *p = parse_te(ctx, te);
  if (!start || !end || !p) {
    check(false, "docs example", "no ```json block in docs/schedule.md");
    return;
  }
  pk_schedule *s;
  pk_status st = pk_sched_from_json(ctx, p, pk_strndup(ctx, start + 8, (size_t)(end - start - 8)), &s);
  check(st == PK_OK && s->nsteps == 13 && pk_sched_find_stage(s, "t2.local")->attach == PK_ATTACH_AT,
        "docs example: the GEMM trace replays", "%s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
}

/* ---- malformed traces ---- */

#define SPLIT(extra) "{\"version\":1,\"steps\":[{\"step\":\"split\",\"stage\":\"t3\",\"axis\":\"i0\"" extra "}]}"

static const struct {
  const char *name, *json;
  pk_status status;
  const char *want;
} bad[] = {
    {"empty text", "", PK_ERR_SYNTAX, "not valid JSON"},
    {"not JSON", "split t3 i0 8", PK_ERR_SYNTAX, "not valid JSON"},
    {"truncated", "{\"version\":1,\"steps\":[{\"step\":", PK_ERR_SYNTAX, "not valid JSON"},
    {"trailing garbage", "{\"version\":1,\"steps\":[]} x", PK_ERR_SYNTAX, "not valid JSON"},
    {"nested too deep", NULL, PK_ERR_SYNTAX, "not valid JSON"},
    {"array document", "[]", PK_ERR_SYNTAX, "must be a JSON object"},
    {"null document", "null", PK_ERR_SYNTAX, "must be a JSON object"},
    {"missing version", "{\"steps\":[]}", PK_ERR_SYNTAX, "missing field 'version'"},
    {"wrong version", "{\"version\":2,\"steps\":[]}", PK_ERR_SYNTAX, "version 2 is not supported"},
    {"version a string", "{\"version\":\"1\",\"steps\":[]}", PK_ERR_SYNTAX, "'version' must be an integer"},
    {"missing steps", "{\"version\":1}", PK_ERR_SYNTAX, "missing field 'steps'"},
    {"steps an object", "{\"version\":1,\"steps\":{}}", PK_ERR_SYNTAX, "'steps' must be an array"},
    {"extra top-level field", "{\"version\":1,\"steps\":[],\"by\":\"me\"}", PK_ERR_SYNTAX, "unknown top-level field 'by'"},
    {"duplicate top-level field", "{\"version\":1,\"version\":1,\"steps\":[]}", PK_ERR_SYNTAX, "duplicate top-level field"},
    {"step not an object", "{\"version\":1,\"steps\":[3]}", PK_ERR_SYNTAX, "step 0: must be an object"},
    {"missing step name", "{\"version\":1,\"steps\":[{\"stage\":\"t3\"}]}", PK_ERR_SYNTAX, "step 0: missing field 'step'"},
    {"step name not a string", "{\"version\":1,\"steps\":[{\"step\":7}]}", PK_ERR_SYNTAX, "'step' must be a string"},
    {"unknown step", "{\"version\":1,\"steps\":[{\"step\":\"splitt\"}]}", PK_ERR_SYNTAX, "step 0: unknown step 'splitt'"},
    {"missing field", SPLIT(""), PK_ERR_SYNTAX, "step 0 (split): missing field 'factor'"},
    {"extra field", SPLIT(",\"factor\":8,\"why\":1"), PK_ERR_SYNTAX, "step 0 (split): unknown field 'why'"},
    {"duplicate field", SPLIT(",\"factor\":8,\"factor\":4"), PK_ERR_SYNTAX, "duplicate field 'factor'"},
    {"factor a string", SPLIT(",\"factor\":\"8\""), PK_ERR_SYNTAX, "'factor' must be an integer"},
    {"factor fractional", SPLIT(",\"factor\":8.5"), PK_ERR_SYNTAX, "'factor' must be an integer"},
    {"factor huge", SPLIT(",\"factor\":1e300"), PK_ERR_SYNTAX, "'factor' must be an integer"},
    {"factor null", SPLIT(",\"factor\":null"), PK_ERR_SYNTAX, "'factor' must be an integer"},
    {"stage a number", "{\"version\":1,\"steps\":[{\"step\":\"split\",\"stage\":3,\"axis\":\"i0\",\"factor\":2}]}",
     PK_ERR_SYNTAX, "'stage' must be a string"},
    {"axes not an array", "{\"version\":1,\"steps\":[{\"step\":\"reorder\",\"stage\":\"t3\",\"axes\":\"i0\"}]}",
     PK_ERR_SYNTAX, "'axes' must be an array of strings"},
    {"axes with a number", "{\"version\":1,\"steps\":[{\"step\":\"reorder\",\"stage\":\"t3\",\"axes\":[\"i0\",1]}]}",
     PK_ERR_SYNTAX, "'axes' must be an array of strings"},
    {"block_dim out of int range",
     "{\"version\":1,\"steps\":[{\"step\":\"cache_read\",\"tensor\":\"t1\",\"scope\":\"ws\",\"readers\":[\"t3\"],"
     "\"block_dim\":4000000000,\"block\":4}]}",
     PK_ERR_SYNTAX, "'block_dim' out of range"},
    {"syntax checked before replay",
     "{\"version\":1,\"steps\":[{\"step\":\"split\",\"stage\":\"t9\",\"axis\":\"i0\",\"factor\":2},{\"step\":\"fuse\"}]}",
     PK_ERR_SYNTAX, "step 1 (fuse): missing field 'stage'"},
    {"negative factor", SPLIT(",\"factor\":-3"), PK_ERR_SCHEDULE, "step 0 (split) on t3: factor -3"},
    {"factor beyond extent", SPLIT(",\"factor\":9007199254740992"), PK_ERR_SCHEDULE, "exceeds extent 24"},
    {"unknown stage", "{\"version\":1,\"steps\":[{\"step\":\"split\",\"stage\":\"t9\",\"axis\":\"i0\",\"factor\":2}]}",
     PK_ERR_SCHEDULE, "step 0 (split) on t9: unknown stage 't9'"},
    {"non-ASCII stage", "{\"version\":1,\"steps\":[{\"step\":\"compute_root\",\"stage\":\"t\\u00e9\"}]}",
     PK_ERR_SCHEDULE, "step 0 (compute_root)"},
    {"second step fails",
     "{\"version\":1,\"steps\":[{\"step\":\"split\",\"stage\":\"t3\",\"axis\":\"i0\",\"factor\":2},"
     "{\"step\":\"split\",\"stage\":\"t3\",\"axis\":\"i0\",\"factor\":2}]}",
     PK_ERR_SCHEDULE, "step 1 (split) on t3: 'i0' is not a leaf"},
    {"reorder with no axes", "{\"version\":1,\"steps\":[{\"step\":\"reorder\",\"stage\":\"t3\",\"axes\":[]}]}",
     PK_ERR_SCHEDULE, "at least one axis"},
    {"bad scope", "{\"version\":1,\"steps\":[{\"step\":\"cache_write\",\"stage\":\"t3\",\"scope\":\"global\"}]}",
     PK_ERR_SCHEDULE, "step 0 (cache_write) on t3: cache_write scope"},
};

static void test_malformed(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL);
  char *deep = pk_alloc(ctx, 4003);
  for (int i = 0; i < 2000; i++) deep[i] = '[', deep[2000 + i] = ']';
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    pk_schedule *s = (pk_schedule *)1;
    pk_status st = pk_sched_from_json(ctx, p, bad[i].json ? bad[i].json : deep, &s);
    const char *msg = pk_ctx_error(ctx);
    check(st == bad[i].status && strstr(msg, bad[i].want) && s == NULL, pk_sprintf(ctx, "malformed: %s", bad[i].name),
          "status %s, message '%s' (want %s '%s')", pk_status_name(st), msg, pk_status_name(bad[i].status), bad[i].want);
    if (getenv("VERBOSE")) printf("  message: %s\n", msg);
    pk_ctx_clear_error(ctx);
  }
  pk_schedule *s;
  check(pk_sched_from_json(ctx, p, NULL, &s) == PK_ERR_SYNTAX && s == NULL, "malformed: NULL text", "accepted");
  pk_ctx_clear_error(ctx);
}

/* ---- randomized ---- */

typedef struct rng {
  uint64_t state;
} rng;

static uint64_t next(rng *r) { /* splitmix64 */
  uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static int pick(rng *r, int n) { return (int)(next(r) % (uint64_t)n); }

static const char *const tokens[] = {
    "{", "}", "[", "]", ",", ":", "\"", "0", "-1", "1", "2", "8", "64", "1e9", "3.5", "null", "true",
    "\"t3\"", "\"t2\"", "\"t1\"", "\"t3.local\"", "\"i0\"", "\"i1\"", "\"k0\"", "\"k0.i\"", "\"i0.o\"",
    "\"step\"", "\"stage\"", "\"axis\"", "\"factor\"", "\"split\"", "\"fuse\"", "\"rfactor\"",
    "\"cache_read\"", "\"compute_at\"", "\"readers\"", "\"block\"", "\\u0000", "\"\\\"\"", " ", "\n"};

/* One random edit of text: flip a byte, delete or duplicate a span, insert a token, or
 * replace a number. The result is often still JSON and often still a plausible trace. */
static char *mutate(pk_ctx *ctx, rng *r, const char *text) {
  size_t n = strlen(text), at = n ? (size_t)pick(r, (int)n) : 0, len = (size_t)pick(r, 8) + 1;
  if (at + len > n) len = n - at;
  switch (pick(r, 5)) {
  case 0: {
    char *t = pk_strdup(ctx, text);
    if (n) t[at] = (char)(32 + pick(r, 95));
    return t;
  }
  case 1: return pk_sprintf(ctx, "%.*s%s", (int)at, text, text + at + len);
  case 2: return pk_sprintf(ctx, "%.*s%.*s%s", (int)(at + len), text, (int)len, text + at, text + at);
  case 3: return pk_sprintf(ctx, "%.*s%s%s", (int)at, text, tokens[pick(r, sizeof tokens / sizeof *tokens)], text + at);
  default: {
    const char *d = text + at;
    while (*d && (*d < '0' || *d > '9')) d++;
    if (!*d) return pk_strdup(ctx, text);
    const char *e = d;
    while (*e >= '0' && *e <= '9') e++;
    static const char *const numbers[] = {"0", "1", "2", "3", "7", "24", "25", "64", "65", "-1", "-8",
                                          "9007199254740993", "99999999999999999999", "1.5", "2e1"};
    return pk_sprintf(ctx, "%.*s%s%s", (int)(d - text), text, numbers[pick(r, sizeof numbers / sizeof *numbers)], e);
  }
  }
}

/* One structural edit through cJSON: a field gets another value, disappears or appears,
 * or a step is dropped, duplicated or moved. Mostly valid JSON, often a plausible trace. */
static char *mutate_structure(pk_ctx *ctx, rng *r, const char *text) {
  cJSON *doc = cJSON_Parse(text);
  cJSON *steps = cJSON_GetObjectItemCaseSensitive(doc, "steps");
  int n = cJSON_GetArraySize(steps);
  if (!doc || n == 0) {
    cJSON_Delete(doc);
    return mutate(ctx, r, text);
  }
  cJSON *step = cJSON_GetArrayItem(steps, pick(r, n));
  int nfields = cJSON_GetArraySize(step);
  cJSON *field = cJSON_GetArrayItem(step, pick(r, nfields));
  static const char *const names[] = {"t2", "t3", "t4", "t3.local", "t3.rf", "t1", "t0", "t1.local",
                                      "i0", "i1", "i0.o", "i1.i", "k0", "k0.i", "k0.o", "local", "ws"};
  switch (pick(r, 6)) {
  case 0:
    if (cJSON_IsNumber(field)) cJSON_SetNumberValue(field, (double)(pick(r, 30) - 4));
    else if (cJSON_IsString(field)) cJSON_SetValuestring(field, names[pick(r, sizeof names / sizeof *names)]);
    break;
  case 1: cJSON_DeleteItemFromArray(step, pick(r, nfields)); break;
  case 2: cJSON_AddItemToObject(step, pick(r, 2) ? "axis" : "factor", cJSON_CreateNumber(pick(r, 9))); break;
  case 3: cJSON_DeleteItemFromArray(steps, pick(r, n)); break;
  case 4: cJSON_AddItemToArray(steps, cJSON_Duplicate(step, true)); break;
  default: cJSON_InsertItemInArray(steps, 0, cJSON_DetachItemFromArray(steps, pick(r, n))); break;
  }
  char *out = cJSON_PrintUnformatted(doc);
  char *copy = pk_strdup(ctx, out);
  cJSON_free(out);
  cJSON_Delete(doc);
  return copy;
}

static void test_fuzz(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL);
  pk_schedule *base[2];
  base[0] = pk_sched_new(ctx, p);
  pk_sched_cache_read(base[0], "t1", "local", 1, (const char *[]){"t3"}, 1, 8);
  pk_sched_cache_write(base[0], "t3", "local");
  pk_sched_tile(base[0], "t3", "i0", "i1", 8, 8);
  pk_sched_compute_at(base[0], "t3.local", "t3", "i1.o");
  pk_sched_vectorize(base[0], "t3", "i1.i");
  pk_sched_parallel(base[0], "t3", "i0.o");
  pk_sched_compute_inline(base[0], "t2");
  base[1] = pk_sched_new(ctx, p);
  pk_sched_split(base[1], "t3", "k0", 6);
  pk_sched_rfactor(base[1], "t3", "k0.i");
  pk_sched_fuse(base[1], "t4", "i0", "i1");
  pk_sched_unroll(base[1], "t3.rf", "k0.o", 0);
  check(base[0]->nsteps == 7 && base[1]->nsteps == 4 && pk_ctx_status(ctx) == PK_OK, "fuzz: base traces", "%s",
        pk_ctx_error(ctx));

  rng r = {2024};
  int counts[3] = {0, 0, 0}, bad_status = 0, unstable = 0, wrong_values = 0;
  const int runs = 4000;
  for (int i = 0; i < runs; i++) {
    pk_ctx *c = pk_ctx_new(); /* a fresh context per trace: LSan sees every leak */
    char *text = pk_sched_to_json(base[i % 2]);
    for (int edits = 1 + pick(&r, 3); edits > 0; edits--)
      text = pick(&r, 3) ? mutate_structure(c, &r, text) : mutate(c, &r, text);
    pk_schedule *s;
    pk_status st = pk_sched_from_json(c, p, text, &s);
    if (st == PK_OK) {
      counts[0]++;
      pk_schedule *again;
      char *json = pk_sched_to_json(s);
      if (pk_sched_from_json(c, p, json, &again) != PK_OK || strcmp(pk_sched_to_json(again), json) != 0) {
        if (!unstable++) printf("  unstable: %s\n", text);
      }
      const char *why = counts[0] % 8 == 0 ? values_differ(c, s) : NULL;
      if (why && !wrong_values++) printf("  wrong values for %s: %s\n", json, why);
    } else if (st == PK_ERR_SYNTAX || st == PK_ERR_SCHEDULE) {
      counts[st == PK_ERR_SYNTAX ? 1 : 2]++;
      if (!*pk_ctx_error(c) && !bad_status++) printf("  no message for: %s\n", text);
    } else if (!bad_status++) {
      printf("  status %s for: %s\n", pk_status_name(st), text);
    }
    pk_ctx_free(c);
  }
  printf("  fuzz: %d traces: %d replayed, %d syntax errors, %d schedule errors\n", runs, counts[0], counts[1],
         counts[2]);
  check(!bad_status && !unstable && !wrong_values && counts[0] > 50 && counts[1] > 50 && counts[2] > 50,
        "fuzz: mutated traces replay or fail cleanly", "bad status %d, unstable %d, wrong values %d", bad_status,
        unstable, wrong_values);
}

/* Random primitive calls with names drawn from the schedule (and some nonsense): each
 * illegal call must leave everything as it was; the final schedule must round-trip and
 * compute the same values. */
static const char *random_iter(rng *r, const pk_stage *st) {
  if (!st || pick(r, 12) == 0) return pick(r, 2) ? "zz" : "k9.i";
  return st->iters[pick(r, st->niters)]->name;
}

/* rfactor needs a fresh split of a reduce axis just before it: split, then (with the
 * state after the split as the one an illegal rfactor must keep) rfactor. */
static pk_status split_and_rfactor(pk_ctx *ctx, rng *r, pk_schedule *s, const pk_stage *st, char **before) {
  for (int i = 0; i < st->nroot; i++) {
    const pk_iter *k = st->root[i];
    if (!k->reduce || k->split_outer || k->fused_into) continue;
    if (pk_sched_split(s, st->name, k->name, 1 + pick(r, (int)k->extent)) != PK_OK) return PK_ERR_SCHEDULE;
    *before = state_of(ctx, s);
    return pk_sched_rfactor(s, st->name, pk_sprintf(ctx, "%s.i", k->name));
  }
  return pk_sched_rfactor(s, st->name, random_iter(r, st));
}

static pk_status random_call(pk_ctx *ctx, rng *r, pk_schedule *s, char **before) {
  const pk_stage *st = s->stages[pick(r, s->nstages)], *tg = s->stages[pick(r, s->nstages)];
  const char *name = pick(r, 20) ? st->name : "t0";
  const char *x = random_iter(r, st), *y = random_iter(r, st);
  const pk_iter *it = pk_sched_find_iter(st, x);
  int64_t extent = it ? it->extent : 4, f = 1 + pick(r, (int)(extent < 9 ? extent + 1 : 9)) - (pick(r, 10) == 0);
  switch (pick(r, 15)) {
  case 0: case 1: return pk_sched_split(s, name, x, f);
  case 2: return pk_sched_tile(s, name, x, y, f, 1 + pick(r, 8));
  case 3: {
    const char *axes[3] = {x, y, random_iter(r, st)};
    return pk_sched_reorder(s, name, 1 + pick(r, 3), axes);
  }
  case 4: return pk_sched_fuse(s, name, x, y);
  case 5: return pk_sched_vectorize(s, name, st->leaf[st->nleaf - 1]->name);
  case 6: return pk_sched_unroll(s, name, x, pick(r, 3) * 2);
  case 7: return pk_sched_parallel(s, name, x);
  case 8: return pk_sched_compute_at(s, name, tg->name, random_iter(r, tg));
  case 9: return pk_sched_compute_inline(s, name);
  case 10: return pk_sched_compute_root(s, name);
  case 11: return pk_sched_cache_write(s, name, "local");
  case 12: {
    const char *tensor = pick(r, 2) ? pk_sprintf(ctx, "t%d", pick(r, 2)) : tg->name;
    const char *readers[2] = {st->name, tg->name};
    int bd = pick(r, 4) - 1;
    return pk_sched_cache_read(s, tensor, pick(r, 2) ? "ws" : "local", 1 + pick(r, 2), readers, bd,
                               bd < 0 ? 0 : 1 + pick(r, 9));
  }
  case 13: return pk_sched_bind(s, name, x, pick(r, 2) ? "threadIdx.x" : "blockIdx.y");
  default: return split_and_rfactor(ctx, r, s, st, before);
  }
}

static void test_random_walks(pk_ctx *ctx) {
  pk_te_program *p = parse_te(ctx, MATMUL), *q = parse_te(ctx, MATMUL_RENAMED);
  rng r = {7};
  int legal = 0, illegal = 0, changed = 0, broken = 0, bad_values = 0;
  for (int walk = 0; walk < 300; walk++) {
    pk_ctx *c = pk_ctx_new();
    pk_schedule *s = pk_sched_new(c, p);
    /* A third of the walks start from rfactor, a third from cache_write (both need
     * untouched loops, which random walks rarely leave). */
    if (walk % 3 == 0 && (pk_sched_split(s, "t3", "k0", 1 + pick(&r, 20)) != PK_OK ||
                          pk_sched_rfactor(s, "t3", "k0.i") != PK_OK))
      broken++;
    if (walk % 3 == 1 && pk_sched_cache_write(s, "t3", "local") != PK_OK) broken++;
    for (int i = 0; i < 24; i++) {
      char *before = state_of(c, s);
      pk_status st = random_call(c, &r, s, &before);
      if (st == PK_OK) {
        legal++;
        continue;
      }
      illegal++;
      if (st != PK_ERR_SCHEDULE || strncmp(pk_ctx_error(c), "step ", 5) != 0) broken++;
      if (strcmp(before, state_of(c, s)) != 0 && !changed++)
        printf("  illegal step changed the schedule: %s\n%s\n", pk_ctx_error(c), before);
      pk_ctx_clear_error(c);
    }
    char *json = pk_sched_to_json(s);
    pk_schedule *again, *renamed;
    if (pk_sched_from_json(c, p, json, &again) != PK_OK || strcmp(pk_sched_to_json(again), json) != 0 ||
        strcmp(describe(c, again), describe(c, s)) != 0 || pk_sched_from_json(c, q, json, &renamed) != PK_OK ||
        strcmp(describe(c, renamed), describe(c, s)) != 0) {
      if (!broken++) printf("  walk %d does not round-trip: %s\n%s\n", walk, pk_ctx_error(c), json);
    }
    const char *why = values_differ(c, s);
    if (why && !bad_values++) printf("  walk %d computes other values: %s\n%s\n", walk, why, json);
    pk_ctx_free(c);
  }
  printf("  random walks: %d legal steps, %d illegal\n", legal, illegal);
  check(!changed && !broken && !bad_values && legal > 1000 && illegal > 1000, "random walks: all-or-nothing steps",
        "changed %d, broken %d, wrong values %d", changed, broken, bad_values);
}

int main(void) {
  pk_ctx *ctx = pk_ctx_new();
  test_round_trips(ctx);
  test_docs_example(ctx);
  test_malformed(ctx);
  test_fuzz(ctx);
  test_random_walks(ctx);
  pk_ctx_free(ctx);
  if (failures) printf("%d FAILED\n", failures);
  return failures ? 1 : 0;
}
