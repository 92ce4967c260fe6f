/* artifact_edit.h — tests that change an artifact's manifest: rewrite(src, dst, edit) copies
 * the artifact at src to dst with its manifest passed through edit. Header-only; needs
 * cJSON and the runtime (pkrt.h). */
#ifndef PK_ARTIFACT_EDIT_H
#define PK_ARTIFACT_EDIT_H

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"

/* The artifact at src with its manifest changed by edit, written to dst; 0 on success. */
static inline int rewrite(const char *src, const char *dst, void (*edit)(cJSON *)) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_artifact *art = NULL;
  int rc = -1;
  if (pkrt_artifact_read(rt, src, &art) == PKRT_OK) {
    pkrt_section sec[16];
    int n = 0;
    char *text = NULL;
    for (const pkrt_section *s; n < 16 && (s = pkrt_artifact_section(art, n)); n++) sec[n] = *s;
    cJSON *j = cJSON_ParseWithLength(sec[0].data, sec[0].size);
    if (j) {
      edit(j);
      text = cJSON_Print(j);
      sec[0].data = text;
      sec[0].size = strlen(text);
      rc = pkrt_artifact_write(rt, dst, sec, n) == PKRT_OK ? 0 : -1;
    }
    cJSON_Delete(j);
    free(text);
    pkrt_artifact_free(art);
  }
  pkrt_ctx_free(rt);
  return rc;
}

#endif
