/* measure_child.c — one candidate's measuring process: loads the kernel through the runtime
 * loader (or opens the extern through libffi), runs it once on the task's inputs, compares
 * every output with the interpreter's, times it pinned to one CPU, and writes one reply.
 * A confirmation's process times several such candidates in interleaved rounds instead.
 * Anything that goes wrong here dies with this process, never with the tuner. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "measure_impl.h"

typedef struct kernel_call {
  const pkrt_kernel_desc *k;
  const pk_host_buffers *hb;
  void *workspace;
  pkrt_exec_ctx *exec;
} kernel_call;

static int call_kernel(void *arg) {
  const kernel_call *c = arg;
  return c->k->fn(c->hb->bufs, c->hb->n, NULL, 0, c->workspace, c->exec);
}

typedef struct sgemm_call {
  const pkrt_extern *fn;
  const pk_sgemm_shape *shape;
  void *const *data;
} sgemm_call;

static int call_sgemm(void *arg) {
  const sgemm_call *c = arg;
  meas_sgemm_call(c->fn, c->shape, c->data);
  return 0;
}

static noreturn void finish(int fd, meas_reply *r, pk_meas_status st, const char *error) {
  r->status = st;
  meas_set_error(r->error, error);
  _exit(meas_write_full(fd, r, sizeof *r) == 0 ? 0 : 1);
}

/* A candidate ready to call: a generated kernel or a cblas_sgemm extern. */
typedef struct contestant {
  int (*call)(void *);
  void *arg;
} contestant;

/* Loads kernel "name" of the object at path (is_kernel), or opens extern sym of library
 * path with signature sig; on failure the process finishes with the reason. */
static void open_contestant(pk_ctx *ctx, pkrt_ctx *rt, const pk_host_buffers *hb,
                            const meas_request *rq, bool is_kernel, const char *path,
                            const char *name, const char *sig, contestant *out, int fd,
                            meas_reply *r) {
  if (is_kernel) {
    pkrt_module *mod;
    if (pkrt_module_load_file(rt, path, &mod) != PKRT_OK)
      finish(fd, r, PK_MEAS_RUNTIME_ERROR, pkrt_ctx_error(rt));
    const pkrt_kernel_desc *k = pkrt_module_find(mod, name);
    if (!k) finish(fd, r, PK_MEAS_RUNTIME_ERROR, "the kernel object has no kernel k0");
    if (k->workspace_bytes < 0 || k->workspace_bytes % 64)
      finish(fd, r, PK_MEAS_RUNTIME_ERROR, "the kernel asks for a malformed workspace");
    void *ws = k->workspace_bytes ? aligned_alloc(64, (size_t)k->workspace_bytes) : NULL;
    if (k->workspace_bytes && !ws)
      finish(fd, r, PK_MEAS_RUNTIME_ERROR, "out of memory for the kernel's workspace");
    if (ws) memset(ws, 0xff, (size_t)k->workspace_bytes); /* no reliance on zeros */
    kernel_call *kc = pk_alloc(ctx, sizeof *kc);
    *kc = (kernel_call){k, hb, ws, pkrt_ctx_exec(rt)};
    *out = (contestant){call_kernel, kc};
    return;
  }
  pkrt_extern *fn;
  if (pkrt_extern_open(rt, path, name, sig, &fn) != PKRT_OK)
    finish(fd, r, PK_MEAS_RUNTIME_ERROR, pkrt_ctx_error(rt));
  if (pkrt_extern_nargs(fn) != 14)
    finish(fd, r, PK_MEAS_RUNTIME_ERROR, "the extern's signature is not cblas_sgemm's");
  sgemm_call *sc = pk_alloc(ctx, sizeof *sc);
  *sc = (sgemm_call){fn, &rq->sgemm, hb->data};
  *out = (contestant){call_sgemm, sc};
}

/* ROUNDS: the listed candidates (checked when first measured) timed in interleaved rounds;
 * each one's median and fastest round in the reply (0 where it failed). */
