/* test_fingerprint.c — an artifact built for another kind of device is refused with an
 * error that names what differs: the compiler plays another device through
 * POCK_FAKE_FINGERPRINT (autotune/target.c), and the runtime's check is also run against
 * described devices (pkrt_artifact_check_memory). What must not matter — informative
 * fields, feature order, extra device features — does not. Prints PASS/FAIL per check. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "pk_driver.h"
#include "pkrt.h"
#include "pock/pockrt.h"
#include "pk_test.h"

#ifndef PK_SOURCE_DIR
#error "build with -DPK_SOURCE_DIR"
#endif
#define MODEL PK_SOURCE_DIR "/tests/fixtures/artifacts/fixture_mlp.json"

static char machine[65];

/* pock compile of the small fixture model, with POCK_FAKE_FINGERPRINT = fake (or unset). */
static int compile(const char *out, const char *fake) {
  if (fake) setenv("POCK_FAKE_FINGERPRINT", fake, 1);
  else unsetenv("POCK_FAKE_FINGERPRINT");
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = MODEL;
  o.batch = 4;
  o.out = out;
  FILE *log = fopen("/dev/null", "w");
  o.log = log;
  pk_compile_result r;
  pk_status s = pk_compile(ctx, &o, &r);
  if (s != PK_OK) printf("  compile %s: %s\n", out, pk_ctx_error(ctx));
  if (log) fclose(log);
  pk_ctx_free(ctx);
  unsetenv("POCK_FAKE_FINGERPRINT");
  return s == PK_OK ? 0 : -1;
}

/* Opens path; returns the exit code and copies the message. */
static int open_msg(const char *path, int skip, char *err, size_t cap) {
  pkrt_open_options o = {.skip_fingerprint = skip};
  pkrt_model *m = NULL;
  int rc = pkrt_model_open(path, &o, &m, err, cap);
  pkrt_model_close(m);
  return rc;
}

static void test_real_device_opens(void) {
  const char *p = pk_test_path("real.pock");
  CHECK(compile(p, NULL) == 0, "compile failed");
  char err[512];
  CHECK(open_msg(p, 0, err, sizeof err) == 0, "this device's own artifact is refused: %s", err);
  PASS();
}

static void test_other_arch_named(void) {
  const char *p = pk_test_path("riscv.pock");
  CHECK(compile(p, "{\"arch\":\"riscv64\"}") == 0, "compile failed");
  char err[512];
  int rc = open_msg(p, 0, err, sizeof err);
  CHECK(rc != 0, "an artifact for riscv64 opened on %s", machine);
  CHECK(strstr(err, "fingerprint.must_match.arch") && strstr(err, "'riscv64'") &&
            strstr(err, machine) && strstr(err, p),
        "message does not name the field, both values and the file: %s", err);
  /* The documented escape hatch for devices whose fingerprint cannot be read. */
  CHECK(open_msg(p, 1, err, sizeof err) == 0, "skip_fingerprint still refused: %s", err);
  PASS();
}

static void test_missing_feature_named(void) {
  const char *p = pk_test_path("isa.pock");
  CHECK(compile(p, "{\"isa\":[\"pock_test_feature\"]}") == 0, "compile failed");
  char err[512];
  int rc = open_msg(p, 0, err, sizeof err);
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) { /* without cpuinfo the runtime cannot know features, and says nothing */
    CHECK(rc == 0, "refused without /proc/cpuinfo: %s", err);
    printf("PASS %s (no /proc/cpuinfo)\n", __func__);
    return;
  }
  fclose(f);
  CHECK(rc != 0, "an artifact needing 'pock_test_feature' opened");
  CHECK(strstr(err, "fingerprint.must_match.isa") && strstr(err, "'pock_test_feature'") &&
            strstr(err, p),
        "message does not name the missing feature and the file: %s", err);
  PASS();
}

/* ---- the runtime's check against described devices ---- */

/* An artifact whose must_match is replaced by the given JSON (NULL: removed). */
static unsigned char *with_must_match(const char *must_json, const char *informative,
                                      size_t *len) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_artifact *a;
  unsigned char *bytes = NULL;
  if (pkrt_artifact_read(rt, pk_test_path("real.pock"), &a) != PKRT_OK) {
    printf("  %s\n", pkrt_ctx_error(rt));
    pkrt_ctx_free(rt);
    return NULL;
  }
  const pkrt_section *man = pkrt_artifact_find(a, "manifest");
  cJSON *j = cJSON_ParseWithLength(man->data, man->size);
  cJSON *fp = cJSON_CreateObject();
  if (must_json) cJSON_AddItemToObject(fp, "must_match", cJSON_Parse(must_json));
  if (informative) cJSON_AddItemToObject(fp, "informative", cJSON_Parse(informative));
  cJSON_ReplaceItemInObject(j, "fingerprint", fp);
  char *text = cJSON_PrintUnformatted(j);
  pkrt_section s[PKRT_ARTIFACT_MAX_SECTIONS];
  int n = pkrt_artifact_count(a);
  for (int i = 0; i < n; i++) {
    s[i] = *pkrt_artifact_section(a, i);
    if (strcmp(s[i].name, "manifest") == 0) s[i] = (pkrt_section){"manifest", text, strlen(text)};
  }
  const char *p = pk_test_path("edited.pock");
  if (pkrt_artifact_write(rt, p, s, n) == PKRT_OK) {
    FILE *f = fopen(p, "rb");
    fseek(f, 0, SEEK_END);
    *len = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes = malloc(*len);
    if (fread(bytes, 1, *len, f) != *len) {
      free(bytes);
      bytes = NULL;
    }
    fclose(f);
  }
  free(text);
  cJSON_Delete(j);
  pkrt_artifact_free(a);
  pkrt_ctx_free(rt);
  return bytes;
}

