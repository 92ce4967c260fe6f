/* cli_common.h — option parsing, messages and file handling shared by `pock` and `pock-rt`.
 * Both programs compile cli_common.c (libc only) and cli_files.c (libpockrt's file rules);
 * neither needs the compiler (pock-rt has none). */
#ifndef PK_CLI_COMMON_H
#define PK_CLI_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whole decimal integer / finite number; false on junk or overflow. */
bool pkrt_cli_parse_i64(const char *s, int64_t *out);
bool pkrt_cli_parse_double(const char *s, double *out);
/* A size in bytes: a whole number with an optional K, M or G (x 1024, 1024^2, 1024^3); false
 * on junk, zero or overflow. */
bool pkrt_cli_parse_size(const char *s, int64_t *out);
/* Prints "PROG: <message>" and a pointer to `PROG --help` on stderr. */
void pkrt_cli_vusage(const char *prog, const char *fmt, va_list ap);

/* cli_train.c: `train`, `eval` and `run` with their options, help and messages, one
 * implementation for both programs; prog ("pock" or "pock-rt") names the program in
 * messages and help. Returns the exit code (0, 1 error, 2 usage). */
typedef enum pkrt_cli_mode { PKRT_CLI_TRAIN, PKRT_CLI_EVAL, PKRT_CLI_RUN } pkrt_cli_mode;
int pkrt_cli_train(const char *prog, pkrt_cli_mode mode, int argc, char **argv);

/* cli_files.c. Prints "PROG: error: <message>" on stderr. */
void pkrt_cli_error(const char *prog, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Applies the output rules (runtime/rt_file.h; flags RT_OUT_STREAM or 0) to path before a
 * command does its work: 0, or 1 after printing why the path is refused. */
int pkrt_cli_check_output(const char *prog, const char *path, int flags,
                          const char *const *inputs, int ninputs);
/* Checks path as above, then replaces it atomically with data[0..len): 0, or 1 after
 * printing the error. */
int pkrt_cli_write_file(const char *prog, const char *path, const void *data, size_t len,
                        const char *const *inputs, int ninputs);
/* The last step of main: flushes standard output and, when that or any earlier write to it
 * failed (a full disk, a closed pipe), prints the error and turns exit code rc into 1. */
int pkrt_cli_finish(const char *prog, int rc);

#endif
