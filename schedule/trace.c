/* trace.c — the schedule as data: its steps as canonical JSON, and a strict reader that
 * validates a whole trace (PK_ERR_SYNTAX) before replaying it step by step through the
 * public primitives (PK_ERR_SCHEDULE naming the step that does not apply). */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sched_impl.h"

#define TRACE_VERSION 1

/* Where a JSON field lives in pk_sched_step. */
typedef enum slot {
  SLOT_STAGE, SLOT_AXIS0, SLOT_AXIS1, SLOT_AXES, SLOT_FACTOR0, SLOT_FACTOR1, SLOT_TARGET,
  SLOT_TARGET_AXIS, SLOT_READERS
} slot;

typedef enum field_type { FIELD_STRING, FIELD_INT, FIELD_STRINGS } field_type;

typedef struct field {
  const char *key;
  field_type type;
  slot slot;
} field;

#define MAX_FIELDS 5

/* One table for writing and reading: a step's fields, in their canonical order (after
 * "step", which always comes first). docs/schedule.md lists the same. */
static const struct {
  int nfields;
  field fields[MAX_FIELDS];
} step_fields[PK_STEP_COUNT_] = {
    [PK_STEP_SPLIT] = {3, {{"stage", FIELD_STRING, SLOT_STAGE}, {"axis", FIELD_STRING, SLOT_AXIS0},
                           {"factor", FIELD_INT, SLOT_FACTOR0}}},
    [PK_STEP_TILE] = {5, {{"stage", FIELD_STRING, SLOT_STAGE}, {"x", FIELD_STRING, SLOT_AXIS0},
                          {"y", FIELD_STRING, SLOT_AXIS1}, {"fx", FIELD_INT, SLOT_FACTOR0},
                          {"fy", FIELD_INT, SLOT_FACTOR1}}},
    [PK_STEP_REORDER] = {2, {{"stage", FIELD_STRING, SLOT_STAGE}, {"axes", FIELD_STRINGS, SLOT_AXES}}},
    [PK_STEP_FUSE] = {3, {{"stage", FIELD_STRING, SLOT_STAGE}, {"outer", FIELD_STRING, SLOT_AXIS0},
                          {"inner", FIELD_STRING, SLOT_AXIS1}}},
    [PK_STEP_VECTORIZE] = {2, {{"stage", FIELD_STRING, SLOT_STAGE}, {"axis", FIELD_STRING, SLOT_AXIS0}}},
    [PK_STEP_UNROLL] = {3, {{"stage", FIELD_STRING, SLOT_STAGE}, {"axis", FIELD_STRING, SLOT_AXIS0},
                            {"depth", FIELD_INT, SLOT_FACTOR0}}},
    [PK_STEP_PARALLEL] = {2, {{"stage", FIELD_STRING, SLOT_STAGE}, {"axis", FIELD_STRING, SLOT_AXIS0}}},
    [PK_STEP_BIND] = {3, {{"stage", FIELD_STRING, SLOT_STAGE}, {"axis", FIELD_STRING, SLOT_AXIS0},
                          {"tag", FIELD_STRING, SLOT_TARGET}}},
    [PK_STEP_COMPUTE_AT] = {3, {{"stage", FIELD_STRING, SLOT_STAGE}, {"target", FIELD_STRING, SLOT_TARGET},
                                {"axis", FIELD_STRING, SLOT_TARGET_AXIS}}},
    [PK_STEP_COMPUTE_INLINE] = {1, {{"stage", FIELD_STRING, SLOT_STAGE}}},
    [PK_STEP_COMPUTE_ROOT] = {1, {{"stage", FIELD_STRING, SLOT_STAGE}}},
    [PK_STEP_CACHE_READ] = {5, {{"tensor", FIELD_STRING, SLOT_STAGE}, {"scope", FIELD_STRING, SLOT_TARGET},
                                {"readers", FIELD_STRINGS, SLOT_READERS},
                                {"block_dim", FIELD_INT, SLOT_FACTOR0}, {"block", FIELD_INT, SLOT_FACTOR1}}},
    [PK_STEP_CACHE_WRITE] = {2, {{"stage", FIELD_STRING, SLOT_STAGE}, {"scope", FIELD_STRING, SLOT_TARGET}}},
    [PK_STEP_RFACTOR] = {2, {{"stage", FIELD_STRING, SLOT_STAGE}, {"axis", FIELD_STRING, SLOT_AXIS0}}},
    [PK_STEP_PARTITION] = {2, {{"stage", FIELD_STRING, SLOT_STAGE}, {"axis", FIELD_STRING, SLOT_AXIS0}}},
    [PK_STEP_SET_SCOPE] = {2, {{"stage", FIELD_STRING, SLOT_STAGE}, {"scope", FIELD_STRING, SLOT_TARGET}}},
};