typedef struct fp_case {
  const char *name, *must, *informative;
  const char *dev_machine, *dev_cpuinfo;
  const char *says[3]; /* NULL-terminated substrings of the error; says[0] NULL: accepted */
  const char *not_says;
} fp_case;

static void test_described_devices(void) {
  static const char x86[] = "processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma avx512f\n";
  static const char arm[] = "processor\t: 0\nFeatures\t: fp asimd asimddp\nCPU part\t: 0xd0c\n";
  static const fp_case cases[] = {
      {"same device", "{\"arch\":\"x86_64\",\"isa\":[\"avx2\",\"fma\"]}", NULL, "x86_64", x86,
       {NULL}, NULL},
      {"feature order and extra device features do not matter",
       "{\"arch\":\"x86_64\",\"isa\":[\"fma\",\"sse2\"]}", NULL, "x86_64", x86, {NULL}, NULL},
      {"informative fields never matter", "{\"arch\":\"x86_64\"}",
       "{\"cpu\":\"another CPU\",\"cores\":512,\"mhz\":1}", "x86_64", x86, {NULL}, NULL},
      {"no must_match: nothing to compare", NULL, NULL, "riscv64", "", {NULL}, NULL},
      {"other arch", "{\"arch\":\"x86_64\",\"isa\":[\"avx2\"]}", NULL, "aarch64", arm,
       {"fingerprint.must_match.arch", "'x86_64'", "'aarch64'"}, NULL},
      {"missing x86 feature", "{\"arch\":\"x86_64\",\"isa\":[\"avx2\",\"avx512bw\"]}", NULL,
       "x86_64", x86, {"fingerprint.must_match.isa", "'avx512bw'", NULL}, "'avx2'"},
      {"a feature is a whole word: avx512 is not avx512f", "{\"isa\":[\"avx512\"]}", NULL, "x86_64",
       x86, {"'avx512'", NULL}, NULL},
      {"AArch64 Features line", "{\"arch\":\"aarch64\",\"isa\":[\"asimd\",\"sve\"]}", NULL,
       "aarch64", arm, {"'sve'", "fingerprint.must_match.isa", NULL}, NULL},
      {"AArch64 device has them", "{\"arch\":\"aarch64\",\"isa\":[\"asimddp\",\"asimd\"]}",
       NULL, "aarch64", arm, {NULL}, NULL},
  };
  pkrt_ctx *rt = pkrt_ctx_new(1);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const fp_case *c = &cases[i];
    size_t len;
    unsigned char *b = with_must_match(c->must, c->informative, &len);
    if (!b) {
      pkrt_ctx_free(rt);
      CHECK(0, "%s: cannot build the artifact", c->name);
    }
    pkrt_check_options o = {.machine = c->dev_machine, .cpuinfo = c->dev_cpuinfo};
    pkrt_status st = pkrt_artifact_check_memory(rt, "edited.pock", b, len, &o);
    free(b);
    const char *e = pkrt_ctx_error(rt);
    int ok = c->says[0] ? st != PKRT_OK : st == PKRT_OK;
    for (int k = 0; ok && k < 3 && c->says[k]; k++) ok = strstr(e, c->says[k]) != NULL;
    if (ok && c->not_says) ok = !strstr(e, c->not_says);
    if (!ok) {
      char msg[512];
      snprintf(msg, sizeof msg, "%s", e);
      pkrt_ctx_free(rt);
      CHECK(0, "%s: status %d, message '%s'", c->name, (int)st, msg);
    }
  }
  pkrt_ctx_free(rt);
  PASS();
}

int main(void) {
  struct utsname u;
  if (uname(&u) != 0) return perror("uname"), 1;
  snprintf(machine, sizeof machine, "%s", u.machine);
  if (pk_test_tmpdir_make("pk_fingerprint_") != 0) return 1;
  test_real_device_opens();
  test_other_arch_named();
  test_missing_feature_named();
  test_described_devices();
  pk_test_tmpdir_remove();
  return pk_test_summary("test_fingerprint");
}
