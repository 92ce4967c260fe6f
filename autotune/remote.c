/* remote.c — the host's connection to a device's pock-rt-serve: connect with a time limit,
 * the server's hello (its nonce and request cap), each request signed over nonce, sequence
 * number and bytes with the fleet's secret key, answers read with a time limit, and the
 * device's INFO turned into the records' fingerprint. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "json_canon.h"
#include "pk_remote.h"
#include "pkrt_remote.h"

#define CONNECT_TIMEOUT_S 15
#define INFO_TIMEOUT_S 60

struct pk_remote {
  pk_ctx *ctx;             /* the caller's: info strings, failures */
  const char *name;
  int fd;                  /* -1 once the connection is over */
  const char *broken;      /* why it is over */
  pkrt_signer *signer;
  uint8_t nonce[PKRT_REMOTE_NONCE_BYTES];
  uint64_t cap, seq;
  pk_remote_info info;
};

/* ---------------------------------------------------------------- socket I/O */

static int write_all(int fd, const void *buf, size_t len) {
  for (size_t put = 0; put < len;) {
    ssize_t w = send(fd, (const char *)buf + put, len - put, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    put += (size_t)w;
  }
  return 0;
}

/* 1 read; 0 the peer went away (EOF before any byte, or the connection reset: a killed
 * server's socket may do either); -1 an error, EOF midway or the deadline passed. */
static int read_all(int fd, void *buf, size_t len, int64_t deadline) {
  size_t got = 0;
  while (got < len) {
    int64_t left_ms = (deadline - pkrt_now_ns()) / 1000000;
    if (left_ms <= 0) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, left_ms > 60000 ? 60000 : (int)left_ms + 1) <= 0) continue;
    ssize_t r = read(fd, (char *)buf + got, len - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 && (errno == ECONNRESET || errno == EPIPE)) return 0;
    if (r <= 0) return r == 0 && got == 0 ? 0 : -1;
    got += (size_t)r;
  }
  return 1;
}

/* HOST:PORT or [HOST]:PORT into its parts (in ctx). */
static pk_status split_hostport(pk_ctx *ctx, const char *hp, char **host, char **port) {
  /* the name goes into records' measure_settings JSON and messages as it is */
  if (strspn(hp, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_:[]%") != strlen(hp))
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "--remote '%s': want HOST:PORT", hp);
  const char *colon = strrchr(hp, ':');
  if (!colon || colon == hp || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1))
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "--remote '%s': want HOST:PORT", hp);
  const char *h = hp;
  size_t hl = (size_t)(colon - hp);
  if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') h++, hl -= 2;
  *host = pk_strndup(ctx, h, hl);
  *port = pk_strdup(ctx, colon + 1);
  return PK_OK;
}

/* A TCP connection within CONNECT_TIMEOUT_S (an unreachable device does not hang). */
static pk_status connect_to(pk_ctx *ctx, const char *hp, int *out) {
  char *host = NULL, *port = NULL;
  pk_status s = split_hostport(ctx, hp, &host, &port);
  if (s != PK_OK) return s;
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res;
  int e = getaddrinfo(host, port, &hints, &res);
  if (e != 0) return pk_ctx_fail(ctx, PK_ERR_IO, "remote %s: %s", hp, gai_strerror(e));
  int fd = -1, err = 0;
  for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int rc = connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      struct pollfd p = {.fd = fd, .events = POLLOUT};
      socklen_t el = sizeof err;
      rc = poll(&p, 1, CONNECT_TIMEOUT_S * 1000) == 1 &&
                   getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0
               ? 0 : -1;
      if (rc != 0 && !err) err = ETIMEDOUT;
    } else if (rc != 0) {
      err = errno;
    }
    if (rc != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0)
    return pk_ctx_fail(ctx, PK_ERR_IO, "remote %s: cannot connect: %s (is pock-rt-serve "
                       "running there, and bound to an address this host reaches?)", hp,
                       strerror(err ? err : ECONNREFUSED));
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  *out = fd;
  return PK_OK;
}

/* ---------------------------------------------------------------- requests */

static pk_status break_off(pk_remote *r, const char *why) {
  if (!r->broken) r->broken = pk_sprintf(r->ctx, "remote %s: %s", r->name, why);
  if (r->fd >= 0) close(r->fd);
  r->fd = -1;
  return pk_ctx_fail(r->ctx, PK_ERR_RUNTIME, "%s", r->broken);
}

const char *pk_remote_broken(const pk_remote *r) { return r->broken; }

