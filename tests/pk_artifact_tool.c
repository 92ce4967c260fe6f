/* pk_artifact_tool.c — a test helper over libpockrt's artifact container: list the
 * sections of a (verified) artifact, extract one, or pack files into a new artifact. The
 * isolation test extracts the kernel object with it; fixtures and the fuzz corpus are
 * made with it (tests/fixtures/artifacts/README.md, fuzz/README.md).
 *
 *   pk_artifact_tool list model.pock
 *   pk_artifact_tool extract model.pock kernels out.so
 *   pk_artifact_tool pack out.pock manifest=m.json kernels=k.so weights=w.bin
 *   pk_artifact_tool check model.pock     (every check open makes, loading nothing)
 * A pack source may be @zero:N (N zero bytes) or @text:STRING. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"

static int usage(void) {
  fputs("usage: pk_artifact_tool list FILE | extract FILE SECTION OUT | "
        "pack OUT NAME=SRC... | check FILE\n",
        stderr);
  return 2;
}

static void *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 1 << 16, n = 0;
  unsigned char *b = malloc(cap);
  for (size_t got; b && (got = fread(b + n, 1, cap - n, f)) > 0;) {
    n += got;
    if (n == cap) {
      unsigned char *nb = realloc(b, cap *= 2);
      if (!nb) free(b);
      b = nb;
    }
  }
  fclose(f);
  *len = n;
  return b;
}

static int list(pkrt_ctx *rt, const char *path) {
  pkrt_artifact *a;
  if (pkrt_artifact_read(rt, path, &a) != PKRT_OK) return fprintf(stderr, "%s\n", pkrt_ctx_error(rt)), 1;
  for (int i = 0; i < pkrt_artifact_count(a); i++) {
    const pkrt_section *s = pkrt_artifact_section(a, i);
    char hex[2 * PKRT_SHA256_BYTES + 1];
    pkrt_sha256_hex(s->data, s->size, hex);
    printf("%-15s %10zu %s\n", s->name, s->size, hex);
  }
  pkrt_artifact_free(a);
  return 0;
}

static int extract(pkrt_ctx *rt, const char *path, const char *name, const char *out) {
  pkrt_artifact *a;
  if (pkrt_artifact_read(rt, path, &a) != PKRT_OK) return fprintf(stderr, "%s\n", pkrt_ctx_error(rt)), 1;
  const pkrt_section *s = pkrt_artifact_find(a, name);
  int rc = 1;
  if (!s) {
    fprintf(stderr, "%s: no section '%s'\n", path, name);
  } else {
    FILE *f = fopen(out, "wb");
    if (f && fwrite(s->data, 1, s->size, f) == s->size && fclose(f) == 0) rc = 0;
    else fprintf(stderr, "%s: cannot write\n", out);
  }
  pkrt_artifact_free(a);
  return rc;
}

static int pack(pkrt_ctx *rt, const char *out, int n, char **specs) {
  if (n < 1 || n > PKRT_ARTIFACT_MAX_SECTIONS) return usage();
  pkrt_section s[PKRT_ARTIFACT_MAX_SECTIONS];
  void *owned[PKRT_ARTIFACT_MAX_SECTIONS] = {0};
  int rc = 0;
  for (int i = 0; i < n && rc == 0; i++) {
    char *eq = strchr(specs[i], '=');
    if (!eq) return usage();
    *eq = 0;
    const char *src = eq + 1;
    s[i].name = specs[i];
    if (strncmp(src, "@zero:", 6) == 0) {
      s[i].size = strtoull(src + 6, NULL, 10);
      s[i].data = owned[i] = calloc(1, s[i].size + 1);
    } else if (strncmp(src, "@text:", 6) == 0) {
      s[i].data = src + 6;
      s[i].size = strlen(src + 6);
    } else {
      s[i].data = owned[i] = slurp(src, &s[i].size);
      if (!s[i].data) {
        fprintf(stderr, "%s: cannot read\n", src);
        rc = 1;
      }
    }
  }
  if (rc == 0 && pkrt_artifact_write(rt, out, s, n) != PKRT_OK) {
    fprintf(stderr, "%s\n", pkrt_ctx_error(rt));
    rc = 1;
  }
  for (int i = 0; i < n; i++) free(owned[i]);
  return rc;
}

static int check(pkrt_ctx *rt, const char *path) {
  size_t len;
  void *b = slurp(path, &len);
  if (!b) return fprintf(stderr, "%s: cannot read\n", path), 1;
  pkrt_status st = pkrt_artifact_check_memory(rt, path, b, len, NULL);
  free(b);
  if (st != PKRT_OK) return fprintf(stderr, "%s\n", pkrt_ctx_error(rt)), 1;
  printf("%s: ok\n", path);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 3) return usage();
  pkrt_ctx *rt = pkrt_ctx_new(1);
  int rc;
  if (!strcmp(argv[1], "list") && argc == 3) rc = list(rt, argv[2]);
  else if (!strcmp(argv[1], "extract") && argc == 5) rc = extract(rt, argv[2], argv[3], argv[4]);
  else if (!strcmp(argv[1], "pack") && argc >= 4) rc = pack(rt, argv[2], argc - 3, argv + 3);
  else if (!strcmp(argv[1], "check") && argc == 3) rc = check(rt, argv[2]);
  else rc = usage();
  pkrt_ctx_free(rt);
  return rc;
}
