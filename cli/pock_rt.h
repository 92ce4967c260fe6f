/* pock_rt.h — what the `pock-rt` subcommands share: exit codes, option parsing and error
 * output. pock-rt is built on libpockrt alone (no compiler), so it cannot use cli.h. */
#ifndef PK_POCK_RT_H
#define PK_POCK_RT_H

#include <stdbool.h>
#include <stdint.h>

#include "cli_common.h" /* option parsing */

enum { PKRT_EXIT_OK = 0, PKRT_EXIT_ERROR = 1, PKRT_EXIT_USAGE = 2 };

/* Prints "pock-rt: error: <msg>" and returns PKRT_EXIT_ERROR. */
int pkrt_cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "pock-rt: <message>" (a usage problem) and returns PKRT_EXIT_USAGE. */
int pkrt_cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int pkrt_cmd_info(int argc, char **argv);  /* pock_rt_info.c */
int pkrt_cmd_gpu(int argc, char **argv);   /* pock_rt_gpu.c */

#endif
