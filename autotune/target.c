/* target.c — the target fingerprint: must-match fields (arch and the ISA features
 * generated code may use, from the target description, codegen/target.c — on an AArch64
 * host, its Arm features from getauxval(AT_HWCAP, AT_HWCAP2)) and informative
 * ones (CPU model, cores, clocks, kernel of the measuring machine), as canonical JSON,
 * keyed by SHA-256 of target string + must-match. GPU targets' fields come from the
 * device (target_gpu.c; docs/tuning-db.md lists them).
 *
 * POCK_FAKE_FINGERPRINT (a JSON object) overrides must-match fields, so tests can play
 * another device: POCK_FAKE_FINGERPRINT='{"isa":["sse4_2"]}'. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "target_impl.h"

static const char *next_line(const char *line) {
  const char *nl = strchr(line, '\n');
  return nl && nl[1] ? nl + 1 : NULL;
}

/* The value of the first "key<tabs>: value" line in /proc/cpuinfo, or NULL. */
static char *cpuinfo_field(pk_ctx *ctx, const char *cpuinfo, const char *key) {
  size_t n = strlen(key);
  for (const char *line = cpuinfo; line; line = next_line(line)) {
    if (strncmp(line, key, n) != 0) continue;
    const char *p = line + n;
    while (*p == ' ' || *p == '\t') p++;
    if (*p != ':') continue;
    p++;
    while (*p == ' ') p++;
    return pk_strndup(ctx, p, strcspn(p, "\n"));
  }
  return NULL;
}

static cJSON *informative_fields(pk_ctx *ctx, const char *cpuinfo, const struct utsname *u) {
  cJSON *info = cJSON_CreateObject();
  char *model = cpuinfo ? cpuinfo_field(ctx, cpuinfo, "model name") : NULL;
  if (!model && cpuinfo) { /* AArch64 names the core by implementer and part number */
    char *impl = cpuinfo_field(ctx, cpuinfo, "CPU implementer");
    char *part = cpuinfo_field(ctx, cpuinfo, "CPU part");
    if (impl && part) model = pk_sprintf(ctx, "implementer %s part %s", impl, part);
  }
  cJSON_AddStringToObject(info, "cpu", model ? model : "unknown");
  cJSON_AddNumberToObject(info, "cores", (double)sysconf(_SC_NPROCESSORS_ONLN));
  char *mhz = cpuinfo ? cpuinfo_field(ctx, cpuinfo, "cpu MHz") : NULL;
  if (mhz) cJSON_AddNumberToObject(info, "mhz", (double)(long)(atof(mhz) + 0.5));
  char *max_khz = pk_target_read_sysfile(ctx, "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (max_khz) cJSON_AddNumberToObject(info, "max_mhz", (double)(atol(max_khz) / 1000));
  cJSON_AddStringToObject(info, "kernel", u->release);
  /* the measuring machine's caches (per core; L3 shared), as the presets size tiles by them */
  pk_target *native;
  if (pk_target_native(ctx, &native) == PK_OK) {
    const int64_t bytes[3] = {native->l1d_bytes, native->l2_bytes, native->l3_bytes};
    static const char *const keys[3] = {"l1d_bytes", "l2_bytes", "l3_bytes"};
    for (int i = 0; i < 3; i++)
      if (bytes[i] > 0) cJSON_AddNumberToObject(info, keys[i], (double)bytes[i]);
  } else {
    pk_ctx_clear_error(ctx); /* informative only */
  }
  return info;
}

/* Applies POCK_FAKE_FINGERPRINT's fields over the detected must-match object. */
static pk_status apply_fake(pk_ctx *ctx, cJSON *must, cJSON *info) {
  const char *fake = getenv("POCK_FAKE_FINGERPRINT");
  if (!fake || !*fake) return PK_OK;
  cJSON *over = cJSON_Parse(fake);
  if (!cJSON_IsObject(over)) {
    cJSON_Delete(over);
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "POCK_FAKE_FINGERPRINT is not a JSON object: %s", fake);
  }
  for (cJSON *f = over->child; f; f = f->next) {
    cJSON_DeleteItemFromObjectCaseSensitive(must, f->string);
    cJSON_AddItemToObject(must, f->string, cJSON_Duplicate(f, true));
  }
  cJSON_Delete(over);
  cJSON_AddTrueToObject(info, "fake"); /* visible in the database: not a real device */
  return PK_OK;
}

pk_status pk_target_fp_detect(pk_ctx *ctx, const char *target, pk_target_fp *out) {
  pk_target *t;
  pk_status s = pk_target_parse(ctx, target, NULL, &t);
  if (s != PK_OK) return s;
  return pk_target_fp_of(ctx, t, out);
}

pk_status pk_target_fp_of(pk_ctx *ctx, const pk_target *t, pk_target_fp *out) {
  memset(out, 0, sizeof *out);
  struct utsname u;
  if (uname(&u) != 0) return pk_ctx_fail(ctx, PK_ERR_IO, "uname: %s", strerror(errno));
  char *cpuinfo = pk_target_read_sysfile(ctx, "/proc/cpuinfo");

  /* must-match comes from the description (the compiler's view of a named CPU); the
   * informative fields say which machine measured, whatever it compiled for */
  cJSON *must = cJSON_CreateObject();
  cJSON *info = informative_fields(ctx, cpuinfo, &u);
  pk_status s = PK_OK;
  if (t->kind == PK_TARGET_C) {
    cJSON_AddStringToObject(must, "arch", t->arch);
    cJSON *isa = cJSON_AddArrayToObject(must, "isa");
    for (int i = 0; i < t->nisa; i++) cJSON_AddItemToArray(isa, cJSON_CreateString(t->isa[i]));
  } else { /* the device decides: a record timed on one GPU is not another's */
    s = pk_target_fp_gpu_fields(ctx, t, must, info);
  }
  if (s == PK_OK) s = apply_fake(ctx, must, info);
  if (s == PK_OK) {
    out->target = pk_strdup(ctx, t->text);
    out->must_match = pk_json_canonical(ctx, must);
    out->informative = pk_json_canonical(ctx, info);
    /* key = SHA-256("<target>\n<must_match>") */
    char *keyed = pk_sprintf(ctx, "%s\n%s", out->target, out->must_match);
    char hex[2 * PKRT_SHA256_BYTES + 1];
    pkrt_sha256_hex(keyed, strlen(keyed), hex);
    out->key = pk_strdup(ctx, hex);
  }
  cJSON_Delete(must);
  cJSON_Delete(info);
  return s;
}
