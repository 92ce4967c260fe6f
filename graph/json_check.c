/* json_check.c — checks the compiler's JSON readers share (pk_json_check.h): a \u0000
 * escape in a string, duplicate keys, and quoting user strings for messages. */
#include <stdbool.h>
#include <string.h>

#include "pk_json_check.h"

long pk_json_nul_escape(const char *text, size_t len) {
  bool in_string = false;
  for (size_t i = 0; i < len; i++) {
    char c = text[i];
    if (!c) return (long)i;
    if (!in_string) {
      in_string = c == '"';
      continue;
    }
    if (c == '"') {
      in_string = false;
    } else if (c == '\\' && i + 1 < len) {
      /* An escape: \uXXXX is the only one that can spell a NUL; skip the escaped byte
       * either way, so "\\u0000" (a backslash, then text) is not mistaken for one. */
      if (text[i + 1] == 'u' && i + 5 < len && strncmp(text + i + 2, "0000", 4) == 0)
        return (long)i;
      i++;
    }
  }
  return -1;
}

const char *pk_json_duplicate_key(const cJSON *obj) {
  for (const cJSON *a = obj ? obj->child : NULL; a; a = a->next)
    for (const cJSON *b = a->next; b; b = b->next)
      if (a->string && b->string && strcmp(a->string, b->string) == 0) return a->string;
  return NULL;
}

const char *pk_json_escape(pk_ctx *ctx, const char *s) {
  /* Names come from the user: a control byte or a megabyte-long name must not make the
   * message unreadable or push the rest of it past the context's buffer. */
  enum { MAX_SHOWN = 64 };
  pk_strbuf b;
  pk_strbuf_init(&b);
  size_t i = 0;
  for (; s[i] && i < MAX_SHOWN; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c < 0x20 || c == 0x7f || c == '\'' || c == '"' || c == '\\')
      pk_strbuf_printf(&b, "\\x%02x", c);
    else
      pk_strbuf_appendn(&b, (const char *)&s[i], 1);
  }
  if (s[i]) pk_strbuf_append(&b, "...");
  return pk_strbuf_finish(ctx, &b);
}

const char *pk_json_quote(pk_ctx *ctx, const char *s) {
  return pk_sprintf(ctx, "'%s'", pk_json_escape(ctx, s));
}