/* ---- writing ---- */

static cJSON *strings_json(int n, const char *const *names) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(names[i]));
  return a;
}

static cJSON *field_json(const pk_sched_step *st, const field *f) {
  switch (f->slot) {
  case SLOT_STAGE: return cJSON_CreateString(st->stage);
  case SLOT_AXIS0: return cJSON_CreateString(st->axes[0]);
  case SLOT_AXIS1: return cJSON_CreateString(st->axes[1]);
  case SLOT_AXES: return strings_json(st->naxes, st->axes);
  case SLOT_FACTOR0: return cJSON_CreateNumber((double)st->factors[0]);
  case SLOT_FACTOR1: return cJSON_CreateNumber((double)st->factors[1]);
  case SLOT_TARGET: return cJSON_CreateString(st->target);
  case SLOT_TARGET_AXIS: return cJSON_CreateString(st->target_axis);
  case SLOT_READERS: return strings_json(st->nreaders, st->readers);
  }
  return cJSON_CreateNull();
}

char *pk_sched_to_json(const pk_schedule *s) {
  cJSON *doc = cJSON_CreateObject();
  cJSON_AddItemToObject(doc, "version", cJSON_CreateNumber(TRACE_VERSION));
  cJSON *steps = cJSON_CreateArray();
  cJSON_AddItemToObject(doc, "steps", steps);
  for (int i = 0; i < s->nsteps; i++) {
    const pk_sched_step *st = &s->steps[i];
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "step", cJSON_CreateString(pk_step_kind_name(st->kind)));
    for (int f = 0; f < step_fields[st->kind].nfields; f++)
      cJSON_AddItemToObject(o, step_fields[st->kind].fields[f].key, field_json(st, &step_fields[st->kind].fields[f]));
    cJSON_AddItemToArray(steps, o);
  }
  char *text = cJSON_PrintUnformatted(doc);
  if (!text) pk_out_of_memory(0); /* cJSON fails only for want of memory */
  char *out = pk_strdup(s->ctx, text);
  cJSON_free(text);
  cJSON_Delete(doc);
  return out;
}

/* ---- reading: validation ---- */

