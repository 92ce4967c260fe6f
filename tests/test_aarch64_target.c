/* test_aarch64_target.c — AArch64 (Jetson, Raspberry Pi) targets on any host (issue 19):
 * hardware-capability bits named as /proc/cpuinfo names them; with Debian's
 * aarch64-linux-gnu-gcc, descriptions of named Arm CPUs and -march strings, an artifact
 * cross-compiled for a Cortex-A78AE whose fingerprint is the target's, refused on this
 * x86-64 host and checked against described Arm devices (features missing or extra, other
 * part numbers): the field that differs is named. Prints PASS/FAIL per check. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "pk_autotune.h"
#include "pk_driver.h"
#include "pk_test.h"
#include "pkrt.h"
#include "pock/pockrt.h"

#ifndef PK_SOURCE_DIR
#error "build with -DPK_SOURCE_DIR"
#endif
#define MODEL PK_SOURCE_DIR "/tests/fixtures/artifacts/fixture_mlp.json"
#define CROSS_CC "aarch64-linux-gnu-gcc"

/* Bits of arch/arm64/include/uapi/asm/hwcap.h, spelled out: this test runs on x86 too. */
enum {
  FP = 1 << 0, ASIMD = 1 << 1, EVTSTRM = 1 << 2, AES = 1 << 3, CRC32 = 1 << 7,
  ATOMICS = 1 << 8, FPHP = 1 << 9, ASIMDHP = 1 << 10, CPUID = 1 << 11, ASIMDDP = 1 << 20,
  SVE = 1 << 22
};
enum { H2_SVE2 = 1 << 1, H2_I8MM = 1 << 13, H2_BF16 = 1 << 14 };
/* what Linux reports on a Cortex-A78AE (Jetson Orin), less the bits Pock never reads */
#define A78AE (FP | ASIMD | EVTSTRM | AES | CRC32 | ATOMICS | FPHP | ASIMDHP | CPUID | ASIMDDP)

static void test_hwcap_names(void) {
  char line[PKRT_HWCAP_LINE_MAX];
  size_t n = pkrt_hwcap_features(FP | ASIMD | ASIMDDP | SVE, H2_SVE2 | H2_I8MM | H2_BF16, line,
                                 sizeof line);
  CHECK(n == strlen(line) && !strcmp(line, "Features\t: fp asimd asimddp sve sve2 i8mm bf16\n"),
        "hwcap bits named '%s'", line);
  CHECK(pkrt_hwcap_features(~0ul, ~0ul, line, 16) == 0, "a short buffer was not refused");
  pkrt_hwcap_features(~0ul, ~0ul, line, sizeof line);
  CHECK(strstr(line, " fphp ") && strstr(line, " pacg ") && strstr(line, " mte"),
        "every bit has its name: %s", line);
#if defined(__aarch64__)
  CHECK(pkrt_hwcap_this(line, sizeof line) > 0 && strstr(line, " asimd"),
        "this AArch64 device's hwcaps: %s", line);
#else
  CHECK(pkrt_hwcap_this(line, sizeof line) == 0, "hwcaps read on a non-AArch64 host");
#endif
  PASS();
}

/* Whether the cross compiler runs. */
static bool have_cross(pk_ctx *ctx) {
  char *out;
  char *argv[] = {(char *)CROSS_CC, (char *)"-dumpmachine", NULL};
  return pk_run_capture(ctx, argv, &out) == 0;
}

static const char *isa_list(pk_ctx *ctx, const pk_target *t) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  for (int i = 0; i < t->nisa; i++) pk_strbuf_printf(&b, "%s%s", i ? " " : "", t->isa[i]);
  return pk_strbuf_finish(ctx, &b);
}

/* The compiler's view of named Arm CPUs: features implied by the CPU, NEON's 16-byte
 * vectors, 32 registers, never this host's values. */
