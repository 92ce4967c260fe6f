/* target.c — the target grammar and the description it is parsed into: architecture and
 * ISA from this machine (native) or from the compiler (any named CPU, any cross
 * compiler), and the vector width, register count and cache sizes derived from them. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>

#include "pk_codegen.h"
#include "pk_target.h"
#include "pkrt.h"

/* The ISA features code generation may rely on: the /proc/cpuinfo flag name (what
 * descriptions and fingerprints store) and the compiler macro that says `-march=X`
 * enables it. Features that never change generated code (e.g. aes, rdrand) are left out,
 * so two devices that differ only in them share records. */
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
    {"fphp", "__ARM_FEATURE_FP16_SCALAR_ARITHMETIC"},
    {"asimdhp", "__ARM_FEATURE_FP16_VECTOR_ARITHMETIC"},
    {"asimddp", "__ARM_FEATURE_DOTPROD"},
    {"i8mm", "__ARM_FEATURE_MATMUL_INT8"},
    {"bf16", "__ARM_FEATURE_BF16_VECTOR_ARITHMETIC"},
    {"sve", "__ARM_FEATURE_SVE"},
    {"sve2", "__ARM_FEATURE_SVE2"},
};
enum { NFEATURES = sizeof isa_features / sizeof isa_features[0] };
_Static_assert(NFEATURES <= PK_TARGET_MAX_ISA, "pk_target.isa holds every feature");

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

char *pk_target_read_sysfile(pk_ctx *ctx, const char *path) {
  char *text;
  size_t len;
  if (pk_read_file(ctx, path, &text, &len) != PK_OK) {
    pk_ctx_clear_error(ctx); /* informative only: a missing file leaves a field unknown */
    return NULL;
  }
  return text;
}

/* The features this CPU has: what `-march=native` lets the compiler use. x86 says
 * "flags", AArch64 "Features"; only the first CPU's line is read (all CPUs of one device
 * share an ISA). */
static void isa_from_cpuinfo(pk_ctx *ctx, const char *cpuinfo, bool have[NFEATURES]) {
  for (int i = 0; i < NFEATURES; i++) have[i] = false;
  for (const char *line = cpuinfo; line && *line;) {
    const char *end = strchr(line, '\n');
    if (!strncmp(line, "flags", 5) || !strncmp(line, "Features", 8)) {
      const char *colon = strchr(line, ':');
      if (colon && (!end || colon < end)) {
        char *list = pk_strndup(ctx, colon + 1, end ? (size_t)(end - colon - 1) : strlen(colon + 1));
        for (int i = 0; i < NFEATURES; i++) have[i] = has_word(list, isa_features[i].flag);
        return;
      }
    }
    line = end ? end + 1 : NULL;
  }
}

/* The compiler's first line of output, for messages. */
static const char *first_line(pk_ctx *ctx, const char *out) {
  return pk_strndup(ctx, out, strcspn(out, "\n"));
}

/* The compiler's first line saying "error", else its first line: what a message quotes
 * (GCC may warn before it errs, e.g. x86 GCC on -mcpu=). */
static const char *error_line(pk_ctx *ctx, const char *out) {
  for (const char *line = out; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
    size_t n = strcspn(line, "\n");
    char *l = pk_strndup(ctx, line, n);
    if (strstr(l, "error")) return l;
  }
  return first_line(ctx, out);
}

/* The features the compiler enables for the target's CPU (its default CPU when none is
 * named), from its predefined macros. */