static noreturn void time_rounds(pk_ctx *ctx, pkrt_ctx *rt, const pk_host_buffers *hb,
                                 const meas_request *rq, char *const *str, int fd,
                                 meas_reply *r) {
  pk_measure_contestant c[PK_CONFIRM_MAX];
  double *round_ns = pk_alloc(ctx, sizeof(double) * PK_CONFIRM_MAX * (size_t)(rq->rounds + 1));
  int n = 0;
  for (char *line = str[1], *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    char *path = strchr(line, '\t'), *sym = path ? strchr(path + 1, '\t') : NULL;
    if (n == PK_CONFIRM_MAX || !path || (line[0] != 'k' && line[0] != 'e') || (line[0] == 'e' && !sym))
      finish(fd, r, PK_MEAS_RUNTIME_ERROR, "a malformed confirmation request");
    *path++ = '\0';
    if (sym) *sym++ = '\0';
    contestant one;
    open_contestant(ctx, rt, hb, rq, line[0] == 'k', path, line[0] == 'k' ? "k0" : sym, str[4],
                    &one, fd, r);
    c[n] = (pk_measure_contestant){.fn = one.call, .arg = one.arg,
                                   .round_ns = round_ns + (size_t)n * (size_t)(rq->rounds + 1)};
    n++;
  }
  if (rq->rounds < 1) finish(fd, r, PK_MEAS_RUNTIME_ERROR, "a confirmation needs rounds >= 1");
  pk_measure_rounds(c, n, rq->rounds, rq->min_ns);
  for (int i = 0; i < n; i++) {
    r->round_median_ns[i] = c[i].median_ns;
    r->round_min_ns[i] = c[i].min_ns;
  }
  finish(fd, r, PK_MEAS_OK, NULL);
}

noreturn void meas_child_main(pk_ctx *ctx, const pk_te_program *prog, const pk_te_ref *ref,
                              const meas_request *rq, char *const *str, int result_fd) {
  meas_reply r = {.status = PK_MEAS_OK};
  pk_ctx_clear_error(ctx);
  if (strlen(str[3]) != (size_t)prog->ntensors)
    finish(result_fd, &r, PK_MEAS_RUNTIME_ERROR, "the request's output mask does not fit the task");
  if (rq->kind == MEAS_REQ_GPU || rq->kind == MEAS_REQ_GPU_BLAS)
    meas_gpu_child_main(ctx, prog, ref, rq, str, result_fd);
  /* OpenBLAS reads this when it is loaded: one thread, like every generated kernel here. */
  setenv("OPENBLAS_NUM_THREADS", "1", 1);
  if (rq->pin) pk_measure_pin_thread(); /* the CPU it picks is in the settings JSON */
  pkrt_ctx *rt = pkrt_ctx_new(1); /* no pool: parallel loops run inline, on this CPU */
  pk_host_buffers hb;
  if (!rt || pk_host_buffers_new(ctx, prog, &hb) != PK_OK)
    finish(result_fd, &r, PK_MEAS_RUNTIME_ERROR, "out of memory for the task's buffers");
  for (int i = 0; i < prog->ntensors; i++) {
    const pk_te_tensor *t = prog->tensors[i];
    if (t->kind == PK_TE_PLACEHOLDER) {
      pk_te_ref_to_buffer(t, &ref->tensors[i], hb.data[i]);
    } else {
      /* NaNs (all-ones bits): an element the kernel forgets to write cannot pass. */
      memset(hb.data[i], 0xff, (size_t)pk_te_tensor_numel(t) * pkrt_dtype_size(t->dtype));
    }
  }

  if (rq->kind == MEAS_REQ_ROUNDS) time_rounds(ctx, rt, &hb, rq, str, result_fd, &r);
  contestant one;
  open_contestant(ctx, rt, &hb, rq, rq->kind == MEAS_REQ_KERNEL, str[1], str[2], str[4], &one,
                  result_fd, &r);
  int (*call)(void *) = one.call;
  void *arg = one.arg;

  int rc = call(arg);
  if (rc != 0) {
    char msg[64];
    snprintf(msg, sizeof msg, "the kernel returned status %d", rc);
    finish(result_fd, &r, PK_MEAS_RUNTIME_ERROR, msg);
  }
  for (int i = 0; i < prog->ntensors; i++)
    if (str[3][i] == '1' &&
        pk_te_verify_output(ctx, prog->tensors[i], &ref->tensors[i], hb.data[i], NULL) != PK_OK)
      finish(result_fd, &r, PK_MEAS_WRONG, pk_ctx_error(ctx));

  rc = pk_measure(call, arg, rq->min_ns, &r.timing);
  if (rc != 0) {
    char msg[64];
    snprintf(msg, sizeof msg, "the kernel returned status %d while being timed", rc);
    finish(result_fd, &r, PK_MEAS_RUNTIME_ERROR, msg);
  }
  finish(result_fd, &r, PK_MEAS_OK, NULL);
}
