/* pock_rt_info.c — `pock-rt info`: what an artifact holds and whether this device may run
 * it, read from the verified container and its manifest without loading any of its code. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pkrt.h"
#include "pock/pkrt_gpu.h"
#include "rt_file.h"
#include "pock_rt.h"

static const char info_help[] =
    "usage: pock-rt info MODEL.pock [options]\n"
    "\n"
    "Prints what an artifact holds: container and manifest format, the Pock version that\n"
    "wrote it, the model id (SHA-256 of its manifest; checkpoints carry it), target and\n"
    "fingerprint, mode, batch, dtype, input and output shapes, optimizer, region and\n"
    "section sizes, parameters, kernels with their workload hash and tuning record id,\n"
    "kernel calls of each plan (a step's; the load plan's run once, when the weights are\n"
    "in place), externs, the signer and whether this device would load it. No code in the\n"
    "file is loaded.\n"
    "\n"
    "options:\n"
    "  --extract-kernels OUT   write the kernel object (an ELF shared object) to OUT\n"
    "  --trusted-key KEY       the key to check the signature against (default:\n"
    "                          POCK_TRUSTED_KEY, /etc/pock/trusted.pub)\n"
    "\n"
    "Exit status: 0 success (also when this device would refuse the artifact), 1 error\n"
    "(unreadable or corrupt file), 2 usage.\n";

static const cJSON *get(const cJSON *o, const char *key) {
  return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static const char *str_or(const cJSON *j, const char *def) {
  return cJSON_IsString(j) && j->valuestring ? j->valuestring : def;
}

/* A JSON value on one line, for fields printed as they are. */
static void print_json(const cJSON *j) {
  char *s = j ? cJSON_PrintUnformatted(j) : NULL;
  fputs(s ? s : "-", stdout);
  free(s);
}

static void print_shape(const cJSON *tensors, const cJSON *index) {
  const cJSON *t = cJSON_IsNumber(index) ? cJSON_GetArrayItem(tensors, index->valueint) : NULL;
  const cJSON *shape = get(t, "shape");
  if (!cJSON_IsArray(shape)) {
    fputs("-", stdout);
    return;
  }
  fputs("(", stdout);
  int i = 0;
  const cJSON *d;
  cJSON_ArrayForEach(d, shape) printf("%s%.0f", i++ ? ", " : "", d->valuedouble);
  fputs(")", stdout);
}

static void print_fingerprint(const cJSON *fp) {
  const cJSON *mm = get(fp, "must_match");
  printf("%-14s arch %s, isa", "fingerprint", str_or(get(mm, "arch"), "any"));
  const cJSON *isa = get(mm, "isa"), *f;
  if (!cJSON_IsArray(isa) || cJSON_GetArraySize(isa) == 0) fputs(" -", stdout);
  cJSON_ArrayForEach(f, isa) printf(" %s", str_or(f, "?"));
  fputs(" (must match)\n", stdout);
  printf("%-14s ", "built on");
  print_json(get(fp, "informative"));
  fputc('\n', stdout);
}

static void print_params(const cJSON *tensors) {
  int n = 0, trainable = 0;
  double elems = 0;
  const cJSON *t;
  cJSON_ArrayForEach(t, tensors) {
    if (strcmp(str_or(get(t, "role"), ""), "param") != 0 || get(t, "base") || get(t, "strides"))
      continue;
    n++;
    trainable += cJSON_IsTrue(get(t, "trainable"));
    double e = 1;
    const cJSON *d;
    cJSON_ArrayForEach(d, get(t, "shape")) e *= d->valuedouble;
    elems += e;
  }
  printf("%-14s %d tensors (%d trainable), %.0f elements\n", "parameters", n, trainable, elems);
}

/* Kernel calls of each plan: per step, and the load plan's once when the weights are in
 * place (the fold pass's results). */