void *pk_remote_body(const cJSON *j, const void *payload, size_t payload_len, size_t *len) {
  char *text = cJSON_PrintUnformatted(j);
  if (!text) return NULL;
  size_t jl = strlen(text), start = pkrt_remote_payload_start(jl);
  *len = start + payload_len;
  uint8_t *b = aligned_alloc(8, (*len + 7) / 8 * 8);
  if (b) {
    memset(b, 0, start);
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(jl >> (8 * i));
    memcpy(b + 4, text, jl);
    if (payload_len) memcpy(b + start, payload, payload_len);
  }
  free(text);
  return b;
}

pk_status pk_remote_call(pk_remote *r, const void *body, size_t len, double timeout_s,
                         cJSON **answer) {
  *answer = NULL;
  if (r->fd < 0) return pk_ctx_fail(r->ctx, PK_ERR_RUNTIME, "%s", r->broken);
  if (len > r->cap)
    return pk_ctx_fail(r->ctx, PK_ERR_RUNTIME, "remote %s: a %zu-byte request is over the "
                       "server's cap of %llu bytes (pock-rt-serve --max-request)", r->name, len,
                       (unsigned long long)r->cap);
  /* the signature covers prefix || body; hashing them apart would need a second format */
  uint8_t *msg = malloc(PKRT_REMOTE_PREFIX_BYTES + len);
  if (!msg) return pk_ctx_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
  pkrt_remote_signed_prefix(msg, r->nonce, r->seq, len);
  memcpy(msg + PKRT_REMOTE_PREFIX_BYTES, body, len);
  pkrt_remote_head head = {.seq = r->seq, .body_len = len};
  pkrt_signer_sign(r->signer, msg, PKRT_REMOTE_PREFIX_BYTES + len, head.sig);
  free(msg);
  uint8_t hb[PKRT_REMOTE_HEAD_BYTES];
  pkrt_remote_head_encode(hb, &head);
  r->seq++;
  if (write_all(r->fd, hb, sizeof hb) != 0 || write_all(r->fd, body, len) != 0)
    return break_off(r, "the server is gone (the connection closed while sending)");
  int64_t deadline = pkrt_now_ns() + (int64_t)(timeout_s * 1e9);
  uint8_t ah[8];
  int got = read_all(r->fd, ah, sizeof ah, deadline);
  if (got != 1)
    return break_off(r, got == 0 ? "the server is gone (the connection closed)"
                                 : "no answer in time, or the connection broke");
  uint32_t n = (uint32_t)ah[4] | (uint32_t)ah[5] << 8 | (uint32_t)ah[6] << 16 | (uint32_t)ah[7] << 24;
  if (memcmp(ah, "PKAN", 4) != 0 || n == 0 || n > PKRT_REMOTE_ANSWER_MAX)
    return break_off(r, "not a Pock answer (is this a pock-rt-serve port?)");
  char *text = pk_alloc(r->ctx, (size_t)n + 1);
  if (read_all(r->fd, text, n, deadline) != 1) return break_off(r, "the answer broke off");
  text[n] = '\0';
  cJSON *j = cJSON_Parse(text);
  const cJSON *st = cJSON_GetObjectItemCaseSensitive(j, "status");
  if (!cJSON_IsString(st)) {
    cJSON_Delete(j);
    return break_off(r, "an answer that is not a JSON object with a status");
  }
  if (!strcmp(st->valuestring, "refused")) { /* the server ends the connection */
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(j, "error");
    const char *why = pk_sprintf(r->ctx, "the server refused the request: %s",
                                 cJSON_IsString(e) ? e->valuestring : "?");
    cJSON_Delete(j);
    return break_off(r, why);
  }
  *answer = j;
  return PK_OK;
}

/* ---------------------------------------------------------------- INFO */

static const char *info_string(pk_ctx *ctx, const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  return cJSON_IsString(v) ? pk_strdup(ctx, v->valuestring) : NULL;
}

static pk_status ask_info(pk_remote *r) {
  cJSON *q = cJSON_CreateObject();
  cJSON_AddStringToObject(q, "op", "info");
  size_t len;
  void *body = pk_remote_body(q, NULL, 0, &len);
  cJSON_Delete(q);
  if (!body) return pk_ctx_fail(r->ctx, PK_ERR_NOMEM, "out of memory");
  cJSON *a;
  pk_status s = pk_remote_call(r, body, len, INFO_TIMEOUT_S, &a);
  free(body);
  if (s != PK_OK) return s;
  pk_remote_info *in = &r->info;
  in->arch = info_string(r->ctx, a, "arch");
  in->features = info_string(r->ctx, a, "features");
  in->cpu = info_string(r->ctx, a, "cpu");
  in->kernel = info_string(r->ctx, a, "kernel");
  const cJSON *cores = cJSON_GetObjectItemCaseSensitive(a, "cores");
  in->cores = cJSON_IsNumber(cores) ? cores->valueint : 0;
  in->emulated = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a, "emulated"));
  cJSON_Delete(a);
  if (!in->arch || !*in->arch || !in->features)
    return break_off(r, "its INFO answer names no arch or features");
  return PK_OK;
}