static pk_status isa_from_compiler(pk_ctx *ctx, pk_target *t, bool have[NFEATURES]) {
  char *argv[9];
  int argc = 0;
  argv[argc++] = (char *)t->cc;
  const char *cpu_opt = pk_target_cpu_option(ctx, t);
  if (cpu_opt) argv[argc++] = (char *)cpu_opt;
  const char *rest[] = {"-dM", "-E", "-x", "c", "/dev/null"};
  for (int i = 0; i < 5; i++) argv[argc++] = (char *)rest[i];
  argv[argc] = NULL;
  char *out;
  int rc = pk_run_capture(ctx, argv, &out);
  if (rc != 0) {
    /* an Arm CPU given to this host's compiler: say which compiler builds for it */
    bool arm_cpu = t->cpu && (!strcmp(t->cpu_flag, "-mcpu") || !strncmp(t->cpu, "armv", 4));
    const char *hint = arm_cpu && strcmp(t->arch, "aarch64") != 0
                           ? pk_sprintf(ctx, " (%s builds for %s; an AArch64 CPU needs "
                                        "--cc aarch64-linux-gnu-gcc)", t->cc, t->arch)
                           : "";
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "target '%s': %s rejects %s: %s%s", t->text, t->cc,
                       cpu_opt ? cpu_opt : "-dM -E", error_line(ctx, out), hint);
  }
  for (int i = 0; i < NFEATURES; i++)
    have[i] = strstr(out, pk_sprintf(ctx, "#define %s ", isa_features[i].macro)) != NULL;
  return PK_OK;
}

/* The architecture the compiler builds for: the first word of its target triple
 * ("x86_64-linux-gnu" → "x86_64"), the name uname gives on that machine. */
static pk_status arch_from_compiler(pk_ctx *ctx, pk_target *t) {
  char *argv[] = {(char *)t->cc, (char *)"-dumpmachine", NULL};
  char *out;
  int rc = pk_run_capture(ctx, argv, &out);
  if (rc != 0 || !*out)
    return pk_ctx_fail(ctx, PK_ERR_BUILD, "target '%s': '%s -dumpmachine' failed: %s", t->text,
                       t->cc, rc < 0 ? out : first_line(ctx, out));
  t->arch = pk_strndup(ctx, out, strcspn(out, "-\n"));
  return PK_OK;
}

/* Cache sizes of this machine from sysfs (cpu0's data and unified caches). */
static void caches_from_sysfs(pk_ctx *ctx, pk_target *t) {
  for (int i = 0; i < 8; i++) {
    const char *dir = pk_sprintf(ctx, "/sys/devices/system/cpu/cpu0/cache/index%d", i);
    char *level = pk_target_read_sysfile(ctx, pk_sprintf(ctx, "%s/level", dir));
    char *type = pk_target_read_sysfile(ctx, pk_sprintf(ctx, "%s/type", dir));
    char *size = pk_target_read_sysfile(ctx, pk_sprintf(ctx, "%s/size", dir));
    if (!level || !type || !size || !strncmp(type, "Instruction", 11)) continue;
    char *unit;
    int64_t bytes = strtoll(size, &unit, 10);
    if (*unit == 'K') bytes <<= 10;
    else if (*unit == 'M') bytes <<= 20;
    int lv = atoi(level);
    if (lv == 1) t->l1d_bytes = bytes;
    else if (lv == 2) t->l2_bytes = bytes;
    else if (lv == 3) t->l3_bytes = bytes;
  }
}

/* Vector width and register count follow from the ISA: the widest vector the code may
 * use (GCC splits wider vector types badly, so the emitter must not exceed it). */
static void derive_vectors(pk_target *t) {
  bool x86 = !strcmp(t->arch, "x86_64") || (t->arch[0] == 'i' && strstr(t->arch, "86"));
  t->vector_bytes = pk_target_has(t, "avx512f") ? 64 : pk_target_has(t, "avx") ? 32 : 16;
  t->vector_regs = pk_target_has(t, "avx512f") ? 32 : x86 ? 16 : 32;
}

