/* cli_common.h — option parsing and the usage message, shared by `pock` and `pock-rt`. Both
 * programs compile cli_common.c, which needs nothing but libc (pock-rt has no compiler). */
#ifndef PK_CLI_COMMON_H
#define PK_CLI_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

/* Whole decimal integer / finite number; false on junk or overflow. */
bool pkrt_cli_parse_i64(const char *s, int64_t *out);
bool pkrt_cli_parse_double(const char *s, double *out);
/* Prints "PROG: <message>" and a pointer to `PROG --help` on stderr. */
void pkrt_cli_vusage(const char *prog, const char *fmt, va_list ap);

#endif
