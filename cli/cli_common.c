/* cli_common.c — option parsing and the usage message, shared by `pock` and `pock-rt`. */
#include "cli_common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

bool pkrt_cli_parse_i64(const char *s, int64_t *out) {
  char *end;
  if (!s || !*s) return false;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

bool pkrt_cli_parse_size(const char *s, int64_t *out) {
  char *end;
  if (!s || *s < '0' || *s > '9') return false;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  int shift = !*end ? 0 : (*end == 'K' || *end == 'k') ? 10 : (*end == 'M' || *end == 'm') ? 20
              : (*end == 'G' || *end == 'g') ? 30 : -1;
  if (errno || v <= 0 || shift < 0 || (*end && end[1]) || v > (INT64_MAX >> shift)) return false;
  *out = (int64_t)v << shift;
  return true;
}

bool pkrt_cli_parse_double(const char *s, double *out) {
  char *end;
  if (!s || !*s) return false;
  double d = strtod(s, &end);
  if (*end || !isfinite(d)) return false;
  *out = d;
  return true;
}

void pkrt_cli_vusage(const char *prog, const char *fmt, va_list ap) {
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n(run `%s --help` for usage)\n", prog);
}