static void test_descriptions(pk_ctx *ctx) {
  static const struct {
    const char *target, *isa;
  } cases[] = {
      {"c -mcpu=cortex-a78ae", "asimd asimddp asimdhp fphp"}, /* Jetson Orin */
      {"c -mcpu=cortex-a72", "asimd"},                         /* Raspberry Pi 4 */
      {"c -mcpu=cortex-a76", "asimd asimddp asimdhp fphp"},   /* Raspberry Pi 5 */
      {"c -march=armv8.2-a+dotprod", "asimd asimddp"},
      {"c -march=armv8.6-a+sve2", "asimd asimddp asimdhp bf16 fphp i8mm sve sve2"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    pk_target *t;
    CHECK(pk_target_parse(ctx, cases[i].target, CROSS_CC, &t) == PK_OK, "%s: %s", cases[i].target,
          pk_ctx_error(ctx));
    CHECK(!strcmp(t->arch, "aarch64") && !t->native && t->vector_bytes == 16 &&
              t->vector_regs == 32 && t->l1d_bytes == 0 && t->cores == 0 &&
              !strcmp(isa_list(ctx, t), cases[i].isa) &&
              !strcmp(pk_target_cpu_option(ctx, t), cases[i].target + 2),
          "%s described as %s (want isa %s)", cases[i].target, pk_target_describe(ctx, t),
          cases[i].isa);
  }
  pk_target *bad;
  CHECK(pk_target_parse(ctx, "c -mcpu=cortex-z99", CROSS_CC, &bad) == PK_ERR_BUILD &&
            strstr(pk_ctx_error(ctx), "cortex-z99"),
        "an unknown Arm CPU: %s", pk_ctx_error(ctx));
  pk_ctx_clear_error(ctx);
  struct utsname u;
  if (uname(&u) == 0 && strcmp(u.machine, "aarch64") != 0) { /* an Arm CPU, the host's cc */
    CHECK(pk_target_parse(ctx, "c -mcpu=cortex-a78ae", "cc", &bad) == PK_ERR_BUILD &&
              strstr(pk_ctx_error(ctx), "error") && strstr(pk_ctx_error(ctx), "--cc aarch64-linux-gnu-gcc"),
          "an Arm CPU for this host's compiler: %s", pk_ctx_error(ctx));
    pk_ctx_clear_error(ctx);
  }
  PASS();
}

/* Cross-compiles the fixture model for a Cortex-A78AE; the artifact's bytes. */
static unsigned char *cross_artifact(size_t *len) {
  pk_ctx *ctx = pk_ctx_new();
  pk_compile_options o = pk_compile_defaults();
  o.model = MODEL;
  o.batch = 4;
  o.target = "c -mcpu=cortex-a78ae";
  o.cc = CROSS_CC;
  o.out = pk_test_path("a78ae.pock");
  FILE *log = fopen("/dev/null", "w");
  o.log = log;
  pk_compile_result r;
  pk_status s = pk_compile(ctx, &o, &r);
  if (s != PK_OK) printf("  compile: %s\n", pk_ctx_error(ctx));
  if (log) fclose(log);
  pk_ctx_free(ctx);
  return s == PK_OK ? pk_test_read_file(pk_test_path("a78ae.pock"), len) : NULL;
}

static void test_cross_artifact(pk_ctx *ctx) {
  /* the fingerprint is the target's: the same must-match as the description's */
  pk_target *t;
  pk_target_fp fp;
  CHECK(pk_target_parse(ctx, "c -mcpu=cortex-a78ae", CROSS_CC, &t) == PK_OK &&
            pk_target_fp_of(ctx, t, &fp) == PK_OK,
        "fingerprint: %s", pk_ctx_error(ctx));
  const char *want = "{\"arch\":\"aarch64\",\"isa\":[\"asimd\",\"asimddp\",\"asimdhp\",\"fphp\"]}";
  CHECK(!strcmp(fp.must_match, want), "must_match %s, want %s", fp.must_match, want);

  size_t len;
  unsigned char *bytes = cross_artifact(&len);
  CHECK(bytes, "cross compile failed");
  /* its kernel object is an AArch64 ELF file (e_machine 183, EM_AARCH64) */
  const unsigned char *elf = memmem(bytes, len, "\x7f" "ELF", 4);
  CHECK(elf && elf + 20 <= bytes + len && elf[18] == 183 && elf[19] == 0,
        "the artifact's kernel object is not AArch64 code");

  struct utsname u;
  CHECK(uname(&u) == 0, "uname");
  if (strcmp(u.machine, "aarch64") != 0) { /* this host refuses it, naming what differs */
    pkrt_model *m = NULL;
    char err[512];
    int rc = pkrt_model_open(pk_test_path("a78ae.pock"), NULL, &m, err, sizeof err);
    pkrt_model_close(m);
    CHECK(rc != 0 && strstr(err, "fingerprint.must_match.arch") && strstr(err, "'aarch64'") &&
              strstr(err, u.machine),
          "the %s host opened an aarch64 artifact or did not say why: %s", u.machine, err);
  }

  /* described devices: hwcaps as the kernel gives them, part numbers as /proc/cpuinfo */
  static const struct {
    const char *name, *machine;
    unsigned long hwcap, hwcap2;
    const char *part;
    const char *says[3]; /* substrings of the refusal; says[0] NULL: accepted */
  } devs[] = {
      {"Orin (Cortex-A78AE)", "aarch64", A78AE, 0, "0xd42", {NULL}},
      {"Pi 5 (Cortex-A76, another part number)", "aarch64", A78AE, 0, "0xd0b", {NULL}},
      {"Graviton3 (extra sve, i8mm, bf16)", "aarch64", A78AE | SVE, H2_I8MM | H2_BF16, "0xd40",
       {NULL}},
      {"Pi 4 (Cortex-A72: no dot product)", "aarch64", FP | ASIMD | EVTSTRM | CRC32 | CPUID, 0,
       "0xd08", {"fingerprint.must_match.isa", "'asimddp'", NULL}},
      {"no scalar fp16", "aarch64", FP | ASIMD | ASIMDHP | ASIMDDP, 0, "0xd05",
       {"fingerprint.must_match.isa", "'fphp'", NULL}},
      {"an x86-64 device", "x86_64", 0, 0, "", {"fingerprint.must_match.arch", "'aarch64'", "'x86_64'"}},
  };
  pkrt_ctx *rt = pkrt_ctx_new(1);
  for (size_t i = 0; i < sizeof devs / sizeof devs[0]; i++) {
    char feat[PKRT_HWCAP_LINE_MAX];
    pkrt_hwcap_features(devs[i].hwcap, devs[i].hwcap2, feat, sizeof feat);
    char *cpuinfo = pk_sprintf(ctx, "processor\t: 0\n%sCPU implementer\t: 0x41\nCPU part\t: %s\n",
                               feat, devs[i].part);
    pkrt_check_options o = {.machine = devs[i].machine, .cpuinfo = cpuinfo};
    pkrt_status st = pkrt_artifact_check_memory(rt, "a78ae.pock", bytes, len, &o);
    const char *e = pkrt_ctx_error(rt);
    bool ok = devs[i].says[0] ? st != PKRT_OK : st == PKRT_OK;
    for (int k = 0; ok && k < 3 && devs[i].says[k]; k++) ok = strstr(e, devs[i].says[k]) != NULL;
    check(ok, devs[i].name, "status %d, message '%s'", (int)st, e);
  }
  pkrt_ctx_free(rt);
  free(bytes);
  PASS();
}

int main(void) {
  if (pk_test_tmpdir_make("pk_aarch64_") != 0) return 1;
  test_hwcap_names();
  pk_ctx *ctx = pk_ctx_new();
  if (have_cross(ctx)) {
    test_descriptions(ctx);
    test_cross_artifact(ctx);
  } else {
    printf("SKIP descriptions, cross_artifact: no %s (scripts/install-deps.sh)\n", CROSS_CC);
  }
  pk_ctx_free(ctx);
  pk_test_tmpdir_remove();
  return pk_test_summary("test_aarch64_target");
}