pk_status pk_remote_open(pk_ctx *ctx, const char *hostport, const char *key_path, pk_remote **out) {
  *out = NULL;
  if (!key_path)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "--remote needs --key FLEET.key: every request is signed");
  pk_remote *r = calloc(1, sizeof *r);
  if (!r) return pk_ctx_fail(ctx, PK_ERR_NOMEM, "out of memory");
  *r = (pk_remote){.ctx = ctx, .name = pk_strdup(ctx, hostport), .fd = -1};
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pk_status s = PK_OK;
  if (!rt || pkrt_signer_load(rt, key_path, &r->signer) != PKRT_OK)
    s = pk_ctx_fail(ctx, PK_ERR_USAGE, "--key: %s", rt ? pkrt_ctx_error(rt) : "out of memory");
  pkrt_ctx_free(rt);
  if (s == PK_OK) s = connect_to(ctx, hostport, &r->fd);
  if (s == PK_OK) {
    uint8_t hello[PKRT_REMOTE_HELLO_BYTES];
    int got = read_all(r->fd, hello, sizeof hello, pkrt_now_ns() + (int64_t)INFO_TIMEOUT_S * 1000000000);
    if (got != 1 || pkrt_remote_hello_decode(hello, &r->cap, r->nonce) != 0)
      s = break_off(r, "no Pock hello (is pock-rt-serve, of this version, on that port?)");
  }
  if (s == PK_OK) s = ask_info(r);
  if (s != PK_OK) {
    pk_remote_close(r);
    return s;
  }
  *out = r;
  return PK_OK;
}

const char *pk_remote_name(const pk_remote *r) { return r->name; }
const pk_remote_info *pk_remote_info_of(const pk_remote *r) { return &r->info; }

void pk_remote_close(pk_remote *r) {
  if (!r) return;
  if (r->fd >= 0) close(r->fd);
  pkrt_signer_free(r->signer);
  free(r);
}

/* ---------------------------------------------------------------- fingerprint */

static bool has_word(const char *list, const char *word) {
  size_t n = strlen(word);
  for (const char *p = list; (p = strstr(p, word)); p += n)
    if ((p == list || p[-1] == ' ' || p[-1] == '\t') && (!p[n] || p[n] == ' ' || p[n] == '\t' || p[n] == '\n'))
      return true;
  return false;
}

pk_status pk_remote_fingerprint(pk_ctx *ctx, const pk_remote *r, const pk_target *t,
                                pk_target_fp *out) {
  const pk_remote_info *in = &r->info;
  if (t->kind != PK_TARGET_C || !t->arch || strcmp(t->arch, in->arch) != 0)
    return pk_ctx_fail(ctx, PK_ERR_USAGE, "remote %s: fingerprint.must_match.arch: the device "
                       "is %s, the target '%s' (compiler %s) builds for %s (give --cc %s=CC)",
                       r->name, in->arch, t->text, t->cc ? t->cc : "?", t->arch ? t->arch : "?",
                       in->arch);
  for (int i = 0; i < t->nisa; i++)
    if (!has_word(in->features, t->isa[i]))
      return pk_ctx_fail(ctx, PK_ERR_USAGE, "remote %s: fingerprint.must_match.isa: the target "
                         "'%s' uses CPU feature '%s', which the device lacks (name its CPU: "
                         "--target %s='c -mcpu=...')", r->name, t->text, t->isa[i], in->arch);
  pk_status s = pk_target_fp_of(ctx, t, out);
  if (s != PK_OK) return s;
  /* informative: the device that measured, not this host */
  cJSON *info = cJSON_CreateObject();
  cJSON_AddStringToObject(info, "cpu", in->cpu ? in->cpu : "unknown");
  cJSON_AddNumberToObject(info, "cores", in->cores);
  cJSON_AddStringToObject(info, "kernel", in->kernel ? in->kernel : "unknown");
  cJSON_AddStringToObject(info, "remote", r->name);
  if (in->emulated) cJSON_AddTrueToObject(info, "emulated"); /* in the database: not real timings */
  cJSON *old = cJSON_Parse(out->informative);
  if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(old, "fake"))) cJSON_AddTrueToObject(info, "fake");
  cJSON_Delete(old);
  out->informative = pk_json_canonical(ctx, info);
  cJSON_Delete(info);
  return PK_OK;
}
