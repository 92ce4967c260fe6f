/* pock_rt.c — `pock-rt`, the fleet-side command: train, evaluate, run and inspect a compiled
 * model with libpockrt alone (no compiler, tuning database or Python on the device). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pock/pkrt_kernel.h"
#include "pock_rt.h"

static const char usage[] =
    "usage: pock-rt <command> MODEL.pock [options]\n"
    "\n"
    "Runs a model compiled by `pock compile` on this device; needs no compiler.\n"
    "\n"
    "commands:\n"
    "  train MODEL.pock --data FILE --epochs N   train [--val FILE] [--lr X] [--seed S]\n"
    "                    [--threads T] [--save W.pkw] [--checkpoint C.ckpt\n"
    "                    [--checkpoint-every N]] [--resume C.ckpt] [--max-steps N]\n"
    "                    [--warmup-steps N] [--no-shuffle]\n"
    "                    [--cache-frozen [--cache-budget SIZE]]\n"
    "                    [--metrics M.jsonl] [--scale X] [--label-column K] [--weights W.pkw]\n"
    "  eval MODEL.pock --data FILE    loss and accuracy [--weights W.pkw] [--scale X]\n"
    "                    [--label-column K] [--threads T]\n"
    "  run MODEL.pock --data FILE     inference: one predicted class per row [--scores]\n"
    "                    [--weights W.pkw] [--scale X] [--label-column K] [--threads T]\n"
    "  info MODEL.pock                format, target, sizes, kernels, tuning ids, signer\n"
    "                    [--extract-kernels OUT.so]\n"
    "  serve --port P --trusted-key FLEET.pub   serve remote tuning (runs pock-rt-serve;\n"
    "                    docs/remote-tuning.md)\n"
    "  gpu                            the GPU devices seen (OpenCL, CUDA), or why none\n"
    "  --version                      print the version\n"
    "  (`pock-rt COMMAND --help` describes each command; every command that opens a model\n"
    "  takes --trusted-key KEY: only artifacts signed by KEY load, docs/signing.md)\n"
    "\n"
    "Exit status: 0 success, 1 error, 2 usage.\n";

int pkrt_cli_fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("pock-rt: error: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return PKRT_EXIT_ERROR;
}

int pkrt_cli_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pkrt_cli_vusage("pock-rt", fmt, ap);
  va_end(ap);
  return PKRT_EXIT_USAGE;
}

/* `pock-rt serve ...` is pock-rt-serve (its own binary, so that pock-rt stays small):
 * the one beside this executable, else the one on PATH. */
static int serve(char **argv) {
  char self[4096], path[4096 + 16];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  char *slash = n > 0 ? (self[n] = '\0', strrchr(self, '/')) : NULL;
  argv[1] = "pock-rt-serve";
  if (slash && snprintf(path, sizeof path, "%.*s/pock-rt-serve", (int)(slash - self), self) > 0)
    execv(path, argv + 1);
  execvp("pock-rt-serve", argv + 1);
  return pkrt_cli_fail("serve: cannot run pock-rt-serve (installed beside pock-rt or on PATH?)");
}

static int dispatch(int argc, char **argv) {
  if (argc < 2) {
    fputs(usage, stderr);
    return PKRT_EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (!strcmp(cmd, "--version") || !strcmp(cmd, "version")) {
    printf("pock-rt %s (kernel ABI v%u)\n", POCK_VERSION, PKRT_ABI_VERSION);
    return PKRT_EXIT_OK;
  }
  if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || !strcmp(cmd, "help")) {
    fputs(usage, stdout);
    return PKRT_EXIT_OK;
  }
  /* The same train and eval as pock's (cli_train.c). */
  if (!strcmp(cmd, "train")) return pkrt_cli_train("pock-rt", PKRT_CLI_TRAIN, argc - 2, argv + 2);
  if (!strcmp(cmd, "eval")) return pkrt_cli_train("pock-rt", PKRT_CLI_EVAL, argc - 2, argv + 2);
  if (!strcmp(cmd, "run")) return pkrt_cli_train("pock-rt", PKRT_CLI_RUN, argc - 2, argv + 2);
  if (!strcmp(cmd, "info")) return pkrt_cmd_info(argc - 2, argv + 2);
  if (!strcmp(cmd, "serve")) return serve(argv);
  if (!strcmp(cmd, "gpu")) return pkrt_cmd_gpu(argc - 2, argv + 2);
  return pkrt_cli_usage("unknown command '%s'", cmd);
}

/* Every command's output is checked in one place: a write to stdout that failed (a full
 * disk) turns success into exit 1 with a message. */
int main(int argc, char **argv) { return pkrt_cli_finish("pock-rt", dispatch(argc, argv)); }
