/* pk_json_check.h — checks every JSON reader of the compiler shares (the graph frontend,
 * the sparse-update spec): what cJSON accepts but a Pock file must not hold, and user
 * strings made fit for messages.
 *
 * Usage:
 *   long at = pk_json_nul_escape(text, len);      // before cJSON_Parse
 *   if (at >= 0) fail("%s: byte %ld: NUL in a string", file, at);
 *   const char *dup = pk_json_duplicate_key(obj); // after
 *   if (dup) fail("key %s appears twice", pk_json_quote(ctx, dup));
 */
#ifndef PK_JSON_CHECK_H
#define PK_JSON_CHECK_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "pk_ctx.h"

/* The byte offset of the first NUL byte of text[0..len), or of the first "\u0000" escape
 * inside a JSON string, or -1. cJSON decodes either into a NUL that ends the C string it
 * returns, so "a\u0000b" would silently become the name "a": readers refuse such text. */
long pk_json_nul_escape(const char *text, size_t len);

/* The first key of object obj that appears twice (cJSON keeps both, and lookups find only
 * the first), or NULL. Quadratic: objects in Pock's files have a handful of keys. */
const char *pk_json_duplicate_key(const cJSON *obj);

/* A user string fit for a message, in ctx's arena: control bytes, quotes and backslashes
 * escaped as \xHH, cut after 64 bytes ("..."); pk_json_quote puts it in '...'. */
const char *pk_json_escape(pk_ctx *ctx, const char *s);
const char *pk_json_quote(pk_ctx *ctx, const char *s);

#endif
