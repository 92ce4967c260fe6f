/* main.c — the `pock` command: dispatches to one file per subcommand. */
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
    "  (te c and te run take --schedule S.json: a schedule trace, docs/schedule.md, and\n"
    "   --target T: what to build for, docs/targets.md; default c, this machine)\n"
    "  compile MODEL -o OUT.pock   compile a model's training step into an artifact\n"
    "                           [--sparse SPEC] [--weights W.pkw] [--reinit GLOB] [--batch B]\n"
    "                           [--db DB] [--inference] [--optimizer sgd|adam|adamw] [--lr X]\n"
    "                           [--momentum X] [--weight-decay X] [--print-memory]\n"
    "                           [--warmup-steps N] [--accum-steps K] [--clip-global X]\n"
    "                           [--dump-after STAGE] [--loss softmax_cross_entropy|mse]\n"
    "                           [--classes K] [--input-shape NAME=D0,D1,...]\n"
    "                           [--passes LIST|all|none] [--layout auto|nchw|nhwc]\n"
    "                           [--verbose] (MODEL: a graph JSON or an ONNX file)\n"
    "  train OUT.pock --data FILE --epochs N   train on this device [--val FILE] [--lr X]\n"
    "                           [--seed S] [--threads T] [--save W.pkw] [--metrics M.jsonl]\n"
    "                           [--scale X] [--label-column K] [--weights W.pkw]\n"
    "                           [--checkpoint C.ckpt [--checkpoint-every N]] [--resume C.ckpt]\n"
    "                           [--max-steps N] [--warmup-steps N] [--trusted-key KEY]\n"
    "                           [--no-shuffle] [--cache-frozen]\n"
    "                           (as `pock-rt train`)\n"
    "  eval OUT.pock --data FILE   loss and accuracy [--weights W.pkw] [--scale X]\n"
    "                           [--label-column K] [--threads T] [--trusted-key KEY]\n"
    "  inspect MODEL            inputs, outputs, parameters, op histogram and memory plan of\n"
    "                           an ONNX or graph JSON model [--batch B] [--sparse SPEC]\n"
    "                           [--input-shape NAME=D0,D1,...] [--json]\n"
    "  export FT.pock --weights FT.pkw --onnx MODEL.onnx -o FT.onnx   the ONNX model with\n"
    "                           the fine-tuned weights, in inference mode\n"
    "  sparse-search MODEL --data TRAIN --val VAL --budget-memory BYTES -o SPEC.json\n"
    "                           the most accurate sparse-update scheme within a budget\n"
    "                           [--budget-step-ms MS] [--weights W.pkw] [--reinit GLOB]\n"
    "                           [--epochs E] [--seed S] [--cache FILE] [--html R.html] ...\n"
    "  tune INPUT --db DB       autotune on this device into a SQLite database; INPUT is a TE\n"
    "                           file or a model (every kernel of its training graph)\n"
    "                           [--tuner evo|random|grid] [--trials N] [--total-trials N]\n"
    "                           [--time-budget S] [--timeout S] [--build-timeout S] [--batch N] [--tune-batch N]\n"
    "                           [--sparse SPEC] [--patience N] [--min-ms M] [--target T]\n"
    "                           [--resume] [--seed N]\n"
    "                           [--remote HOST:P ... --key FLEET.key]: on devices serving\n"
    "                           pock-rt-serve (docs/remote-tuning.md)\n"
    "  report --db DB           per task: default, best generated, extern; tuning curves\n"
    "                           [--format text|csv|json|html] [-o OUT]\n"
    "  report --db DB --model MODEL   a model's step: each kernel's share, untuned vs tuned,\n"
    "                           the step before and after [--sparse SPEC] [--batch B] [--format text|html]\n"
    "  db best DB [--workload HEX|--te FILE] [--target T]   fastest record per workload\n"
    "  db history DB (--workload HEX|--te FILE) [--target T] a workload's tuning curve\n"
    "  db stats DB              records by status, best GFLOP/s, generated vs extern\n"
    "  db merge DB OTHER...     add other databases' records (idempotent)\n"
    "  db export DB [--top N]   every record (or the N fastest OK of each kind per workload\n"
    "                           and target) as JSON lines on stdout\n"
    "  db import DB FILE        add records from JSON lines (docs/tuning-db.md)\n"
    "  keygen -o NAME           an Ed25519 signing key pair: NAME.key (secret), NAME.pub\n"
    "  sign OUT.pock --key NAME.key   sign an artifact (in place) [-o SIGNED.pock]\n"
    "  verify OUT.pock [--trusted-key NAME.pub]   check its signature and signer\n"
    "  --version                print the version\n"
    "  (`pock COMMAND --help` describes each command)\n"
    "\n"
    "Exit status: 0 success, 1 error (bad input, build or mismatch), 2 usage.\n";

int pk_cli_fail(pk_ctx *ctx, pk_status s) {
  fprintf(stderr, "pock: error: %s\n", pk_ctx_error(ctx));
  return s == PK_ERR_USAGE ? PK_EXIT_USAGE : PK_EXIT_ERROR;
}

int pk_cli_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pkrt_cli_vusage("pock", fmt, ap);
  va_end(ap);
  return PK_EXIT_USAGE;
}

static int dispatch(int argc, char **argv) {
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
  if (!strcmp(cmd, "db")) return pk_cmd_db(argc - 2, argv + 2);
  if (!strcmp(cmd, "tune")) return pk_cmd_tune(argc - 2, argv + 2);
  if (!strcmp(cmd, "compile")) return pk_cmd_compile(argc - 2, argv + 2);
  /* The same train and eval as pock-rt's (cli_train.c). */
  if (!strcmp(cmd, "train")) return pkrt_cli_train("pock", PKRT_CLI_TRAIN, argc - 2, argv + 2);
  if (!strcmp(cmd, "eval")) return pkrt_cli_train("pock", PKRT_CLI_EVAL, argc - 2, argv + 2);
  if (!strcmp(cmd, "inspect")) return pk_cmd_inspect(argc - 2, argv + 2);
  if (!strcmp(cmd, "export")) return pk_cmd_export(argc - 2, argv + 2);
  if (!strcmp(cmd, "sparse-search")) return pk_cmd_sparse_search(argc - 2, argv + 2);
  if (!strcmp(cmd, "report")) return pk_cmd_report(argc - 2, argv + 2);
  if (!strcmp(cmd, "keygen")) return pk_cmd_keygen(argc - 2, argv + 2);
  if (!strcmp(cmd, "sign")) return pk_cmd_sign(argc - 2, argv + 2);
  if (!strcmp(cmd, "verify")) return pk_cmd_verify(argc - 2, argv + 2);
  return pk_cli_usage("unknown command '%s'", cmd);
}

/* Every command's output is checked in one place: a write to stdout that failed (a full
 * disk) turns success into exit 1 with a message. */
int main(int argc, char **argv) { return pkrt_cli_finish("pock", dispatch(argc, argv)); }
