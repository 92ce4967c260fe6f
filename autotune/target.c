/* target.c — the target fingerprint of this device: must-match fields (machine arch and
 * the ISA features generated code may use) and informative ones (CPU model, cores, clocks,
 * kernel), as canonical JSON, keyed by SHA-256 of target string + must-match.
 *
 * POCK_FAKE_FINGERPRINT (a JSON object) overrides must-match fields, so tests can play
 * another device: POCK_FAKE_FINGERPRINT='{"isa":["sse4_2"]}'. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json_canon.h"
#include "pk_autotune.h"

extern char **environ;

/* The ISA features code generation may rely on: the /proc/cpuinfo flag name (what the
 * fingerprint stores) and the compiler macro that says `-march=X` enables it. Features
 * that never change generated code (e.g. aes, rdrand) are left out, so two devices that
 * differ only in them share records. */
static const struct isa_feature {
  const char *flag;
  const char *macro;
} isa_features[] = {
    /* x86-64 */
    {"sse4_2", "__SSE4_2__"},
    {"avx", "__AVX__"},
    {"avx2", "__AVX2__"},
    {"fma", "__FMA__"},
    {"f16c", "__F16C__"},
    {"avx512f", "__AVX512F__"},
    {"avx512bw", "__AVX512BW__"},
    {"avx512vl", "__AVX512VL__"},
    {"avx512dq", "__AVX512DQ__"},
    {"avx512_bf16", "__AVX512BF16__"},
    /* AArch64 */
    {"asimd", "__ARM_NEON"},
    {"asimdhp", "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC"},
    {"asimddp", "__ARM_FEATURE_DOTPROD"},
    {"i8mm", "__ARM_FEATURE_MATMUL_INT8"},
    {"bf16", "__ARM_FEATURE_BF16_VECTOR_ARITHMETIC"},
    {"sve", "__ARM_FEATURE_SVE"},
    {"sve2", "__ARM_FEATURE_SVE2"},
};
enum { NFEATURES = sizeof isa_features / sizeof isa_features[0] };

/* Whether the space-separated word list has word. */
static bool has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)) != NULL; p += n) {
    bool starts = p == list || isspace((unsigned char)p[-1]);
    bool ends = p[n] == '\0' || isspace((unsigned char)p[n]);
    if (starts && ends) return true;
  }
  return false;
}

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

/* The features this CPU has: what `-march=native` lets the compiler use. */
static void isa_from_cpuinfo(const char *cpuinfo, bool have[NFEATURES]) {
  for (int i = 0; i < NFEATURES; i++) have[i] = false;
  /* x86 says "flags", AArch64 "Features"; only the first CPU's line is read (all CPUs of
   * one device share an ISA). */
  for (const char *line = cpuinfo; line; line = next_line(line)) {
    if (strncmp(line, "flags", 5) != 0 && strncmp(line, "Features", 8) != 0) continue;
    const char *colon = strchr(line, ':');
    const char *end = strchr(line, '\n');
    if (!colon || (end && colon > end)) continue;
    size_t len = end ? (size_t)(end - colon - 1) : strlen(colon + 1);
    char *list = strndup(colon + 1, len);
    PK_ASSERT(list);
    for (int i = 0; i < NFEATURES; i++) have[i] = has_word(list, isa_features[i].flag);
    free(list);
    return;
  }
}

/* The features `-march=cpu` enables, from the compiler's predefined macros (the same
 * compiler codegen uses: $CC, else cc). */
static pk_status isa_from_march(pk_ctx *ctx, const char *target, const char *cpu,
                                bool have[NFEATURES]) {
  const char *env_cc = getenv("CC");
  char *cc = pk_strdup(ctx, env_cc && *env_cc ? env_cc : "cc");
  char *march = pk_sprintf(ctx, "-march=%s", cpu);
  char *argv[] = {cc, march, (char *)"-dM", (char *)"-E", (char *)"-x", (char *)"c",
                  (char *)"/dev/null", NULL};
  char *out;
  int rc = pk_run_capture(ctx, argv, &out);
  if (rc != 0) {
    size_t first_line = strcspn(out, "\n");
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "target '%s': %s rejects %s: %.*s", target, cc, march,
                       (int)first_line, out);
  }
  for (int i = 0; i < NFEATURES; i++) {
    char *def = pk_sprintf(ctx, "#define %s ", isa_features[i].macro);
    have[i] = strstr(out, def) != NULL;
  }
  return PK_OK;
}

