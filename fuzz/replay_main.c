/* replay_main.c — runs a fuzz target over files and directories without libFuzzer: each
 * committed corpus becomes a regression test in every build (and under ASan+UBSan in the
 * sanitize build), clang or not. Prints PASS with the program's name and the number of
 * inputs. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return fprintf(stderr, "FAIL cannot read %s\n", path), -1;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *b = malloc(n > 0 ? (size_t)n : 1);
  size_t got = b && n > 0 ? fread(b, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!b || (long)got != (n > 0 ? n : 0)) {
    free(b);
    return fprintf(stderr, "FAIL cannot read %s\n", path), -1;
  }
  LLVMFuzzerTestOneInput(b, got);
  free(b);
  return 1;
}

/* Files of a directory in name order, so runs are reproducible. */
static int run_path(const char *path) {
  struct stat st;
  if (stat(path, &st) != 0) return fprintf(stderr, "FAIL no such path %s\n", path), -1;
  if (!S_ISDIR(st.st_mode)) return run_file(path);
  struct dirent **ents;
  int n = scandir(path, &ents, NULL, alphasort), total = 0;
  if (n < 0) return fprintf(stderr, "FAIL cannot list %s\n", path), -1;
  for (int i = 0; i < n; i++) {
    if (ents[i]->d_name[0] != '.' && total >= 0) {
      char sub[4096];
      snprintf(sub, sizeof sub, "%s/%s", path, ents[i]->d_name);
      int r = run_path(sub);
      total = r < 0 ? -1 : total + r;
    }
    free(ents[i]);
  }
  free(ents);
  return total;
}

int main(int argc, char **argv) {
  int total = 0;
  for (int i = 1; i < argc; i++) {
    int r = run_path(argv[i]);
    if (r < 0) return 1;
    total += r;
  }
  if (total == 0) return fprintf(stderr, "FAIL no inputs\n"), 1;
  const char *me = strrchr(argv[0], '/');
  printf("PASS %s: %d inputs, no crash\n", me ? me + 1 : argv[0], total);
  return 0;
}