static void set_isa(pk_target *t, const bool have[NFEATURES]) {
  t->nisa = 0;
  for (int i = 0; i < NFEATURES; i++)
    if (have[i]) t->isa[t->nisa++] = isa_features[i].flag;
  /* sorted: the list is part of fingerprint keys, so its order must not follow the table */
  for (int i = 1; i < t->nisa; i++)
    for (int j = i; j > 0 && strcmp(t->isa[j - 1], t->isa[j]) > 0; j--) {
      const char *x = t->isa[j];
      t->isa[j] = t->isa[j - 1];
      t->isa[j - 1] = x;
    }
}

bool pk_target_has(const pk_target *t, const char *feature) {
  for (int i = 0; i < t->nisa; i++)
    if (!strcmp(t->isa[i], feature)) return true;
  return false;
}

const char *pk_target_cpu_option(pk_ctx *ctx, const pk_target *t) {
  if (!t->cpu) return t->native ? "-march=native" : NULL;
  return pk_sprintf(ctx, "%s=%s", t->cpu_flag, t->cpu);
}

/* The machine we run on, for "c" and "c -march=native" with this machine's compiler. */
static pk_status describe_native(pk_ctx *ctx, pk_target *t) {
  struct utsname u;
  if (uname(&u) != 0) return pk_ctx_fail(ctx, PK_ERR_IO, "uname: %s", strerror(errno));
  t->arch = pk_strdup(ctx, u.machine);
  char *cpuinfo = pk_target_read_sysfile(ctx, "/proc/cpuinfo");
  if (!cpuinfo)
    return pk_ctx_fail(ctx, PK_ERR_IO,
                       "target '%s': cannot read /proc/cpuinfo to find this CPU's features "
                       "(give -march=CPU)", t->text);
  /* AArch64: the kernel's hardware capabilities (right under qemu-user too, whose
   * /proc/cpuinfo is the host's); the runtime compares artifacts with the same line */
  char hwcap[PKRT_HWCAP_LINE_MAX];
  bool have[NFEATURES];
  isa_from_cpuinfo(ctx, pkrt_hwcap_this(hwcap, sizeof hwcap) ? hwcap : cpuinfo, have);
  set_isa(t, have);
  caches_from_sysfs(ctx, t);
  for (const char *line = cpuinfo; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL)
    t->cores += !strncmp(line, "processor", 9);
  return PK_OK;
}

/* c-target := "c" [" -march=" CPU | " -mcpu=" CPU] */
static pk_status parse_c(pk_ctx *ctx, pk_target *t, const char *p) {
  for (;;) {
    while (*p == ' ') p++;
    if (!*p) return PK_OK;
    size_t len = strcspn(p, " ");
    size_t opt = !strncmp(p, "-march=", 7) ? 6 : !strncmp(p, "-mcpu=", 6) ? 5 : 0;
    if (!opt || len == opt + 1)
      return pk_ctx_fail(ctx, PK_ERR_USAGE,
                         "target '%s': unknown option '%.*s' (expected -march=CPU or -mcpu=CPU)",
                         t->text, (int)len, p);
    if (t->cpu)
      return pk_ctx_fail(ctx, PK_ERR_USAGE, "target '%s': one -march= or -mcpu= at most", t->text);
    for (size_t i = opt + 1; i < len; i++)
      if (!isalnum((unsigned char)p[i]) && !strchr("._+-", p[i]))
        return pk_ctx_fail(ctx, PK_ERR_USAGE, "target '%s': bad CPU name in '%.*s'", t->text,
                           (int)len, p);
    t->cpu_flag = pk_strndup(ctx, p, opt);
    t->cpu = pk_strndup(ctx, p + opt + 1, len - opt - 1);
    p += len;
  }
}

