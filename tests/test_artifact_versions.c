/* test_artifact_versions.c — the version policy (docs/artifact-format.md): every artifact
 * version the runtime keeps has a committed fixture (tests/fixtures/artifacts/, v1 now)
 * that must still open and train; versions it refuses fail with an error naming the
 * version; what later versions may add (unknown sections, unknown manifest keys) is
 * ignored. Prints PASS/FAIL per check. */
#define _GNU_SOURCE
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "pkrt.h"
#include "pock/pockrt.h"
#include "pk_test.h"

#ifndef PK_SOURCE_DIR
#error "build with -DPK_SOURCE_DIR"
#endif
#define FIXTURES PK_SOURCE_DIR "/tests/fixtures/artifacts"

static int is_x86_64(void) {
  struct utsname u;
  return uname(&u) == 0 && strcmp(u.machine, "x86_64") == 0;
}

/* The fixture's one batch: fixed features and labels, so its loss is known. */
static void feed(pkrt_model *m) {
  float *x = pkrt_model_input(m, NULL);
  for (int i = 0; i < 4 * 8; i++) x[i] = (float)sin(0.37 * i) * 0.8f;
  int32_t labels[4] = {0, 1, 2, 3};
  pkrt_model_set_labels(m, labels, 4);
}

/* Recorded when v1_mlp.pock was made (make_v1.sh); the kernels are built without
 * -march=native, so every x86-64 gives these up to rounding. */
#define V1_LOSS1 1.3748282194137573
#define V1_LOSS2 1.3623931407928467

static void test_v1_fixture_trains(void) {
  char err[512];
  pkrt_model *m;
  int rc = pkrt_model_open(FIXTURES "/v1_mlp.pock", NULL, &m, err, sizeof err);
  if (!is_x86_64()) {
    /* Its kernel object is x86-64 code: elsewhere the fingerprint must refuse it. */
    CHECK(rc != 0 && strstr(err, "x86_64"), "a non-x86 device opened it: %s", err);
    printf("PASS %s (refused on this arch: %s)\n", __func__, err);
    return;
  }
  CHECK(rc == 0, "the v1 fixture does not open: %s", err);
  CHECK(pkrt_model_batch(m) == 4 && pkrt_model_classes(m) == 4 && pkrt_model_features(m) == 8 &&
            pkrt_model_can_train(m) && pkrt_model_dtype(m) == PKRT_DTYPE_F32,
        "batch %lld classes %lld features %lld", (long long)pkrt_model_batch(m),
        (long long)pkrt_model_classes(m), (long long)pkrt_model_features(m));
  double l1 = NAN, l2 = NAN, le = NAN;
  feed(m);
  int r1 = pkrt_model_train_step(m, &l1);
  int r2 = pkrt_model_train_step(m, &l2);
  int r3 = pkrt_model_eval_step(m, &le);
  int r4 = pkrt_model_infer(m);
  const char *e = pkrt_model_error(m);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", e);
  pkrt_model_close(m);
  CHECK(r1 == 0 && r2 == 0 && r3 == 0 && r4 == 0, "a step failed: %s", msg);
  CHECK(fabs(l1 - V1_LOSS1) < 1e-5 && fabs(l2 - V1_LOSS2) < 1e-5,
        "losses %.17g, %.17g; recorded %.17g, %.17g", l1, l2, V1_LOSS1, V1_LOSS2);
  CHECK(le < l2, "eval after two steps %.6f is not below step 2's %.6f", le, l2);
  printf("PASS %s (loss %.6f -> %.6f -> eval %.6f)\n", __func__, l1, l2, le);
}

/* Container versions other than 1 are refused, naming the version. */
static void test_refused_container_versions(void) {
  size_t len;
  unsigned char *b = pk_test_read_file(FIXTURES "/v1_mlp.pock", &len);
  CHECK(b && len > 16, "cannot read the fixture");
  const uint32_t versions[] = {0, 2, 7, 0x01000000u, 0xffffffffu};
  for (size_t i = 0; i < sizeof versions / sizeof versions[0]; i++) {
    uint32_t v = versions[i];
    for (int k = 0; k < 4; k++) b[8 + k] = (unsigned char)(v >> (8 * k));
    const char *p = pk_test_path("version.pock");
    CHECK(pk_test_write_file(p, b, len) == 0, "cannot write %s", p);
    char err[512], want[64];
    pkrt_model *m = NULL;
    int rc = pkrt_model_open(p, NULL, &m, err, sizeof err);
    snprintf(want, sizeof want, "format version %u is not supported", v);
    if (rc == 0) pkrt_model_close(m);
    CHECK(rc != 0 && m == NULL, "version %u opened", v);
    CHECK(strstr(err, want) && strstr(err, "reads 1") && strstr(err, p),
          "version %u: message '%s' lacks '%s', 'reads 1' or the path", v, err, want);
  }
  free(b);
  PASS();
}

