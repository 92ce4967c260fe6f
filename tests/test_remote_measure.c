/* test_remote_measure.c — the remote measurer against a real pock-rt-serve on loopback
 * (docs/remote-tuning.md): hand-written kernels that crash, hang, compute a wrong element
 * or return an error come back as those statuses, each followed by a good kernel that
 * still measures ok (the server lives on); a wrong key is refused at INFO; on the raw
 * protocol a replayed request (same connection: its sequence number; another connection:
 * its nonce), a malformed one and one over the cap are answered, never crash the server;
 * a server killed mid-run breaks the measurer cleanly ("not measured", no result).
 *   test_remote_measure [PATH/TO/pock-rt-serve]   (default: the build's, PK_SERVE) */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "pk_measurer.h"
#include "pk_remote.h"
#include "pkrt_remote.h"
#include "pk_test.h"

static const char *const MATMUL_TE =
    "A = placeholder((32, 32), f32)\n"
    "B = placeholder((32, 32), f32)\n"
    "k = reduce_axis(32)\n"
    "C = compute((32, 32), (i, j) => sum(A[i, k] * B[k, j], k))\n";
static const char *const KERNEL_HEAD =
    "static int k0(const pkrt_buffer *b, int32_t nb, const int64_t *s, int32_t ns,\n"
    "              void *ws, pkrt_exec_ctx *ctx) {\n"
    "  const float *A = b[0].data, *B = b[1].data; float *C = b[2].data;\n";
static const char *const KERNEL_TAIL =
    "}\n"
    "static const pkrt_kernel_desc kernels[] = {{\"k0\", k0, 3, 0, 0, \"planted\"}};\n"
    "PKRT_EXPORT const pkrt_module_desc pkrt_module = {PKRT_ABI_VERSION, 1, kernels};\n";
static const char *const MATMUL_BODY =
    "  for (int i = 0; i < 32; i++)\n"
    "    for (int j = 0; j < 32; j++) {\n"
    "      float acc = 0;\n"
    "      for (int k = 0; k < 32; k++) acc += A[i * 32 + k] * B[k * 32 + j];\n"
    "      C[i * 32 + j] = acc;\n"
    "    }\n";

/* ---------------------------------------------------------------- the server */

static pid_t server_pid = -1;
static int server_port;

