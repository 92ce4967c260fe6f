/* artifact_check.c — every check of an artifact that needs no kernel object: the part of
 * pkrt_model_open before loading, shared with pkrt_artifact_check_memory, which the fuzz
 * target drives (so the fuzzer exercises exactly the parsers open runs, and never code). */
#define _GNU_SOURCE
#include <stdlib.h>
#include <sys/utsname.h>

#include "model_impl.h"

pkrt_status rt_artifact_check(pkrt_ctx *rt, pkrt_arena *a, const char *what,
                              const pkrt_artifact *art, const pkrt_check_options *o,
                              rt_manifest *mf, const pkrt_section **man,
                              const pkrt_section **ker, const pkrt_section **wts) {
  *man = pkrt_artifact_find(art, "manifest");
  *ker = pkrt_artifact_find(art, "kernels");
  *wts = pkrt_artifact_find(art, "weights");
  const char *missing = !*man ? "manifest" : !*ker ? "kernels" : !*wts ? "weights" : NULL;
  if (missing) return pkrt_ctx_fail(rt, PKRT_ERR_INPUT, "%s: no '%s' section", what, missing);
  pkrt_status st = rt_manifest_parse(rt, a, (*man)->data, (*man)->size, (*wts)->size, mf);
  if (st != PKRT_OK || (o && o->skip_fingerprint)) return st;
  if (!o || (!o->machine && !o->cpuinfo)) return rt_fingerprint_check(rt, mf);
  /* A described device: what it leaves out is this device's. */
  struct utsname u;
  const char *machine = o->machine ? o->machine : uname(&u) == 0 ? u.machine : NULL;
  char *text = !o->cpuinfo && mf->nisa > 0 ? rt_device_features(rt) : NULL;
  st = rt_fingerprint_match(rt, mf, machine, o->cpuinfo ? o->cpuinfo : text);
  free(text);
  return st;
}

pkrt_status pkrt_artifact_check_memory(pkrt_ctx *rt, const char *what, const void *bytes,
                                       size_t len, const pkrt_check_options *opts) {
  if (!what) what = "<artifact>";
  pkrt_artifact *art;
  pkrt_status st = pkrt_artifact_parse(rt, what, bytes, len, &art);
  if (st != PKRT_OK) return st;
  pkrt_arena *a = pkrt_arena_new(0);
  if (!a) {
    pkrt_artifact_free(art);
    return pkrt_ctx_fail(rt, PKRT_ERR_NOMEM, "%s: out of memory", what);
  }
  rt_manifest mf;
  const pkrt_section *man, *ker, *wts;
  st = rt_artifact_check(rt, a, what, art, opts, &mf, &man, &ker, &wts);
  pkrt_arena_free(a);
  pkrt_artifact_free(art);
  return st;
}