/* gpu-target := "cuda -arch=sm_" DIGITS | "opencl" */
static pk_status parse_gpu(pk_ctx *ctx, pk_target *t, const char *p) {
  while (*p == ' ') p++;
  if (t->kind == PK_TARGET_OPENCL) {
    if (*p) return pk_ctx_fail(ctx, PK_ERR_USAGE, "target '%s': opencl takes no options", t->text);
    t->arch = "opencl";
    return PK_OK;
  }
  size_t len = strcspn(p, " ");
  bool ok = !strncmp(p, "-arch=sm_", 9) && len > 9 && p[len + strspn(p + len, " ")] == '\0';
  for (size_t i = 9; ok && i < len; i++) ok = isdigit((unsigned char)p[i]);
  if (!ok)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "target '%s': expected 'cuda -arch=sm_NN'", t->text);
  t->arch = pk_strndup(ctx, p + 6, len - 6);
  return PK_OK;
}

pk_status pk_target_parse(pk_ctx *ctx, const char *text, const char *cc, pk_target **out) {
  pk_target *t = pk_alloc(ctx, sizeof *t);
  memset(t, 0, sizeof *t);
  t->text = pk_strdup(ctx, text ? text : "c");
  const char *p = t->text;
  while (*p == ' ') p++;
  size_t word = strcspn(p, " ");
  if (word == 1 && p[0] == 'c') t->kind = PK_TARGET_C;
  else if (word == 4 && !strncmp(p, "cuda", 4)) t->kind = PK_TARGET_CUDA;
  else if (word == 6 && !strncmp(p, "opencl", 6)) t->kind = PK_TARGET_OPENCL;
  else
    return pk_ctx_fail(ctx, PK_ERR_USAGE,
                       "target '%s': unknown kind '%.*s' (expected c, cuda or opencl)", t->text,
                       (int)word, p);
  pk_status s;
  if (t->kind != PK_TARGET_C) {
    if ((s = parse_gpu(ctx, t, p + word)) != PK_OK) return s;
    *out = t;
    return PK_OK;
  }
  if ((s = parse_c(ctx, t, p + word)) != PK_OK) return s;
  if (t->cpu && !strcmp(t->cpu, "native") && !strcmp(t->cpu_flag, "-march")) t->cpu = t->cpu_flag = NULL;
  const char *env_cc = getenv("CC");
  t->cc = pk_strdup(ctx, cc ? cc : env_cc && *env_cc ? env_cc : "cc");
  /* No CPU named: this machine when the compiler builds for it (-march=native then says
   * what the code may use, and /proc/cpuinfo says what that is); a cross compiler's own
   * default CPU otherwise. A named CPU is always asked of the compiler. */
  if (!t->cpu && !cc) {
    t->native = true;
    s = describe_native(ctx, t);
  } else {
    s = arch_from_compiler(ctx, t);
    struct utsname u;
    if (s == PK_OK && !t->cpu && uname(&u) == 0 && !strcmp(u.machine, t->arch)) {
      t->native = true;
      s = describe_native(ctx, t);
    } else if (s == PK_OK) {
      bool have[NFEATURES];
      if ((s = isa_from_compiler(ctx, t, have)) == PK_OK) set_isa(t, have);
    }
  }
  if (s != PK_OK) return s;
  derive_vectors(t);
  *out = t;
  return PK_OK;
}

pk_status pk_target_native(pk_ctx *ctx, pk_target **out) { return pk_target_parse(ctx, "c", NULL, out); }

const char *pk_target_describe(pk_ctx *ctx, const pk_target *t) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_printf(&b, "target=%s arch=%s isa=", t->text, t->arch);
  for (int i = 0; i < t->nisa; i++) pk_strbuf_printf(&b, "%s%s", i ? "," : "", t->isa[i]);
  pk_strbuf_printf(&b, " vector_bytes=%d vector_regs=%d", t->vector_bytes, t->vector_regs);
  if (t->kind == PK_TARGET_C) {
    const char *cpu_opt = pk_target_cpu_option(ctx, t);
    pk_strbuf_printf(&b, " cc=%s cpu=%s", t->cc, cpu_opt ? cpu_opt : "default");
  }
  return pk_strbuf_finish(ctx, &b);
}
