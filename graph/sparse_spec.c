/* sparse_spec.c — pk_sparse_parse: the sparse-update spec's JSON (docs/sparse-update.md)
 * into rules. Only the text is checked here; names are resolved by pk_sparse_apply. */
#include <math.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pk_json_check.h"
#include "sparse_impl.h"

typedef struct parse_state {
  pk_ctx *ctx;
  const char *file;
} parse_state;

#define FAIL(ps, ...) pk_ctx_fail((ps)->ctx, PK_ERR_CHECK, __VA_ARGS__)

static bool is_int(double v) { return isfinite(v) && v == floor(v) && fabs(v) < 9.0e15; }

static pk_status parse_globs(parse_state *ps, int ri, const cJSON *v, sparse_rule *r) {
  if (cJSON_IsString(v)) {
    if (!*v->valuestring)
      return FAIL(ps, "%s: train[%d]: \"params\" is an empty string", ps->file, ri);
    r->nglobs = 1;
    r->globs = pk_alloc(ps->ctx, sizeof *r->globs);
    r->globs[0] = pk_strdup(ps->ctx, v->valuestring);
    return PK_OK;
  }
  if (!cJSON_IsArray(v))
    return FAIL(ps, "%s: train[%d]: \"params\" must be a name/glob or an array of them",
                ps->file, ri);
  int n = cJSON_GetArraySize(v);
  if (n == 0) return FAIL(ps, "%s: train[%d]: \"params\" is an empty array", ps->file, ri);
  r->nglobs = n;
  r->globs = pk_alloc(ps->ctx, sizeof *r->globs * (size_t)n);
  int i = 0;
  for (const cJSON *e = v->child; e; e = e->next, i++) {
    if (!cJSON_IsString(e) || !*e->valuestring)
      return FAIL(ps, "%s: train[%d]: \"params\"[%d] must be a non-empty string", ps->file, ri, i);
    r->globs[i] = pk_strdup(ps->ctx, e->valuestring);
  }
  return PK_OK;
}

static pk_status parse_true(parse_state *ps, int ri, const cJSON *v, const char *key) {
  if (!cJSON_IsTrue(v)) return FAIL(ps, "%s: train[%d]: \"%s\" must be true", ps->file, ri, key);
  return PK_OK;
}

/* blocks := { "last": integer >= 1 [, "prefix": "auto" | dotted path] } */
static pk_status parse_blocks(parse_state *ps, int ri, const cJSON *v, sparse_rule *r) {
  if (!cJSON_IsObject(v))
    return FAIL(ps, "%s: train[%d]: \"blocks\" must be an object like {\"prefix\": \"auto\", "
                "\"last\": 2}", ps->file, ri);
  const char *dup = pk_json_duplicate_key(v);
  if (dup)
    return FAIL(ps, "%s: train[%d]: blocks: key %s appears twice", ps->file, ri,
                pk_json_quote(ps->ctx, dup));
  const cJSON *last = NULL;
  for (const cJSON *e = v->child; e; e = e->next) {
    if (strcmp(e->string, "last") == 0) {
      last = e;
    } else if (strcmp(e->string, "prefix") == 0) {
      if (!cJSON_IsString(e) || !*e->valuestring)
        return FAIL(ps, "%s: train[%d]: blocks.prefix must be \"auto\" or a non-empty name "
                    "prefix such as \"layer\" or \"encoder.blocks\"", ps->file, ri);
      const char *p = e->valuestring;
      size_t n = strlen(p);
      if (p[0] == '.' || p[n - 1] == '.')
        return FAIL(ps, "%s: train[%d]: blocks.prefix %s must not start or end with '.' (the "
                    "block index follows it after one '.')", ps->file, ri,
                    pk_json_quote(ps->ctx, p));
      r->block_prefix = strcmp(p, "auto") == 0 ? NULL : pk_strdup(ps->ctx, p);
    } else {
      return FAIL(ps, "%s: train[%d]: blocks: unknown key \"%s\" (expected prefix, last)",
                  ps->file, ri, pk_json_escape(ps->ctx, e->string));
    }
  }
  if (!last) return FAIL(ps, "%s: train[%d]: blocks: missing \"last\" (how many blocks, "
                         "counted from the end)", ps->file, ri);
  if (!cJSON_IsNumber(last) || !is_int(last->valuedouble) || last->valuedouble < 1)
    return FAIL(ps, "%s: train[%d]: blocks.last must be an integer >= 1", ps->file, ri);
  r->last_blocks = (int64_t)last->valuedouble;
  return PK_OK;
}

