/* cli.h — what the `pock` subcommands share: exit codes, option parsing and error output. */
#ifndef PK_CLI_H
#define PK_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "cli_common.h" /* option parsing, shared with pock-rt */
#include "pk_codegen.h"
#include "pk_frontend.h" /* pk_input_shape */

enum { PK_EXIT_OK = 0, PK_EXIT_ERROR = 1, PK_EXIT_USAGE = 2 };

/* Prints "pock: error: <ctx message>" and returns the exit code for the status. */
int pk_cli_fail(pk_ctx *ctx, pk_status s);
/* Prints "pock: <message>" (a usage problem) and returns PK_EXIT_USAGE. */
int pk_cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

int pk_cmd_te(int argc, char **argv);
int pk_cmd_db(int argc, char **argv);
int pk_cmd_tune(int argc, char **argv);
int pk_cmd_report(int argc, char **argv);
int pk_cmd_compile(int argc, char **argv); /* cmd_compile.c */
int pk_cmd_keygen(int argc, char **argv);  /* cmd_sign.c: keygen, sign, verify */
int pk_cmd_sign(int argc, char **argv);
int pk_cmd_verify(int argc, char **argv);
int pk_cmd_inspect(int argc, char **argv); /* cmd_inspect.c */
int pk_cmd_export(int argc, char **argv);  /* cmd_export.c: fine-tuned weights into ONNX */
int pk_cmd_sparse_search(int argc, char **argv); /* cmd_sparse_search.c (issue 22) */
/* Parses one `--input-shape NAME=D0,D1,...` (cli_input_shape.c): PK_EXIT_OK, or
 * PK_EXIT_USAGE after the message. On success arg is cut at its '=' and out->name points
 * into it. */
int pk_cli_input_shape(const char *cmd, char *arg, pk_input_shape *out);
/* The most --input-shape options one command takes (one per model input). */
#define PK_CLI_MAX_SHAPES 16

/* Times k on its buffers and, for a matmul-shaped program, OpenBLAS sgemm on the same
 * data, printing GFLOP/s side by side (te_bench.c). */
pk_status pk_cli_te_bench(pk_ctx *ctx, pkrt_ctx *rt, const pk_te_program *prog,
                          const pkrt_kernel_desc *k, uint64_t seed);

#endif
