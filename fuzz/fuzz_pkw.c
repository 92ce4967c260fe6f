/* fuzz_pkw.c — libFuzzer target for the weights-file reader (pkrt_weights_parse: what
 * pkrt_weights_read, `pock compile --weights` and `pock eval --weights` run on a .pkw),
 * and for the writer on what it accepted: a file read must write back byte for byte. */
#include <stdint.h>
#include <unistd.h>

#include "fuzz_check.h"
#include "pkrt.h"

#define WHAT "fuzz.pkw"

/* The writer needs a file: one per process, in memory (/dev/shm) where there is one, so
 * its fsync costs nothing. */
static const char *out_path(void) {
  static char path[64];
  if (!path[0])
    snprintf(path, sizeof path, "%s/fuzz_pkw.%d.pkw",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp", (int)getpid());
  return path;
}

static void round_trip(pkrt_ctx *rt, const uint8_t *data, size_t size, const pkrt_wtensor *w,
                       int n) {
  if (pkrt_weights_write(rt, out_path(), w, n) != PKRT_OK) {
    fprintf(stderr, "an accepted file does not write back: %s\n", pkrt_ctx_error(rt));
    __builtin_trap();
  }
  FILE *f = fopen(out_path(), "rb");
  unsigned char *b = malloc(size + 1);
  size_t got = f && b ? fread(b, 1, size + 1, f) : 0;
  if (f) fclose(f);
  unlink(out_path());
  if (got != size || memcmp(b, data, size) != 0) {
    fprintf(stderr, "round trip differs: %zu bytes read, %zu written back\n", size, got);
    __builtin_trap();
  }
  free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_arena *a = pkrt_arena_new(0);
  pkrt_wtensor *w;
  int n;
  pkrt_status st = pkrt_weights_parse(rt, a, WHAT, data, size, &w, &n);
  fuzz_report(size, st == PKRT_OK, pkrt_ctx_error(rt));
  if (st != PKRT_OK) fuzz_check_refusal((int)st, pkrt_ctx_error(rt), WHAT);
  /* Small files only: the round trip costs a file write per input. */
  else if (size <= 4096)
    round_trip(rt, data, size, w, n);
  pkrt_arena_free(a);
  pkrt_ctx_free(rt);
  return 0;
}
