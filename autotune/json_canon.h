/* json_canon.h — canonical JSON for the autotuner: object keys sorted (byte order), no
 * whitespace, so equal content gives equal bytes (and equal hashes). Internal to autotune/. */
#ifndef PK_JSON_CANON_H
#define PK_JSON_CANON_H

#include <cjson/cJSON.h>

#include "pk_ctx.h"

/* Sorts the keys of every object in item, recursively, in place. */
void pk_json_sort_keys(cJSON *item);

/* Sorts item's keys and prints it unformatted into ctx's arena. */
char *pk_json_canonical(pk_ctx *ctx, cJSON *item);

#endif