/* Starts pock-rt-serve on a free port (its first stdout line says which). */
static int start_server(const char *serve, const char *pub, const char *cap) {
  int out[2];
  if (pipe(out) != 0) return -1;
  server_pid = fork();
  if (server_pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    close(out[1]);
    execl(serve, serve, "--port", "0", "--trusted-key", pub, "--max-request", cap, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  char line[256] = "";
  FILE *f = fdopen(out[0], "r");
  if (!f || !fgets(line, sizeof line, f)) return -1;
  fclose(f);
  const char *colon = strrchr(line, ':');
  if (strncmp(line, "listening on ", 13) != 0 || !colon) return -1;
  server_port = atoi(colon + 1);
  return server_port > 0 ? 0 : -1;
}

static bool server_alive(void) {
  return server_pid > 0 && waitpid(server_pid, NULL, WNOHANG) == 0;
}

static const char *hostport(pk_ctx *ctx) { return pk_sprintf(ctx, "127.0.0.1:%d", server_port); }

/* ---------------------------------------------------------------- raw protocol */

typedef struct raw {
  int fd;
  uint8_t nonce[PKRT_REMOTE_NONCE_BYTES];
  uint64_t cap;
} raw;

static bool raw_open(raw *r) {
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)server_port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  uint8_t hello[PKRT_REMOTE_HELLO_BYTES];
  r->fd = socket(AF_INET, SOCK_STREAM, 0);
  return r->fd >= 0 && connect(r->fd, (struct sockaddr *)&a, sizeof a) == 0 &&
         recv(r->fd, hello, sizeof hello, MSG_WAITALL) == (ssize_t)sizeof hello &&
         pkrt_remote_hello_decode(hello, &r->cap, r->nonce) == 0;
}

/* A signed request as bytes (head + body), for sending and replaying. */
static uint8_t *raw_request(const pkrt_signer *s, const raw *r, uint64_t seq, const char *json,
                            size_t *len) {
  size_t blen;
  cJSON *j = cJSON_Parse(json);
  uint8_t *body = pk_remote_body(j, NULL, 0, &blen);
  cJSON_Delete(j);
  uint8_t *msg = malloc(PKRT_REMOTE_PREFIX_BYTES + blen);
  pkrt_remote_signed_prefix(msg, r->nonce, seq, blen);
  memcpy(msg + PKRT_REMOTE_PREFIX_BYTES, body, blen);
  pkrt_remote_head h = {.seq = seq, .body_len = blen};
  pkrt_signer_sign(s, msg, PKRT_REMOTE_PREFIX_BYTES + blen, h.sig);
  uint8_t *out = malloc(PKRT_REMOTE_HEAD_BYTES + blen);
  pkrt_remote_head_encode(out, &h);
  memcpy(out + PKRT_REMOTE_HEAD_BYTES, body, blen);
  *len = PKRT_REMOTE_HEAD_BYTES + blen;
  free(body);
  free(msg);
  return out;
}

/* Sends bytes and returns the answer's JSON text (malloc'd), or NULL when the server
 * closed the connection without one. */
static char *raw_ask(const raw *r, const void *bytes, size_t len) {
  if (send(r->fd, bytes, len, MSG_NOSIGNAL) != (ssize_t)len) return NULL;
  uint8_t h[8];
  if (recv(r->fd, h, 8, MSG_WAITALL) != 8 || memcmp(h, "PKAN", 4) != 0) return NULL;
  uint32_t n = (uint32_t)h[4] | (uint32_t)h[5] << 8 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 24;
  char *text = calloc(1, (size_t)n + 1);
  if (recv(r->fd, text, n, MSG_WAITALL) != (ssize_t)n) {
    free(text);
    return NULL;
  }
  return text;
}

static void test_protocol(const char *key) {
  pkrt_ctx *rt = pkrt_ctx_new(1);
  pkrt_signer *s;
  CHECK(pkrt_signer_load(rt, key, &s) == PKRT_OK, "signer: %s", pkrt_ctx_error(rt));
  raw a, b, c, d;
  CHECK(raw_open(&a), "connect and read the hello");
  size_t len, len2;
  uint8_t *info0 = raw_request(s, &a, 0, "{\"op\":\"info\"}", &len);
  char *ans = raw_ask(&a, info0, len);
  CHECK(ans && strstr(ans, "\"status\":\"ok\"") && strstr(ans, "\"arch\""), "INFO: %s", ans ? ans : "none");
  free(ans);
  ans = raw_ask(&a, info0, len); /* the same bytes again: a replay on its own connection */
  CHECK(ans && strstr(ans, "\"refused\"") && strstr(ans, "out of sequence"),
        "a replayed request is refused: %s", ans ? ans : "none");
  free(ans);
  close(a.fd);

  CHECK(raw_open(&b), "second connection");
  CHECK(memcmp(a.nonce, b.nonce, sizeof a.nonce) != 0, "each connection has its own nonce");
  ans = raw_ask(&b, info0, len); /* recorded on the first connection */
  CHECK(ans && strstr(ans, "\"refused\"") && strstr(ans, "signature does not verify"),
        "a request replayed on another connection is refused: %s", ans ? ans : "none");
  free(ans);
  close(b.fd);

  CHECK(raw_open(&c), "third connection");
  uint8_t *bad = raw_request(s, &c, 0, "{\"op\":\"measure\",\"kernel\":\"k0\",\"object\":[0,99]}", &len2);
  ans = raw_ask(&c, bad, len2);
  CHECK(ans && strstr(ans, "\"bad_request\"") && strstr(ans, "object"),
        "a malformed (signed) request gets an error answer: %s", ans ? ans : "none");
  free(ans);
  free(bad);
  uint8_t *info1 = raw_request(s, &c, 1, "{\"op\":\"info\"}", &len2);
  ans = raw_ask(&c, info1, len2);
  CHECK(ans && strstr(ans, "\"status\":\"ok\""), "the connection goes on after it: %s", ans ? ans : "none");
  free(ans);
  free(info1);
  /* garbage where a head belongs */
  ans = raw_ask(&c, "GET / HTTP/1.1\r\n\r\nxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", 88);
  CHECK(ans && strstr(ans, "not a request head"), "garbage is refused: %s", ans ? ans : "none");
  free(ans);
  close(c.fd);

  CHECK(raw_open(&d), "fourth connection");
  pkrt_remote_head h = {.seq = 0, .body_len = d.cap + 1};
  uint8_t hb[PKRT_REMOTE_HEAD_BYTES];
  pkrt_remote_head_encode(hb, &h);
  ans = raw_ask(&d, hb, sizeof hb); /* no body follows: refused before reading it */
  CHECK(ans && strstr(ans, "over this server's cap"), "a request over the cap is refused unread: %s",
        ans ? ans : "none");
  free(ans);
  close(d.fd);
  free(info0);
  pkrt_signer_free(s);
  pkrt_ctx_free(rt);
  CHECK(server_alive(), "the server is alive after all that");
  PASS();
}

/* ---------------------------------------------------------------- the measurer */

static void test_wrong_key(pk_ctx *ctx, const char *other_key) {
  pk_remote *r;
  pk_status s = pk_remote_open(ctx, hostport(ctx), other_key, &r);
  CHECK(s != PK_OK && strstr(pk_ctx_error(ctx), "refused") && strstr(pk_ctx_error(ctx), "signature"),
        "another key is refused at INFO: %s", pk_ctx_error(ctx));
  CHECK(server_alive(), "the server lives on");
  PASS();
}

static void check_status(const char *what, const pk_measurement *m, pk_meas_status want) {
  if (m->status == want && (want == PK_MEAS_OK ? m->timing.repeats >= 5 : m->error && *m->error))
    printf("PASS %s: %s%s%s\n", what, pk_meas_status_name(m->status), m->error ? ": " : "",
           m->error ? m->error : "");
  else
    PK_TEST_FAIL(what, "%s (want %s): %s", pk_meas_status_name(m->status),
                 pk_meas_status_name(want), m->error ? m->error : "");
}

static void test_planted(pk_ctx *ctx, const char *key) {
  pk_ctx_clear_error(ctx); /* the wrong key's */
  pk_remote *r;
  CHECK(pk_remote_open(ctx, hostport(ctx), key, &r) == PK_OK, "open: %s", pk_ctx_error(ctx));
  struct utsname u;
  CHECK(uname(&u) == 0 && !strcmp(pk_remote_info_of(r)->arch, u.machine), "INFO's arch is %s",
        pk_remote_info_of(r)->arch);
  pk_measure_settings set;
  pk_measure_settings_default(&set);
  set.min_ns = 1000000;
  set.timeout_s = 2;
  set.remote = r;
#ifdef PK_TEST_CACHE_DIR
  if (!getenv("POCK_CACHE_DIR")) set.cc.cache_dir = PK_TEST_CACHE_DIR;
#endif
  pk_measurer *m;
  CHECK(pk_measurer_new(ctx, &set, &m) == PK_OK, "measurer: %s", pk_ctx_error(ctx));
  CHECK(pk_measurer_worker_pid(m) == -1, "a remote measurer forks no local worker");
  CHECK(strstr(pk_measurer_settings_json(m), "\"remote\":\"127.0.0.1:"), "records say where: %s",
        pk_measurer_settings_json(m));
  pk_te_program *p;
  pk_task task;
  char *abi;
  size_t len;
  CHECK(pk_te_parse(ctx, MATMUL_TE, strlen(MATMUL_TE), "mm.te", &p) == PK_OK &&
        pk_task_from_program(ctx, p, "c", &task) == PK_OK &&
        pk_read_file(ctx, PK_SOURCE_DIR "/include/pock/pkrt_kernel.h", &abi, &len) == PK_OK,
        "the task: %s", pk_ctx_error(ctx));
  const char *good = pk_sprintf(ctx, "%s\n%s%s  return 0;\n%s", abi, KERNEL_HEAD, MATMUL_BODY, KERNEL_TAIL);
  const struct {
    const char *what, *body;
    pk_meas_status want;
  } bad[] = {
      {"segfaulting kernel", "  *(volatile int *)0 = 1;\n  return 0;\n", PK_MEAS_CRASH},
      {"endless kernel", "  for (volatile int spin = 1; spin;) {}\n  return 0;\n", PK_MEAS_TIMEOUT},
      {"wrong kernel", pk_sprintf(ctx, "%s  C[5] += 1.0f;\n  return 0;\n", MATMUL_BODY), PK_MEAS_WRONG},
      {"kernel writing nothing", "  return 0;\n", PK_MEAS_WRONG},
      {"kernel returning 2", "  return 2;\n", PK_MEAS_RUNTIME_ERROR},
  };
  enum { NBAD = sizeof bad / sizeof bad[0] };
  const char *sources[2 * NBAD];
  for (int i = 0; i < NBAD; i++) {
    sources[2 * i] = pk_sprintf(ctx, "%s\n%s%s%s", abi, KERNEL_HEAD, bad[i].body, KERNEL_TAIL);
    sources[2 * i + 1] = good;
  }
  pk_measurement out[2 * NBAD];
  int64_t t0 = pkrt_now_ns();
  pk_status s = pk_measurer_run_sources(m, &task, sources, 2 * NBAD, out);
  double seconds = (double)(pkrt_now_ns() - t0) * 1e-9;
  CHECK(s == PK_OK, "run_sources: %s", pk_ctx_error(ctx));
  for (int i = 0; i < NBAD; i++) {
    check_status(bad[i].what, &out[2 * i], bad[i].want);
    check_status(pk_sprintf(ctx, "good kernel after the %s", bad[i].what), &out[2 * i + 1], PK_MEAS_OK);
  }
  CHECK(strstr(out[4].error, "max error"), "a mismatch says its max error: %s", out[4].error);
  CHECK(seconds < 30, "the endless kernel was stopped at the limit (batch %.1f s)", seconds);
  CHECK(server_alive(), "the server lives on");

  /* killed mid-run: the measurer breaks, nothing is a result */
  kill(server_pid, SIGKILL);
  waitpid(server_pid, NULL, 0);
  server_pid = -1;
  s = pk_measurer_run_sources(m, &task, sources + 1, 1, out);
  CHECK(s != PK_OK && strstr(pk_ctx_error(ctx), "remote 127.0.0.1:") && strstr(pk_ctx_error(ctx), "gone"),
        "a killed server breaks the measurer naming it: %s", pk_ctx_error(ctx));
  CHECK(out[0].status == PK_MEAS_RUNTIME_ERROR && strstr(out[0].error, "not measured"),
        "its candidate is not measured: %s", out[0].error);
  pk_measurer_free(m);
  pk_remote_close(r);
  PASS();
}

int main(int argc, char **argv) {
  const char *serve = argc > 1 ? argv[1] : PK_SERVE;
  signal(SIGPIPE, SIG_IGN);
  if (pk_test_tmpdir_make("pk_remote_measure_") != 0) return 1;
  pkrt_ctx *rt = pkrt_ctx_new(1);
  const char *fleet = pk_test_path("fleet"), *other = pk_test_path("other");
  if (pkrt_key_generate(rt, fleet, NULL) != PKRT_OK || pkrt_key_generate(rt, other, NULL) != PKRT_OK) {
    printf("FAIL keygen: %s\n", pkrt_ctx_error(rt));
    return 1;
  }
  pkrt_ctx_free(rt);
  if (start_server(serve, pk_test_path("fleet.pub"), "1048576") != 0) {
    printf("FAIL cannot start %s\n", serve);
    return 1;
  }
  pk_ctx *ctx = pk_ctx_new();
  test_protocol(pk_test_path("fleet.key"));
  test_wrong_key(ctx, pk_test_path("other.key"));
  test_planted(ctx, pk_test_path("fleet.key"));
  if (server_pid > 0) {
    kill(server_pid, SIGKILL);
    waitpid(server_pid, NULL, 0);
  }
  pk_ctx_free(ctx);
  pk_test_tmpdir_remove();
  return pk_test_summary("test_remote_measure");
}