/* rule := { selector [, "channels": number | "channel_count": integer] } */
static pk_status parse_rule(parse_state *ps, int ri, const cJSON *o, sparse_rule *r) {
  if (!cJSON_IsObject(o)) return FAIL(ps, "%s: train[%d] must be an object", ps->file, ri);
  /* cJSON keeps both copies of a key and the loop below would take the last: refuse, as
   * the graph reader does. */
  const char *dup = pk_json_duplicate_key(o);
  if (dup)
    return FAIL(ps, "%s: train[%d]: key %s appears twice", ps->file, ri,
                pk_json_quote(ps->ctx, dup));
  r->index = ri;
  int nsel = 0;
  const cJSON *channels = NULL, *count = NULL;
  pk_status s;
  for (const cJSON *e = o->child; e; e = e->next) {
    const char *k = e->string;
    if (strcmp(k, "params") == 0) {
      r->sel = SPARSE_SEL_PARAMS, nsel++;
      if ((s = parse_globs(ps, ri, e, r)) != PK_OK) return s;
    } else if (strcmp(k, "biases") == 0) {
      r->sel = SPARSE_SEL_BIASES, nsel++;
      if ((s = parse_true(ps, ri, e, k)) != PK_OK) return s;
    } else if (strcmp(k, "all") == 0) {
      r->sel = SPARSE_SEL_ALL, nsel++;
      if ((s = parse_true(ps, ri, e, k)) != PK_OK) return s;
    } else if (strcmp(k, "norms") == 0) {
      r->sel = SPARSE_SEL_NORMS, nsel++;
      if ((s = parse_true(ps, ri, e, k)) != PK_OK) return s;
    } else if (strcmp(k, "blocks") == 0) {
      r->sel = SPARSE_SEL_BLOCKS, nsel++;
      if ((s = parse_blocks(ps, ri, e, r)) != PK_OK) return s;
    } else if (strcmp(k, "last_layers") == 0) {
      r->sel = SPARSE_SEL_LAST_LAYERS, nsel++;
      if (!cJSON_IsNumber(e) || !is_int(e->valuedouble) || e->valuedouble < 1)
        return FAIL(ps, "%s: train[%d]: \"last_layers\" must be an integer >= 1", ps->file, ri);
      r->last_layers = (int64_t)e->valuedouble;
    } else if (strcmp(k, "channels") == 0) {
      channels = e;
    } else if (strcmp(k, "channel_count") == 0) {
      count = e;
    } else {
      return FAIL(ps, "%s: train[%d]: unknown key \"%s\" (expected params, biases, last_layers, "
                  "all, norms, blocks, channels, channel_count)", ps->file, ri,
                  pk_json_escape(ps->ctx, k));
    }
  }
  if (nsel != 1)
    return FAIL(ps, "%s: train[%d]: needs exactly one of \"params\", \"biases\", "
                "\"last_layers\", \"all\", \"norms\", \"blocks\" (found %d)", ps->file, ri,
                nsel);
  if (channels && count)
    return FAIL(ps, "%s: train[%d]: give \"channels\" or \"channel_count\", not both", ps->file,
                ri);
  /* On a params rule every selected param must take partial channels; on last_layers,
   * blocks and all only the layer weights among them do (sparse_apply.c). */
  if ((channels || count) && (r->sel == SPARSE_SEL_BIASES || r->sel == SPARSE_SEL_NORMS))
    return FAIL(ps, "%s: train[%d]: \"%s\" applies to a \"params\", \"last_layers\", "
                "\"blocks\" or \"all\" rule (biases and norms have no input channels)",
                ps->file, ri, channels ? "channels" : "channel_count");
  if (channels) {
    if (!cJSON_IsNumber(channels) || !isfinite(channels->valuedouble))
      return FAIL(ps, "%s: train[%d]: \"channels\" must be a number", ps->file, ri);
    double v = channels->valuedouble;
    /* An integer >= 2 is a count; anything else must be a fraction in (0, 1] (so 1 means
     * all channels; one channel is "channel_count": 1). */
    if (is_int(v) && v >= 2)
      r->count = (int64_t)v;
    else if (v > 0 && v <= 1)
      r->fraction = v;
    else
      return FAIL(ps, "%s: train[%d]: \"channels\" %g is neither a fraction in (0, 1] nor an "
                  "integer count >= 2", ps->file, ri, v);
  }
  if (count) {
    if (!cJSON_IsNumber(count) || !is_int(count->valuedouble) || count->valuedouble < 1)
      return FAIL(ps, "%s: train[%d]: \"channel_count\" must be an integer >= 1", ps->file, ri);
    r->count = (int64_t)count->valuedouble;
  }
  return PK_OK;
}

