/* main.c — the `pock` command: dispatches to one file per subcommand. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: pock <command> [options]\n"
    "\n"
    "commands:\n"
    "  te check FILE            parse and check a tensor expression; print its canonical form\n"
    "  te c FILE                print the generated C (--dump-after parse|lower for the IR)\n"
    "  te run FILE              build, run on random inputs, compare with the interpreter\n"
    "                           [--seed N] [--bench] [--threads N] [--cc CC] [--cflags FLAGS]\n"
    "  (te c and te run take --schedule S.json: a schedule trace, docs/schedule.md)\n"
    "  --version                print the version\n"
    "\n"
    "Exit status: 0 success, 1 error (bad input, build or mismatch), 2 usage.\n";

int pk_cli_fail(pk_ctx *ctx, pk_status s) {
  fprintf(stderr, "pock: error: %s\n", pk_ctx_error(ctx));
  return s == PK_ERR_USAGE ? PK_EXIT_USAGE : PK_EXIT_ERROR;
}

int pk_cli_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("pock: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputs("\n(run `pock --help` for usage)\n", stderr);
  va_end(ap);
  return PK_EXIT_USAGE;
}

bool pk_cli_parse_i64(const char *s, int64_t *out) {
  char *end;
  if (!s || !*s) return false;
  errno = 0;
  long long v = strtoll(s, &end, 10);
  if (errno || *end) return false;
  *out = v;
  return true;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return PK_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    printf("pock %s (C codegen v%d, TE canonical v%d, kernel ABI v%u)\n", POCK_VERSION,
           PK_CGEN_C_VERSION, PK_TE_CANON_VERSION, PKRT_ABI_VERSION);
    return PK_EXIT_OK;
  }
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(usage, stdout);
    return PK_EXIT_OK;
  }
  if (!strcmp(cmd, "te")) return pk_cmd_te(argc - 2, argv + 2);
  return pk_cli_usage("unknown command '%s'", cmd);
}