static pk_status syntax(pk_ctx *ctx, int index, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static pk_status syntax(pk_ctx *ctx, int index, const char *kind, const char *fmt, ...) {
  char detail[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  if (index < 0) return pk_ctx_fail(ctx, PK_ERR_SYNTAX, "schedule trace: %s", detail);
  if (!kind) return pk_ctx_fail(ctx, PK_ERR_SYNTAX, "schedule trace: step %d: %s", index, detail);
  return pk_ctx_fail(ctx, PK_ERR_SYNTAX, "schedule trace: step %d (%s): %s", index, kind, detail);
}

/* JSON numbers are doubles: an integer field must hold an exact integer of at most 2^53. */
static bool json_int(const cJSON *v, int64_t *out) {
  if (!cJSON_IsNumber(v)) return false;
  double d = v->valuedouble;
  if (!isfinite(d) || d != floor(d) || fabs(d) > (double)PK_SCHED_MAX_FACTOR) return false;
  *out = (int64_t)d;
  return true;
}

static pk_status read_strings(pk_ctx *ctx, const cJSON *v, int index, const char *kind, const char *key,
                              int *n, const char ***out) {
  if (!cJSON_IsArray(v)) return syntax(ctx, index, kind, "field '%s' must be an array of strings", key);
  *n = cJSON_GetArraySize(v);
  *out = pk_alloc(ctx, (size_t)(*n ? *n : 1) * sizeof **out);
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    if (!cJSON_IsString(e)) return syntax(ctx, index, kind, "field '%s' must be an array of strings", key);
    (*out)[i] = pk_strdup(ctx, e->valuestring);
  }
  return PK_OK;
}

static pk_status read_field(pk_ctx *ctx, const cJSON *v, const field *f, int index, const char *kind,
                            pk_sched_step *st) {
  if (f->type == FIELD_STRING && !cJSON_IsString(v))
    return syntax(ctx, index, kind, "field '%s' must be a string", f->key);
  int64_t n = 0;
  if (f->type == FIELD_INT && !json_int(v, &n))
    return syntax(ctx, index, kind, "field '%s' must be an integer of magnitude at most 2^53", f->key);
  const char *str = f->type == FIELD_STRING ? pk_strdup(ctx, v->valuestring) : NULL;
  switch (f->slot) {
  case SLOT_STAGE: st->stage = str; break;
  case SLOT_AXIS0: st->axes[0] = str; break;
  case SLOT_AXIS1: st->axes[1] = str; break;
  case SLOT_AXES: return read_strings(ctx, v, index, kind, f->key, &st->naxes, &st->axes);
  case SLOT_FACTOR0: st->factors[0] = n; break;
  case SLOT_FACTOR1: st->factors[1] = n; break;
  case SLOT_TARGET: st->target = str; break;
  case SLOT_TARGET_AXIS: st->target_axis = str; break;
  case SLOT_READERS: return read_strings(ctx, v, index, kind, f->key, &st->nreaders, &st->readers);
  }
  return PK_OK;
}

static pk_status read_step(pk_ctx *ctx, const cJSON *o, int index, pk_sched_step *st) {
  if (!cJSON_IsObject(o)) return syntax(ctx, index, NULL, "must be an object");
  const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "step");
  if (!name) return syntax(ctx, index, NULL, "missing field 'step'");
  if (!cJSON_IsString(name)) return syntax(ctx, index, NULL, "field 'step' must be a string");
  int kind = 0;
  while (kind < PK_STEP_COUNT_ && strcmp(pk_step_kind_name((pk_step_kind)kind), name->valuestring) != 0) kind++;
  if (kind == PK_STEP_COUNT_) return syntax(ctx, index, NULL, "unknown step '%.64s'", name->valuestring);
  const char *kname = pk_step_kind_name((pk_step_kind)kind);
  memset(st, 0, sizeof *st);
  st->kind = (pk_step_kind)kind;
  st->axes = pk_alloc(ctx, 2 * sizeof *st->axes);
  unsigned seen = 0;
  bool seen_step = false;
  for (const cJSON *v = o->child; v; v = v->next) {
    if (strcmp(v->string, "step") == 0) {
      if (seen_step) return syntax(ctx, index, kname, "duplicate field 'step'");
      seen_step = true;
      continue;
    }
    int f = 0;
    while (f < step_fields[kind].nfields && strcmp(step_fields[kind].fields[f].key, v->string) != 0) f++;
    if (f == step_fields[kind].nfields) return syntax(ctx, index, kname, "unknown field '%.64s'", v->string);
    if (seen & (1u << f)) return syntax(ctx, index, kname, "duplicate field '%s'", v->string);
    seen |= 1u << f;
    if (read_field(ctx, v, &step_fields[kind].fields[f], index, kname, st) != PK_OK) return PK_ERR_SYNTAX;
  }
  for (int f = 0; f < step_fields[kind].nfields; f++)
    if (!(seen & (1u << f)))
      return syntax(ctx, index, kname, "missing field '%s'", step_fields[kind].fields[f].key);
  /* Counts that the table implies (reorder and cache_read carry their own). */
  if (st->kind == PK_STEP_TILE || st->kind == PK_STEP_FUSE) st->naxes = 2;
  else if (st->axes[0] && st->kind != PK_STEP_REORDER) st->naxes = 1;
  if (st->kind == PK_STEP_SPLIT || st->kind == PK_STEP_UNROLL) st->nfactors = 1;
  if (st->kind == PK_STEP_TILE || st->kind == PK_STEP_CACHE_READ) st->nfactors = 2;
  if (st->kind == PK_STEP_CACHE_READ && (st->factors[0] < INT_MIN || st->factors[0] > INT_MAX))
    return syntax(ctx, index, kname, "field 'block_dim' out of range");
  return PK_OK;
}

static pk_status read_document(pk_ctx *ctx, const cJSON *doc, int *nsteps, pk_sched_step **steps) {
  if (!cJSON_IsObject(doc)) return syntax(ctx, -1, NULL, "the document must be a JSON object");
  const cJSON *version = NULL, *list = NULL;
  for (const cJSON *v = doc->child; v; v = v->next) {
    const cJSON **slot = strcmp(v->string, "version") == 0 ? &version
                         : strcmp(v->string, "steps") == 0 ? &list : NULL;
    if (!slot) return syntax(ctx, -1, NULL, "unknown top-level field '%.64s'", v->string);
    if (*slot) return syntax(ctx, -1, NULL, "duplicate top-level field '%s'", v->string);
    *slot = v;
  }
  int64_t ver;
  if (!version) return syntax(ctx, -1, NULL, "missing field 'version'");
  if (!json_int(version, &ver)) return syntax(ctx, -1, NULL, "field 'version' must be an integer");
  if (ver != TRACE_VERSION)
    return syntax(ctx, -1, NULL, "version %lld is not supported (this Pock reads version %d)", (long long)ver,
                  TRACE_VERSION);
  if (!list) return syntax(ctx, -1, NULL, "missing field 'steps'");
  if (!cJSON_IsArray(list)) return syntax(ctx, -1, NULL, "field 'steps' must be an array");
  *nsteps = cJSON_GetArraySize(list);
  *steps = pk_alloc(ctx, (size_t)(*nsteps ? *nsteps : 1) * sizeof **steps);
  int i = 0;
  for (const cJSON *o = list->child; o; o = o->next, i++)
    if (read_step(ctx, o, i, &(*steps)[i]) != PK_OK) return PK_ERR_SYNTAX;
  return PK_OK;
}

