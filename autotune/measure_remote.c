/* measure_remote.c — the measurer's remote half: instead of asking the local worker, a
 * built candidate is sent to a device's pock-rt-serve with the task's inputs, the
 * reference outputs and their bounds (computed here, once per task: the device has no
 * interpreter), and the device's verdict comes back as the worker's would. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "measure_impl.h"
#include "pk_verify.h"
#include "pkrt_remote.h"

/* Seconds the host waits for an answer beyond the device's own limit: the request's
 * transfer, the fork, an emulated device's slowness. */
#define ANSWER_SLACK_S 30

/* The task's reference, here, once per task text and seed. */
static pk_status reference(pk_measurer *m, const char *te) {
  meas_remote_ref *rr = &m->rref;
  if (rr->ctx && rr->seed == m->settings.seed && strcmp(rr->te, te) == 0) return PK_OK;
  pk_ctx_free(rr->ctx);
  *rr = (meas_remote_ref){.ctx = pk_ctx_new(), .seed = m->settings.seed};
  rr->te = pk_strdup(rr->ctx, te);
  pk_status s = pk_te_parse(rr->ctx, te, strlen(te), "task.te", &rr->prog);
  if (s == PK_OK) {
    rr->ref = pk_te_ref_new(rr->ctx, rr->prog);
    pk_te_ref_fill_random(rr->prog, rr->ref, rr->seed);
    s = pk_te_interp_run(rr->ctx, rr->prog, rr->ref);
  }
  if (s != PK_OK) {
    rr->error = pk_sprintf(m->ctx, "no reference for the task: %s", pk_ctx_error(rr->ctx));
    pk_ctx_free(rr->ctx);
    rr->ctx = NULL;
  }
  return s;
}

/* The payload: 8-byte aligned pieces, each named in the JSON by [offset, length]. */
typedef struct payload {
  uint8_t *bytes;
  size_t len, cap;
  bool oom;
} payload;

static cJSON *put(payload *p, const void *data, size_t n) {
  size_t off = (p->len + 7) / 8 * 8;
  if (off + n > p->cap) {
    size_t cap = (off + n) * 2 + 4096;
    uint8_t *grown = realloc(p->bytes, cap);
    if (!grown) {
      p->oom = true;
      return cJSON_CreateNull();
    }
    p->bytes = grown;
    p->cap = cap;
  }
  memset(p->bytes + p->len, 0, off - p->len);
  if (data) memcpy(p->bytes + off, data, n);
  p->len = off + n;
  cJSON *span = cJSON_CreateArray();
  cJSON_AddItemToArray(span, cJSON_CreateNumber((double)off));
  cJSON_AddItemToArray(span, cJSON_CreateNumber((double)n));
  return span;
}

/* One tensor of the request: an input's values, a checked output's reference and bounds
 * (pk_te_verify_output's: rel * S + abs per element), or the shape alone. */
static cJSON *tensor_json(payload *p, const pk_te_tensor *t, const pk_te_ref_tensor *ref,
                          bool check) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "dtype", pkrt_dtype_name(t->dtype));
  cJSON *shape = cJSON_AddArrayToObject(j, "shape");
  for (int d = 0; d < t->ndim; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t->shape[d]));
  size_t n = (size_t)pk_te_tensor_numel(t);
  if (t->kind == PK_TE_PLACEHOLDER) {
    void *data = malloc(n * pkrt_dtype_size(t->dtype) + 1);
    if (!data) {
      p->oom = true;
      return j;
    }
    pk_te_ref_to_buffer(t, ref, data);
    cJSON_AddItemToObject(j, "data", put(p, data, n * pkrt_dtype_size(t->dtype)));
    free(data);
  } else if (check && (t->dtype == PKRT_DTYPE_I32 || t->dtype == PKRT_DTYPE_I64)) {
    cJSON_AddItemToObject(j, "ref", put(p, ref->ival, n * 8));
  } else if (check && (t->dtype == PKRT_DTYPE_F32 || t->dtype == PKRT_DTYPE_F64)) {
    bool f32 = t->dtype == PKRT_DTYPE_F32;
    double rel = f32 ? PK_VERIFY_F32_REL : PK_VERIFY_F64_REL, abs = f32 ? PK_VERIFY_F32_ABS : PK_VERIFY_F64_ABS;
    cJSON_AddItemToObject(j, "ref", put(p, ref->val, n * 8));
    cJSON *span = put(p, NULL, n * 8);
    if (!p->oom)
      for (size_t i = 0; i < n; i++) {
        double b = rel * ref->mag[i] + abs;
        memcpy(p->bytes + p->len - n * 8 + i * 8, &b, 8);
      }
    cJSON_AddItemToObject(j, "bound", span);
  }
  return j;
}