static void print_plans(const cJSON *plans) {
  static const char *const names[] = {"train", "eval", "infer", "load"};
  printf("%-14s", "kernel calls");
  const char *sep = " ";
  for (int i = 0; i < 4; i++) {
    const cJSON *p = get(plans, names[i]);
    if (!cJSON_IsArray(p)) continue;
    printf("%s%s %d", sep, names[i], cJSON_GetArraySize(p));
    sep = ", ";
  }
  if (cJSON_IsArray(get(plans, "load"))) fputs(" (load: once, when the weights are in place)", stdout);
  fputc('\n', stdout);
}

/* Each kernel with its tuning identity and how often a training step calls it. */
static void print_kernels(const cJSON *kernels, const cJSON *plans) {
  int nk = cJSON_GetArraySize(kernels);
  printf("%-14s %d\n", "kernels", nk);
  print_plans(plans);
  const cJSON *steps = get(plans, "train");
  if (!steps) steps = get(plans, "infer");
  int i = 0;
  const cJSON *k;
  cJSON_ArrayForEach(k, kernels) {
    int calls = 0;
    const char *node = NULL;
    const cJSON *s;
    cJSON_ArrayForEach(s, steps) {
      const cJSON *ki = get(s, "kernel");
      if (!cJSON_IsNumber(ki) || ki->valueint != i) continue;
      if (!calls++) node = str_or(get(s, "node"), NULL);
    }
    const cJSON *rec = get(k, "record");
    printf("  %-6s workload %.16s  record ", str_or(get(k, "name"), "?"),
           str_or(get(k, "workload"), "-"));
    if (cJSON_IsNull(rec) || !rec) fputs("default", stdout);
    else print_json(rec);
    printf("  calls/step %d%s%s", calls, node ? "  first " : "", node ? node : "");
    if (cJSON_IsNumber(get(k, "extern"))) printf("  calls extern %d", get(k, "extern")->valueint);
    fputc('\n', stdout);
    i++;
  }
}

/* Backend switching: each extern kernel the artifact calls, its library (loaded by name at
 * load: the device must have it) and the kernels that call it. */
static void print_externs(const cJSON *externs, const cJSON *kernels) {
  printf("%-14s ", "externs");
  if (!cJSON_IsArray(externs) || cJSON_GetArraySize(externs) == 0) {
    puts("none");
    return;
  }
  int e = 0;
  const cJSON *x;
  cJSON_ArrayForEach(x, externs) {
    printf("%s%s in %s (kernels", e ? "; " : "", str_or(get(x, "symbol"), "?"),
           str_or(get(x, "library"), "?"));
    const cJSON *k;
    int n = 0;
    cJSON_ArrayForEach(k, kernels) {
      const cJSON *ki = get(k, "extern");
      if (cJSON_IsNumber(ki) && ki->valueint == e)
        printf("%s %s", n++ ? "," : "", str_or(get(k, "name"), "?"));
    }
    printf(")");
    e++;
  }
  fputc('\n', stdout);
}

static void print_signer(pkrt_ctx *rt, const char *path, const pkrt_artifact *a,
                         const char *key) {
  pkrt_public_key pub;
  if (pkrt_artifact_signer(a, &pub)) printf("%-14s key id %s (signature verifies)\n", "signer", pub.id);
  else printf("%-14s unsigned\n", "signer");
  pkrt_trusted_key tk;
  if (pkrt_trust_resolve(rt, key, &tk) != PKRT_OK)
    printf("%-14s error: %s\n", "trust", pkrt_ctx_error(rt));
  else if (!tk.configured)
    printf("%-14s no trusted key configured: unsigned artifacts load\n", "trust");
  else if (pkrt_trust_check(rt, path, a, &tk) != PKRT_OK)
    printf("%-14s REFUSED: %s\n", "trust", pkrt_ctx_error(rt));
  else
    printf("%-14s signed by the trusted key %s (%s)\n", "trust", tk.key.id, tk.source);
}

