/* json_canon.c — canonical JSON (sorted keys, unformatted): cJSON keeps insertion order,
 * so objects are re-linked in key order before printing. */
#include "json_canon.h"

#include <stdlib.h>
#include <string.h>

static int by_key(const void *a, const void *b) {
  const cJSON *x = *(const cJSON *const *)a, *y = *(const cJSON *const *)b;
  return strcmp(x->string, y->string);
}

void pk_json_sort_keys(cJSON *item) {
  if (!item) return;
  int n = 0;
  for (cJSON *c = item->child; c; c = c->next) {
    pk_json_sort_keys(c);
    n++;
  }
  if (!cJSON_IsObject(item) || n < 2) return;
  cJSON **kids = pk_xmalloc((size_t)n * sizeof *kids);
  int i = 0;
  for (cJSON *c = item->child; c; c = c->next) kids[i++] = c;
  qsort(kids, (size_t)n, sizeof *kids, by_key);
  /* cJSON's list: next/prev, and the head's prev points at the tail. */
  for (i = 0; i < n; i++) {
    kids[i]->next = i + 1 < n ? kids[i + 1] : NULL;
    kids[i]->prev = i > 0 ? kids[i - 1] : kids[n - 1];
  }
  item->child = kids[0];
  free(kids);
}

char *pk_json_canonical(pk_ctx *ctx, cJSON *item) {
  pk_json_sort_keys(item);
  char *text = cJSON_PrintUnformatted(item);
  if (!text) pk_out_of_memory(0); /* cJSON fails only for want of memory */
  char *copy = pk_strdup(ctx, text);
  cJSON_free(text);
  return copy;
}