static void set_reply(meas_reply *r, pk_meas_status st, const char *error) {
  r->status = st;
  meas_set_error(r->error, error);
}

static double number(const cJSON *a, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(a, key);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The device's answer as the worker's reply. */
static void read_answer(const cJSON *a, meas_reply *r) {
  const char *st = cJSON_GetObjectItemCaseSensitive(a, "status")->valuestring;
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(a, "error");
  const char *err = cJSON_IsString(e) ? e->valuestring : "";
  char msg[MEAS_ERROR_BYTES];
  if (!strcmp(st, "ok")) {
    r->status = PK_MEAS_OK;
    r->timing = (pk_timing){.median_ns = number(a, "median_ns"), .min_ns = number(a, "min_ns"),
                            .stddev_ns = number(a, "stddev_ns"), .repeats = (int)number(a, "repeats")};
  } else if (!strcmp(st, "mismatch")) {
    const cJSON *me = cJSON_GetObjectItemCaseSensitive(a, "max_error");
    if (cJSON_IsNumber(me)) snprintf(msg, sizeof msg, "%s; max error %.3g", err, me->valuedouble);
    else snprintf(msg, sizeof msg, "%s; max error NaN or inf", err);
    set_reply(r, PK_MEAS_WRONG, msg);
  } else if (!strcmp(st, "crashed")) {
    set_reply(r, PK_MEAS_CRASH, err);
  } else if (!strcmp(st, "timeout")) {
    set_reply(r, PK_MEAS_TIMEOUT, err);
  } else {
    snprintf(msg, sizeof msg, "%s%s", !strcmp(st, "bad_request") ? "the server refused the request: " : "", err);
    set_reply(r, PK_MEAS_RUNTIME_ERROR, msg);
  }
}

bool meas_remote_ask(pk_measurer *m, pk_ctx *run, const char *te, const meas_job *job,
                     double limit_s, meas_reply *r, bool *by_budget) {
  double left_s = (double)meas_time_left(m) * 1e-9;
  *by_budget = left_s < limit_s;
  double timeout_s = *by_budget ? left_s : limit_s;
  memset(r, 0, sizeof *r);
  if (reference(m, te) != PK_OK) {
    set_reply(r, PK_MEAS_RUNTIME_ERROR, m->rref.error);
    return true;
  }
  char *object;
  size_t object_len;
  if (pk_read_file(run, job->so_path, &object, &object_len) != PK_OK) {
    set_reply(r, PK_MEAS_RUNTIME_ERROR, pk_ctx_error(run));
    return true;
  }
  const pk_te_program *prog = m->rref.prog;
  payload p = {0};
  cJSON *q = cJSON_CreateObject();
  cJSON_AddStringToObject(q, "op", "measure");
  cJSON_AddStringToObject(q, "kernel", "k0");
  cJSON_AddItemToObject(q, "object", put(&p, object, object_len));
  cJSON *tensors = cJSON_AddArrayToObject(q, "tensors");
  for (int i = 0; i < prog->ntensors; i++)
    cJSON_AddItemToArray(tensors, tensor_json(&p, prog->tensors[i], &m->rref.ref->tensors[i],
                                              job->check_mask[i] == '1'));
  cJSON_AddNumberToObject(q, "min_ns", (double)m->settings.min_ns);
  cJSON_AddNumberToObject(q, "timeout_s", timeout_s);
  cJSON_AddBoolToObject(q, "pin", m->settings.pin);
  size_t len = 0;
  void *body = p.oom ? NULL : pk_remote_body(q, p.bytes, p.len, &len);
  cJSON_Delete(q);
  free(p.bytes);
  if (!body) {
    set_reply(r, PK_MEAS_RUNTIME_ERROR, "out of memory for the request");
    return true;
  }
  cJSON *a;
  pk_status s = pk_remote_call(m->settings.remote, body, len, timeout_s + ANSWER_SLACK_S, &a);
  free(body);
  if (s != PK_OK) return false; /* the connection is over: the measurer breaks */
  read_answer(a, r);
  cJSON_Delete(a);
  return true;
}

void meas_remote_free(pk_measurer *m) { pk_ctx_free(m->rref.ctx); }
