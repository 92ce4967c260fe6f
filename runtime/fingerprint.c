/* fingerprint.c — refuses an artifact built for another kind of device: the manifest's
 * fingerprint.must_match names the architecture and the ISA features its kernels use
 * (autotune/target.c writes it); this device must be that arch and have every feature. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "model_impl.h"
#include "rt_file.h"

/* Whether the whitespace-separated list [p, end) holds word. */
static int has_word(const char *p, const char *end, const char *word) {
  size_t n = strlen(word);
  while (p < end) {
    while (p < end && isspace((unsigned char)*p)) p++;
    const char *s = p;
    while (p < end && !isspace((unsigned char)*p)) p++;
    if ((size_t)(p - s) == n && memcmp(s, word, n) == 0) return 1;
  }
  return 0;
}

/* The value of the first "key<spaces>: value" line (x86 "flags", AArch64 "Features"). */
static const char *cpuinfo_line(const char *text, const char *key, const char **end) {
  size_t n = strlen(key);
  for (const char *line = text; line && *line;) {
    const char *nl = strchr(line, '\n');
    const char *e = nl ? nl : line + strlen(line);
    if (strncmp(line, key, n) == 0) {
      const char *p = line + n;
      while (p < e && (*p == ' ' || *p == '\t')) p++;
      if (p < e && *p == ':') {
        *end = e;
        return p + 1;
      }
    }
    line = nl ? nl + 1 : NULL;
  }
  return NULL;
}

pkrt_status rt_fingerprint_check(pkrt_ctx *rt, const rt_manifest *mf) {
  if (mf->arch) {
    struct utsname u;
    if (uname(&u) == 0 && strcmp(u.machine, mf->arch) != 0)
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                           "target mismatch: the artifact was compiled for arch '%s', this "
                           "device is '%s' (recompile it for this device)",
                           mf->arch, u.machine);
  }
  if (mf->nisa == 0) return PKRT_OK;
  void *text;
  size_t len;
  /* Without /proc/cpuinfo the features cannot be known; the arch check above stands. */
  if (rt_file_read(rt, "/proc/cpuinfo", (size_t)1 << 24, &text, &len) != PKRT_OK) {
    pkrt_ctx_fail(rt, PKRT_OK, "%s", "");
    return PKRT_OK;
  }
  const char *end = NULL;
  const char *flags = cpuinfo_line(text, "flags", &end);
  if (!flags) flags = cpuinfo_line(text, "Features", &end);
  pkrt_status st = PKRT_OK;
  for (int i = 0; flags && i < mf->nisa; i++)
    if (!has_word(flags, end, mf->isa[i])) {
      st = pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "target mismatch: the artifact's kernels use CPU feature '%s', which "
                         "this device lacks (recompile it for this device)",
                         mf->isa[i]);
      break;
    }
  free(text);
  return st;
}