/* spec := { "version": 1, "train": [rule, ...] [, "description": string] } */
static pk_status parse_spec(parse_state *ps, const cJSON *root, pk_sparse_spec *sp) {
  if (!cJSON_IsObject(root)) return FAIL(ps, "%s: the spec must be a JSON object", ps->file);
  const char *dup = pk_json_duplicate_key(root);
  if (dup) return FAIL(ps, "%s: key %s appears twice", ps->file, pk_json_quote(ps->ctx, dup));
  const cJSON *version = NULL, *train = NULL;
  for (const cJSON *e = root->child; e; e = e->next) {
    if (strcmp(e->string, "version") == 0)
      version = e;
    else if (strcmp(e->string, "train") == 0)
      train = e;
    else if (strcmp(e->string, "description") == 0) {
      if (!cJSON_IsString(e)) return FAIL(ps, "%s: \"description\" must be a string", ps->file);
    } else
      return FAIL(ps, "%s: unknown key \"%s\" (expected version, train, description)", ps->file,
                  pk_json_escape(ps->ctx, e->string));
  }
  if (!version) return FAIL(ps, "%s: missing \"version\" (must be 1)", ps->file);
  if (!cJSON_IsNumber(version) || version->valuedouble != 1)
    return FAIL(ps, "%s: unsupported \"version\" (must be 1)", ps->file);
  if (!train) return FAIL(ps, "%s: missing \"train\" (an array of rules)", ps->file);
  if (!cJSON_IsArray(train)) return FAIL(ps, "%s: \"train\" must be an array of rules", ps->file);
  sp->nrules = cJSON_GetArraySize(train);
  sp->rules = pk_alloc(ps->ctx, sizeof *sp->rules * (size_t)(sp->nrules + 1));
  int i = 0;
  pk_status s;
  for (const cJSON *e = train->child; e; e = e->next, i++)
    if ((s = parse_rule(ps, i, e, &sp->rules[i])) != PK_OK) return s;
  return PK_OK;
}

pk_status pk_sparse_parse(pk_ctx *ctx, const char *text, size_t len, const char *filename,
                          pk_sparse_spec **out) {
  *out = NULL;
  parse_state ps = {ctx, filename ? filename : "<sparse spec>"};
  if (!text) return FAIL(&ps, "%s: no text", ps.file);
  /* "a\u0000b" would reach us as the glob "a". */
  long nul = pk_json_nul_escape(text, len);
  if (nul >= 0)
    return FAIL(&ps, "%s: a NUL character (\\u0000 or a zero byte) near byte %ld: names and "
                "globs cannot hold one", ps.file, nul);
  cJSON *root = cJSON_ParseWithLength(text, len);
  if (!root) {
    const char *at = cJSON_GetErrorPtr();
    long off = at && at >= text && at <= text + len ? (long)(at - text) : -1;
    return pk_ctx_fail(ctx, PK_ERR_SYNTAX, "%s: not valid JSON (near byte %ld)", ps.file, off);
  }
  pk_sparse_spec *sp = pk_alloc(ctx, sizeof *sp);
  sp->filename = pk_strdup(ctx, ps.file);
  pk_status s = parse_spec(&ps, root, sp);
  cJSON_Delete(root);
  if (s == PK_OK) *out = sp;
  return s;
}