/* Runs every check open makes before loading code, so "ok" means this device would load it
 * (the kernel object itself is only checked by loading it). */
static void print_device(pkrt_ctx *rt, const char *path) {
  void *bytes = NULL;
  size_t len = 0;
  if (rt_file_read(rt, path, SIZE_MAX / 2, &bytes, &len) == PKRT_OK) {
    if (pkrt_artifact_check_memory(rt, path, bytes, len, NULL) == PKRT_OK)
      printf("%-14s ok: target and manifest checks pass\n", "this device");
    else
      printf("%-14s %s\n", "this device", pkrt_ctx_error(rt));
  } else {
    printf("%-14s cannot re-read the file\n", "this device");
  }
  free(bytes);
}

static void print_manifest(const cJSON *mf) {
  const cJSON *tensors = get(mf, "tensors"), *io = get(mf, "io");
  printf("%-14s %s\n", "pock version", str_or(get(mf, "pock_version"), "unknown"));
  printf("%-14s %s\n", "target", str_or(get(mf, "target"), "?"));
  print_fingerprint(get(mf, "fingerprint"));
  const cJSON *gpu = get(mf, "gpu"); /* format 3: where the kernels run */
  if (gpu) {
    const char *api = str_or(get(gpu, "api"), "?");
    printf("%-14s %s, buffers at ", "gpu", api);
    print_json(get(gpu, "align"));
    printf(" bytes%s%s\n", get(gpu, "arch") ? ", cubin for " : "", str_or(get(gpu, "arch"), ""));
    /* the device it would open (the first of the API), or why there is none */
    pkrt_ctx *rt = pkrt_ctx_new(1);
    pkrt_gpu_info d;
    int n = 0;
    pkrt_status st = pkrt_gpu_list(rt, strcmp(api, "cuda") ? PKRT_GPU_OPENCL : PKRT_GPU_CUDA, &d, 1, &n);
    printf("%-14s %s\n", "gpu here", st != PKRT_OK ? pkrt_ctx_error(rt) : n ? d.name : "no device");
    /* OpenCL's device binary: what it is for, and whether this device would load it */
    const cJSON *b = get(gpu, "binary");
    pkrt_gpu_binary_for f = {str_or(get(b, "device"), "?"), str_or(get(b, "version"), "?"),
                             str_or(get(b, "driver"), "?"), str_or(get(b, "platform"), "?")};
    if (b)
      printf("%-14s OpenCL binary for %s (%s; %s; driver %s): %s\n", "gpu binary", f.device,
             f.platform, f.version, f.driver, st == PKRT_OK && n && pkrt_gpu_binary_fits(&d, &f)
             ? "this device's (used at load)" : "device differs: built from source at load");
    pkrt_ctx_free(rt);
  }
  printf("%-14s %s\n", "mode", str_or(get(mf, "mode"), "?"));
  printf("%-14s %s\n", "dtype", str_or(get(mf, "dtype"), "?"));
  printf("%-14s ", "batch");
  print_json(get(mf, "batch"));
  printf("\n%-14s ", "classes");
  print_json(get(mf, "classes"));
  /* Several inputs (io.inputs): one line each, with name, dtype and shape. */
  const cJSON *ins = get(io, "inputs"), *ix;
  if (cJSON_GetArraySize(ins) > 1) {
    cJSON_ArrayForEach(ix, ins) {
      const cJSON *t = cJSON_IsNumber(ix) ? cJSON_GetArrayItem(tensors, ix->valueint) : NULL;
      printf("\n%-14s %s %s ", "input", str_or(get(t, "name"), "?"), str_or(get(t, "dtype"), "?"));
      print_shape(tensors, ix);
      if (cJSON_IsFalse(get(t, "batch"))) fputs(" (no batch dim)", stdout);
    }
  } else {
    printf("\n%-14s ", "input");
    print_shape(tensors, get(io, "input"));
  }
  printf("\n%-14s ", "output");
  print_shape(tensors, get(io, "output"));
  const cJSON *opt = get(mf, "optimizer");
  if (opt) {
    printf("\n%-14s %s lr ", "optimizer", str_or(get(opt, "kind"), "?"));
    print_json(get(opt, "lr"));
    printf(" schedule %s", str_or(get(get(opt, "schedule"), "kind"), "constant"));
  }
  printf("\n%-14s", "regions");
  const cJSON *r;
  cJSON_ArrayForEach(r, get(mf, "regions")) printf(" %s %.0f", r->string, r->valuedouble);
  printf(" (bytes)\n");
  print_params(tensors);
  print_kernels(get(mf, "kernels"), get(mf, "plans"));
  print_externs(get(mf, "externs"), get(mf, "kernels"));
}