/* Rewrites the fixture with a changed manifest and optional extra sections. */
static int rewrite(const char *out, void (*edit)(cJSON *), const pkrt_section *extra, int nextra) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_artifact *a;
  int rc = -1;
  if (pkrt_artifact_read(rt, FIXTURES "/v1_mlp.pock", &a) != PKRT_OK) {
    printf("  %s\n", pkrt_ctx_error(rt));
    pkrt_ctx_free(rt);
    return -1;
  }
  const pkrt_section *man = pkrt_artifact_find(a, "manifest");
  cJSON *j = cJSON_ParseWithLength(man->data, man->size);
  if (j) {
    if (edit) edit(j);
    char *text = cJSON_PrintUnformatted(j);
    pkrt_section s[PKRT_ARTIFACT_MAX_SECTIONS];
    int n = 0;
    for (int i = 0; i < pkrt_artifact_count(a); i++) {
      s[n] = *pkrt_artifact_section(a, i);
      if (strcmp(s[n].name, "manifest") == 0) s[n] = (pkrt_section){"manifest", text, strlen(text)};
      n++;
    }
    for (int i = 0; i < nextra; i++) s[n++] = extra[i];
    rc = pkrt_artifact_write(rt, out, s, n) == PKRT_OK ? 0 : -1;
    if (rc) printf("  %s\n", pkrt_ctx_error(rt));
    free(text);
    cJSON_Delete(j);
  }
  pkrt_artifact_free(a);
  pkrt_ctx_free(rt);
  return rc;
}

static int g_format;
static void set_format(cJSON *j) { cJSON_ReplaceItemInObject(j, "format", cJSON_CreateNumber(g_format)); }

/* Manifest formats other than 1 to 3 are refused, naming the format (3 is GPU targets'
 * alone: test_gpu_model checks it with a C target). */
static void test_refused_manifest_formats(void) {
  const int formats[] = {0, 4, 99};
  for (size_t i = 0; i < sizeof formats / sizeof formats[0]; i++) {
    g_format = formats[i];
    const char *p = pk_test_path("format.pock");
    CHECK(rewrite(p, set_format, NULL, 0) == 0, "cannot write %s", p);
    char err[512], want[64];
    pkrt_model *m = NULL;
    int rc = pkrt_model_open(p, NULL, &m, err, sizeof err);
    if (rc == 0) pkrt_model_close(m);
    snprintf(want, sizeof want, "manifest version %d is not supported", g_format);
    CHECK(rc != 0 && strstr(err, want) && strstr(err, "format"),
          "format %d: rc %d, message '%s' lacks '%s'", g_format, rc, err, want);
  }
  PASS();
}

static void add_future_keys(cJSON *j) {
  cJSON_AddStringToObject(j, "added_in_v2", "a later writer's key");
  cJSON *t = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "tensors"), 0);
  cJSON_AddNumberToObject(t, "future_field", 3);
}

/* What later writers may add — sections and manifest keys this runtime does not know —
 * is ignored: such a file opens and trains like the fixture. */
static void test_forward_compatible_additions(void) {
  if (!is_x86_64()) {
    printf("PASS %s (skipped: the fixture's kernels are x86-64)\n", __func__);
    return;
  }
  static const char note[] = "{\"written_by\": \"a later pock\"}";
  pkrt_section extra[2] = {{"future.notes", note, sizeof note - 1}, {"z-empty", NULL, 0}};
  const char *p = pk_test_path("future.pock");
  CHECK(rewrite(p, add_future_keys, extra, 2) == 0, "cannot write %s", p);
  char err[512];
  pkrt_model *m;
  CHECK(pkrt_model_open(p, NULL, &m, err, sizeof err) == 0, "refused: %s", err);
  double l1 = NAN;
  feed(m);
  int rc = pkrt_model_train_step(m, &l1);
  pkrt_model_close(m);
  CHECK(rc == 0 && fabs(l1 - V1_LOSS1) < 1e-5, "rc %d loss %.17g", rc, l1);
  PASS();
}

/* The fixture passes every check open makes without loading (what the fuzzer drives). */
static void test_fixture_checks_without_loading(void) {
  size_t len;
  unsigned char *b = pk_test_read_file(FIXTURES "/v1_mlp.pock", &len);
  CHECK(b, "cannot read the fixture");
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_check_options o = {.machine = "x86_64", .cpuinfo = "flags : fpu sse2\n"};
  pkrt_status st = pkrt_artifact_check_memory(rt, "v1_mlp.pock", b, len, &o);
  char msg[512];
  snprintf(msg, sizeof msg, "%s", pkrt_ctx_error(rt));
  o.machine = "aarch64";
  pkrt_status st2 = pkrt_artifact_check_memory(rt, "v1_mlp.pock", b, len, &o);
  char msg2[512];
  snprintf(msg2, sizeof msg2, "%s", pkrt_ctx_error(rt));
  pkrt_ctx_free(rt);
  free(b);
  CHECK(st == PKRT_OK, "refused: %s", msg);
  CHECK(st2 != PKRT_OK && strstr(msg2, "aarch64") && strstr(msg2, "x86_64"),
        "an aarch64 device was not refused: %s", msg2);
  PASS();
}

int main(void) {
  if (pk_test_tmpdir_make("pk_versions_") != 0) return 1;
  test_v1_fixture_trains();
  test_refused_container_versions();
  test_refused_manifest_formats();
  test_forward_compatible_additions();
  test_fixture_checks_without_loading();
  pk_test_tmpdir_remove();
  return pk_test_summary("test_artifact_versions");
}
