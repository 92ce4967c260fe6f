/* fingerprint.c — refuses an artifact built for another kind of device: the manifest's
 * fingerprint.must_match names the architecture and the ISA features its kernels use
 * (autotune/target.c writes it); this device must be that arch and have every feature
 * (AArch64: from the kernel's hardware capabilities, hwcap.c; else /proc/cpuinfo). */
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

/* A manifest string fit for a message: at most 64 bytes, control characters as '?'. */
static const char *printable(const char *s, char buf[68]) {
  size_t n = 0;
  for (; s[n] && n < 64; n++) buf[n] = (unsigned char)s[n] < 0x20 || s[n] == 0x7f ? '?' : s[n];
  if (s[n]) buf[n++] = '.', buf[n++] = '.', buf[n++] = '.';
  buf[n] = 0;
  return buf;
}

pkrt_status rt_fingerprint_match(pkrt_ctx *rt, const rt_manifest *mf, const char *machine,
                                 const char *cpuinfo) {
  if (mf->arch && machine && strcmp(machine, mf->arch) != 0)
    return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                         "target mismatch: fingerprint.must_match.arch: the artifact was "
                         "compiled for arch '%s', this device is '%s' (recompile it for this "
                         "device)",
                         printable(mf->arch, (char[68]){0}), machine);
  if (mf->nisa == 0 || !cpuinfo) return PKRT_OK;
  const char *end = NULL;
  const char *flags = cpuinfo_line(cpuinfo, "flags", &end);
  if (!flags) flags = cpuinfo_line(cpuinfo, "Features", &end);
  for (int i = 0; flags && i < mf->nisa; i++)
    if (!has_word(flags, end, mf->isa[i]))
      return pkrt_ctx_fail(rt, PKRT_ERR_INPUT,
                           "target mismatch: fingerprint.must_match.isa: the artifact's kernels "
                           "use CPU feature '%s', which this device lacks (recompile it for "
                           "this device)",
                           printable(mf->isa[i], (char[68]){0}));
  return PKRT_OK;
}

char *rt_device_features(pkrt_ctx *rt) {
  char line[PKRT_HWCAP_LINE_MAX];
  size_t n = pkrt_hwcap_this(line, sizeof line);
  if (n > 0) {
    char *copy = malloc(n + 1);
    if (copy) memcpy(copy, line, n + 1);
    return copy;
  }
  void *text = NULL;
  size_t len;
  /* Without /proc/cpuinfo the features cannot be known; the arch check stands. */
  if (rt_file_read(rt, "/proc/cpuinfo", (size_t)1 << 24, &text, &len) != PKRT_OK) {
    pkrt_ctx_fail(rt, PKRT_OK, "%s", "");
    return NULL;
  }
  return text;
}

pkrt_status rt_fingerprint_check(pkrt_ctx *rt, const rt_manifest *mf) {
  struct utsname u;
  const char *machine = uname(&u) == 0 ? u.machine : NULL;
  char *features = mf->nisa > 0 ? rt_device_features(rt) : NULL;
  pkrt_status st = rt_fingerprint_match(rt, mf, machine, features);
  free(features);
  return st;
}
