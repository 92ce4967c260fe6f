/* hwcap.c — this device's AArch64 ISA features from the kernel's hardware capabilities
 * (getauxval(AT_HWCAP), AT_HWCAP2) rather than /proc/cpuinfo: the auxiliary vector is what
 * the kernel says this process may run, and it is right under qemu-user too, whose
 * /proc/cpuinfo is the host's. Names are Linux's /proc/cpuinfo "Features" names. */
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

#include "pkrt.h"

/* Bit i of AT_HWCAP / AT_HWCAP2 (arch/arm64/include/uapi/asm/hwcap.h). */
static const char *const hwcap_names[] = {
    "fp",    "asimd",  "evtstrm", "aes",     "pmull", "sha1",   "sha2",  "crc32",
    "atomics", "fphp", "asimdhp", "cpuid",   "asimdrdm", "jscvt", "fcma", "lrcpc",
    "dcpop", "sha3",   "sm3",     "sm4",     "asimddp", "sha512", "sve", "asimdfhm",
    "dit",   "uscat",  "ilrcpc",  "flagm",   "ssbs",  "sb",     "paca",  "pacg"};
static const char *const hwcap2_names[] = {
    "dcpodp", "sve2",    "sveaes",  "svepmull", "svebitperm", "svesha3", "svesm4", "flagm2",
    "frint",  "svei8mm", "svef32mm", "svef64mm", "svebf16",   "i8mm",    "bf16",   "dgh",
    "rng",    "bti",     "mte"};

static size_t append_names(char *buf, size_t cap, size_t n, unsigned long bits,
                           const char *const *names, size_t count) {
  for (size_t i = 0; i < count; i++) {
    if (!(bits >> i & 1)) continue;
    int w = snprintf(buf + (n < cap ? n : cap - 1), n < cap ? cap - n : 1, " %s", names[i]);
    n += (size_t)w;
  }
  return n;
}

size_t pkrt_hwcap_features(unsigned long hwcap, unsigned long hwcap2, char *buf, size_t cap) {
  if (cap == 0) return 0;
  size_t n = (size_t)snprintf(buf, cap, "Features\t:");
  n = append_names(buf, cap, n, hwcap, hwcap_names, sizeof hwcap_names / sizeof hwcap_names[0]);
  n = append_names(buf, cap, n, hwcap2, hwcap2_names, sizeof hwcap2_names / sizeof hwcap2_names[0]);
  n += (size_t)snprintf(buf + (n < cap ? n : cap - 1), n < cap ? cap - n : 1, "\n");
  return n < cap ? n : 0;
}

size_t pkrt_hwcap_this(char *buf, size_t cap) {
#if defined(__aarch64__) && defined(__linux__)
  return pkrt_hwcap_features(getauxval(AT_HWCAP), getauxval(AT_HWCAP2), buf, cap);
#else
  (void)buf, (void)cap;
  return 0;
#endif
}
