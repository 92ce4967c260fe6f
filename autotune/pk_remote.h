/* pk_remote.h — the host end of remote tuning (docs/remote-tuning.md): a connection to a
 * device's `pock-rt-serve`, every request signed with the fleet key, and what the device
 * said about itself (INFO). The measurer measures through it when its settings name one
 * (pk_measure_settings.remote): candidates are built here with the target's (cross)
 * compiler, the reference is computed here, and the device loads, checks and times.
 *
 * Usage (what `pock tune --remote` does):
 *   pk_remote *r;
 *   pk_remote_open(ctx, "jetson:7070", "fleet.key", &r);   // connects, asks INFO
 *   pk_remote_info_of(r)->arch ... pick the target and compiler for it
 *   pk_target_fp fp; pk_remote_fingerprint(ctx, r, target, &fp); // refuses a target the
 *                                                                  // device cannot run
 *   set.remote = r; pk_measurer_new(ctx, &set, &m); ...   (pk_tune does both)
 *   pk_remote_close(r);
 */
#ifndef PK_REMOTE_H
#define PK_REMOTE_H

#include <cjson/cJSON.h>
#include <stdbool.h>

#include "pk_autotune.h"

/* The device, as its server's INFO answer says (strings in the ctx of pk_remote_open). */
typedef struct pk_remote_info {
  const char *arch;      /* uname -m: "x86_64", "aarch64" */
  const char *features;  /* CPU features, blank-separated (AArch64: from its hwcaps) */
  const char *cpu;       /* model name, or "implementer 0x41 part 0xd42" */
  const char *kernel;    /* uname -r */
  int cores;
  bool emulated;         /* the server runs under an emulator (qemu-user): its timings
                            mean nothing (tests only) */
} pk_remote_info;

typedef struct pk_remote pk_remote;

/* Connects to HOST:PORT ("[v6addr]:PORT" too), reads the server's hello, loads the secret
 * key file (pock keygen's NAME.key) and asks INFO. A refusal (wrong key) is an error here,
 * naming the server and its reason. */
pk_status pk_remote_open(pk_ctx *ctx, const char *hostport, const char *key_path, pk_remote **out);
const char *pk_remote_name(const pk_remote *r);   /* "HOST:PORT" as given */
const pk_remote_info *pk_remote_info_of(const pk_remote *r);

/* The records' fingerprint for target t measured on this device: refuses (PK_ERR_USAGE,
 * naming the field) a target whose arch is not the device's or whose ISA features the
 * device lacks; the must-match fields and key are the target's (pk_target_fp_of), the
 * informative ones the device's, with "remote":"HOST:PORT". */
pk_status pk_remote_fingerprint(pk_ctx *ctx, const pk_remote *r, const pk_target *t,
                                pk_target_fp *out);

/* One request: signs body (JSON and payload, pkrt_remote.h), sends it, and waits up to
 * timeout_s for the answer. PK_OK and *answer (cJSON_Delete it) when one came; else the
 * connection is over (the server is gone, refused the request, or did not answer in time):
 * PK_ERR_RUNTIME with the reason in r's ctx, and every later call fails the same way. */
pk_status pk_remote_call(pk_remote *r, const void *body, size_t len, double timeout_s,
                         cJSON **answer);
/* The reason the connection is over, or NULL while it is up. */
const char *pk_remote_broken(const pk_remote *r);

/* Builds a request body (malloc'd, 8-byte aligned; NULL when out of memory): the JSON object
 * j (not consumed) and the payload bytes. */
void *pk_remote_body(const cJSON *j, const void *payload, size_t payload_len, size_t *len);

void pk_remote_close(pk_remote *r); /* NULL is ok */

#endif