/* ---- reading: replay ---- */

static pk_status apply_step(pk_schedule *s, const pk_sched_step *st) {
  switch (st->kind) {
  case PK_STEP_SPLIT: return pk_sched_split(s, st->stage, st->axes[0], st->factors[0]);
  case PK_STEP_TILE:
    return pk_sched_tile(s, st->stage, st->axes[0], st->axes[1], st->factors[0], st->factors[1]);
  case PK_STEP_REORDER: return pk_sched_reorder(s, st->stage, st->naxes, st->axes);
  case PK_STEP_FUSE: return pk_sched_fuse(s, st->stage, st->axes[0], st->axes[1]);
  case PK_STEP_VECTORIZE: return pk_sched_vectorize(s, st->stage, st->axes[0]);
  case PK_STEP_UNROLL: return pk_sched_unroll(s, st->stage, st->axes[0], st->factors[0]);
  case PK_STEP_PARALLEL: return pk_sched_parallel(s, st->stage, st->axes[0]);
  case PK_STEP_BIND: return pk_sched_bind(s, st->stage, st->axes[0], st->target);
  case PK_STEP_COMPUTE_AT: return pk_sched_compute_at(s, st->stage, st->target, st->target_axis);
  case PK_STEP_COMPUTE_INLINE: return pk_sched_compute_inline(s, st->stage);
  case PK_STEP_COMPUTE_ROOT: return pk_sched_compute_root(s, st->stage);
  case PK_STEP_CACHE_READ:
    return pk_sched_cache_read(s, st->stage, st->target, st->nreaders, st->readers, (int)st->factors[0],
                               st->factors[1]);
  case PK_STEP_CACHE_WRITE: return pk_sched_cache_write(s, st->stage, st->target);
  case PK_STEP_SET_SCOPE: return pk_sched_set_scope(s, st->stage, st->target);
  case PK_STEP_RFACTOR: return pk_sched_rfactor(s, st->stage, st->axes[0]);
  case PK_STEP_PARTITION: return pk_sched_partition(s, st->stage, st->axes[0]);
  case PK_STEP_COUNT_: break;
  }
  PK_ASSERT(!"unknown step kind");
  return PK_ERR_SCHEDULE;
}

/* "step split on t2: ..." from the primitive becomes "step 3 (split) on t2: ...". */
static pk_status replay_failed(pk_ctx *ctx, int index, pk_step_kind kind) {
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", pk_ctx_error(ctx));
  pk_status status = pk_ctx_status(ctx);
  char prefix[64];
  int n = snprintf(prefix, sizeof prefix, "step %s", pk_step_kind_name(kind));
  const char *rest = strncmp(msg, prefix, (size_t)n) == 0 ? msg + n : msg;
  pk_ctx_clear_error(ctx);
  return pk_ctx_fail(ctx, status, "step %d (%s)%s%s", index, pk_step_kind_name(kind),
                     rest == msg ? ": " : "", rest);
}

pk_status pk_sched_from_json(pk_ctx *ctx, const pk_te_program *prog, const char *json,
                             pk_schedule **out) {
  *out = NULL;
  if (!json) return syntax(ctx, -1, NULL, "no text");
  const char *end = NULL;
  cJSON *doc = cJSON_ParseWithOpts(json, &end, true);
  if (!doc) {
    long at = end && end >= json ? (long)(end - json) : 0;
    return syntax(ctx, -1, NULL, "not valid JSON (at byte %ld)", at);
  }
  int nsteps = 0;
  pk_sched_step *steps = NULL;
  pk_status status = read_document(ctx, doc, &nsteps, &steps);
  cJSON_Delete(doc);
  if (status != PK_OK) return status;
  pk_schedule *s = pk_sched_new(ctx, prog);
  for (int i = 0; i < nsteps; i++)
    if (apply_step(s, &steps[i]) != PK_OK) return replay_failed(ctx, i, steps[i].kind);
  *out = s;
  return PK_OK;
}