static int extract(const pkrt_artifact *a, const char *path, const char *key, const char *out) {
  const pkrt_section *k = pkrt_artifact_find(a, "kernels");
  if (!k) return pkrt_cli_fail("info: the artifact has no 'kernels' section");
  const char *const inputs[] = {path, key};
  if (pkrt_cli_write_file("pock-rt", out, k->data, k->size, inputs, 2) != 0)
    return PKRT_EXIT_ERROR;
  printf("%-14s %zu bytes written to %s\n", "extracted", k->size, out);
  return PKRT_EXIT_OK;
}

static int info(pkrt_ctx *rt, const char *path, const char *key, const char *extract_to) {
  pkrt_artifact *a;
  if (pkrt_artifact_read(rt, path, &a) != PKRT_OK) return pkrt_cli_fail("%s", pkrt_ctx_error(rt));
  const pkrt_section *man = pkrt_artifact_find(a, "manifest");
  cJSON *mf = man ? cJSON_ParseWithLength(man->data, man->size) : NULL;
  int rc = PKRT_EXIT_OK;
  if (!mf) {
    rc = pkrt_cli_fail("%s: %s", path, man ? "manifest: not valid JSON" : "no 'manifest' section");
  } else {
    char id[2 * PKRT_SHA256_BYTES + 1];
    pkrt_sha256_hex(man->data, man->size, id);
    printf("%-14s %s\n", "artifact", path);
    printf("%-14s container v%u, manifest v", "format", PKRT_ARTIFACT_VERSION);
    print_json(get(mf, "format"));
    printf("\n%-14s %s\n", "model id", id);
    print_manifest(mf);
    printf("%-14s", "sections");
    for (int i = 0; i < pkrt_artifact_count(a); i++)
      printf(" %s %zu", pkrt_artifact_section(a, i)->name, pkrt_artifact_section(a, i)->size);
    printf(" (bytes)\n");
    print_signer(rt, path, a, key);
    print_device(rt, path);
    cJSON_Delete(mf);
    if (extract_to) rc = extract(a, path, key, extract_to);
  }
  pkrt_artifact_free(a);
  return rc;
}

int pkrt_cmd_info(int argc, char **argv) {
  const char *path = NULL, *key = NULL, *extract_to = NULL;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(info_help, stdout);
      return PKRT_EXIT_OK;
    }
    if (a[0] != '-' || !a[1]) {
      if (path) return pkrt_cli_usage("info: one artifact expected, got '%s' and '%s'", path, a);
      path = a;
      continue;
    }
    bool is_key = !strcmp(a, "--trusted-key");
    if (!is_key && strcmp(a, "--extract-kernels") != 0)
      return pkrt_cli_usage("info: unknown option '%s'", a);
    if (i + 1 >= argc) return pkrt_cli_usage("info: %s needs a value", a);
    *(is_key ? &key : &extract_to) = argv[++i];
  }
  if (!path) return pkrt_cli_usage("info: expected an artifact (MODEL.pock)");
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt) return pkrt_cli_fail("out of memory");
  int rc = info(rt, path, key, extract_to);
  fflush(stdout);
  pkrt_ctx_free(rt);
  return rc;
}
