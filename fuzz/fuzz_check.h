/* fuzz_check.h — the invariants every fuzz target checks on a refusal, beyond "no crash,
 * no sanitizer report": it carries a message, the message names the input, and it holds
 * no control characters (messages reach terminals; hostile bytes must not carry escape
 * sequences there). A broken invariant traps, which libFuzzer reports as a crash. */
#ifndef FUZZ_CHECK_H
#define FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* FUZZ_VERBOSE=1 (replaying a corpus): print how far each input got. */
static inline int fuzz_verbose(void) {
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("FUZZ_VERBOSE") != NULL;
  return verbose;
}

/* msg: the refusal's message (NULL or "" traps); what: the name the input was given,
 * which the message must start with (NULL: any start). */
static inline void fuzz_check_refusal(int status, const char *msg, const char *what) {
  if (!msg || !*msg) {
    fprintf(stderr, "refused (status %d) without a message\n", status);
    __builtin_trap();
  }
  if (what && strncmp(msg, what, strlen(what)) != 0) {
    fprintf(stderr, "message does not name the input %s: %s\n", what, msg);
    __builtin_trap();
  }
  for (const char *c = msg; *c; c++)
    if ((unsigned char)*c < 0x20 || *c == 0x7f) {
      fprintf(stderr, "message has control character 0x%02x: %s\n", (unsigned char)*c, msg);
      __builtin_trap();
    }
}

static inline void fuzz_report(size_t size, int ok, const char *msg) {
  if (fuzz_verbose()) fprintf(stderr, "%zu bytes: %s\n", size, ok ? "accepted" : msg);
}

#endif