/* target := "c" [" -march=" CPU] — CPU "native" or absent: this CPU's features. */
static pk_status parse_c_target(pk_ctx *ctx, const char *target, const char **cpu) {
  *cpu = NULL;
  const char *p = target;
  while (*p == ' ') p++;
  if (p[0] != 'c' || (p[1] != '\0' && p[1] != ' ')) {
    size_t word = strcspn(p, " ");
    return pk_ctx_fail(ctx, PK_ERR_UNSUPPORTED,
                       "target '%s': fingerprints exist for C targets only (\"c\", \"c -march=CPU\"), not '%.*s'",
                       target, (int)word, p);
  }
  for (p++; *p;) {
    while (*p == ' ') p++;
    if (!*p) break;
    size_t len = strcspn(p, " ");
    if (strncmp(p, "-march=", 7) != 0 || len == 7)
      return pk_ctx_fail(ctx, PK_ERR_USAGE, "target '%s': unknown option '%.*s' (expected -march=CPU)",
                         target, (int)len, p);
    for (size_t i = 7; i < len; i++)
      if (!isalnum((unsigned char)p[i]) && !strchr("._+-", p[i]))
        return pk_ctx_fail(ctx, PK_ERR_USAGE, "target '%s': bad CPU name in '%.*s'", target,
                           (int)len, p);
    *cpu = pk_strndup(ctx, p + 7, len - 7);
    p += len;
  }
  if (*cpu && !strcmp(*cpu, "native")) *cpu = NULL;
  return PK_OK;
}

static char *read_small_file(pk_ctx *ctx, const char *path) {
  char *text;
  size_t len;
  if (pk_read_file(ctx, path, &text, &len) != PK_OK) {
    pk_ctx_clear_error(ctx); /* informative only: a missing file leaves a field out */
    return NULL;
  }
  return text;
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
  char *max_khz = read_small_file(ctx, "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq");
  if (max_khz) cJSON_AddNumberToObject(info, "max_mhz", (double)(atol(max_khz) / 1000));
  cJSON_AddStringToObject(info, "kernel", u->release);
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
  memset(out, 0, sizeof *out);
  if (!target) target = "c";
  const char *cpu;
  pk_status s = parse_c_target(ctx, target, &cpu);
  if (s != PK_OK) return s;
  struct utsname u;
  if (uname(&u) != 0) return pk_ctx_fail(ctx, PK_ERR_IO, "uname: %s", strerror(errno));
  char *cpuinfo = read_small_file(ctx, "/proc/cpuinfo");

  bool have[NFEATURES];
  if (cpu) {
    if ((s = isa_from_march(ctx, target, cpu, have)) != PK_OK) return s;
  } else if (cpuinfo) {
    isa_from_cpuinfo(cpuinfo, have);
  } else {
    return pk_ctx_fail(ctx, PK_ERR_IO,
                       "target '%s': cannot read /proc/cpuinfo to find this CPU's features "
                       "(give -march=CPU)", target);
  }

  cJSON *must = cJSON_CreateObject();
  cJSON_AddStringToObject(must, "arch", u.machine);
  cJSON *isa = cJSON_AddArrayToObject(must, "isa");
  /* sorted names: the array is part of the key, so its order must not depend on the table */
  const char *names[NFEATURES];
  int n = 0;
  for (int i = 0; i < NFEATURES; i++)
    if (have[i]) names[n++] = isa_features[i].flag;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
      const char *t = names[j];
      names[j] = names[j - 1];
      names[j - 1] = t;
    }
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(isa, cJSON_CreateString(names[i]));

  cJSON *info = informative_fields(ctx, cpuinfo, &u);
  s = apply_fake(ctx, must, info);
  if (s == PK_OK) {
    out->target = pk_strdup(ctx, target);
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
