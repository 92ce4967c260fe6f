/* pock_rt_serve.c — `pock-rt-serve`: the device end of remote tuning (docs/remote-tuning.md).
 * Listens (loopback unless --bind), gives each connection a fresh random nonce, and for each
 * request checks its size against the cap before reading it, then the fleet key's Ed25519
 * signature over the nonce, the sequence number and the bytes; what passes is parsed and
 * answered (serve_measure.c). Each connection runs in its own process, each measurement in
 * a child of that, so nothing a client sends can take the server down. Its own binary, on
 * libpockrt alone: pock-rt stays under 200 KB. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdnoreturn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_common.h"
#include "pock_rt_serve.h"

#define MAX_CONNECTIONS 8
#define IDLE_TIMEOUT_S 900 /* a host builds a batch between requests: minutes, not hours */
#define BODY_TIMEOUT_S 120 /* a request's bytes, once its head has come */

static const char serve_help[] =
    "usage: pock-rt-serve --port P --trusted-key FLEET.pub [options]\n"
    "\n"
    "Serves remote tuning (docs/remote-tuning.md): a host's `pock tune --remote HOST:P\n"
    "--key FLEET.key` sends candidate kernels, which this device loads and times, each in a\n"
    "child process with a time limit, checking its outputs against the host's reference.\n"
    "Every request must be signed with the fleet key whose public half is FLEET.pub. It\n"
    "runs kernels it is sent, as the user who started it: run it as an unprivileged user.\n"
    "\n"
    "options:\n"
    "  --port P              TCP port (0: any free one; the line 'listening on ADDR:PORT'\n"
    "                        on stdout says which)\n"
    "  --trusted-key KEY     the fleet's public key (NAME.pub, or its text)\n"
    "  --bind ADDR           the address to listen on (default 127.0.0.1: this machine only)\n"
    "  --max-request BYTES   refuse larger requests before reading them (default 268435456)\n"
    "\n"
    "Exit status: 1 error (the port cannot be bound, the key cannot be read), 2 usage.\n";

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("pock-rt-serve: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

static int usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pkrt_cli_vusage("pock-rt-serve", fmt, ap);
  va_end(ap);
  return 2;
}

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

/* Reads len bytes before timeout_s passes: 1 done, 0 EOF before any byte, -1 otherwise. */
static int read_all(int fd, void *buf, size_t len, double timeout_s) {
  int64_t deadline = pkrt_now_ns() + (int64_t)(timeout_s * 1e9);
  size_t got = 0;
  while (got < len) {
    int64_t left_ms = (deadline - pkrt_now_ns()) / 1000000;
    if (left_ms <= 0) return -1;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int pr = poll(&p, 1, left_ms > 60000 ? 60000 : (int)left_ms + 1);
    if (pr <= 0) continue;
    ssize_t r = read(fd, (char *)buf + got, len - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return r == 0 && got == 0 ? 0 : -1;
    got += (size_t)r;
  }
  return 1;
}

/* answer := "PKAN" u32 length JSON; frees json. */
static int send_answer(int fd, char *json) {
  if (!json) json = serve_error_answer("error", "out of memory");
  size_t n = json ? strlen(json) : 0;
  uint8_t head[8] = {'P', 'K', 'A', 'N', (uint8_t)n, (uint8_t)(n >> 8), (uint8_t)(n >> 16),
                     (uint8_t)(n >> 24)};
  int rc = json && write_all(fd, head, sizeof head) == 0 && write_all(fd, json, n) == 0 ? 0 : -1;
  free(json);
  return rc;
}

/* ---------------------------------------------------------------- one connection */

typedef struct server {
  pkrt_public_key key;
  uint64_t cap;
  int64_t fault_every; /* tests: POCK_SERVE_FAULT_EVERY (0: off) */
} server;

/* Refuses: answers why and ends the connection (its stream is no longer trusted). The
 * rest of the request is drained a moment before closing: closing with unread bytes would
 * reset the connection, and the host could lose the answer that says why. */
static void refuse(int fd, const char *peer, const char *why) {
  log_line("%s: refused: %s", peer, why);
  send_answer(fd, serve_error_answer("refused", why));
  shutdown(fd, SHUT_WR);
  int64_t until = pkrt_now_ns() + 2000000000LL;
  char sink[4096];
  for (size_t drained = 0; drained < ((size_t)1 << 24) && pkrt_now_ns() < until;) {
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, 200) <= 0) continue;
    ssize_t n = read(fd, sink, sizeof sink);
    if (n <= 0) break;
    drained += (size_t)n;
  }
}

static noreturn void serve_connection(const server *sv, int fd, const char *peer) {
  uint8_t nonce[PKRT_REMOTE_NONCE_BYTES], hello[PKRT_REMOTE_HELLO_BYTES];
  if (pkrt_random_bytes(nonce, sizeof nonce) != 0) _exit(1);
  pkrt_remote_hello_encode(hello, sv->cap, nonce);
  if (write_all(fd, hello, sizeof hello) != 0) _exit(0);
  pkrt_ctx *rt = pkrt_ctx_new(1);
  int64_t measures = 0;
  for (uint64_t seq = 0;; seq++) {
    uint8_t hb[PKRT_REMOTE_HEAD_BYTES];
    pkrt_remote_head head;
    int got = read_all(fd, hb, sizeof hb, IDLE_TIMEOUT_S);
    if (got == 0) _exit(0); /* the host is done */
    if (got < 0) _exit(0);  /* gone, or idle too long */
    if (pkrt_remote_head_decode(hb, &head) != 0) {
      refuse(fd, peer, "not a request head (magic or version)");
      _exit(0);
    }
    char why[160];
    if (head.body_len > sv->cap) { /* before a byte of it is read or allocated */
      snprintf(why, sizeof why, "a request of %llu bytes is over this server's cap of %llu",
               (unsigned long long)head.body_len, (unsigned long long)sv->cap);
      refuse(fd, peer, why);
      _exit(0);
    }
    if (head.seq != seq) {
      snprintf(why, sizeof why, "request number %llu out of sequence (expected %llu): "
               "replayed or reordered", (unsigned long long)head.seq, (unsigned long long)seq);
      refuse(fd, peer, why);
      _exit(0);
    }
    /* prefix || body in one buffer: the signed message, read in place (8-byte aligned) */
    uint8_t *msg = aligned_alloc(8, (PKRT_REMOTE_PREFIX_BYTES + head.body_len + 7) / 8 * 8);
    if (!msg) {
      refuse(fd, peer, "out of memory for the request");
      _exit(0);
    }
    pkrt_remote_signed_prefix(msg, nonce, seq, head.body_len);
    uint8_t *body = msg + PKRT_REMOTE_PREFIX_BYTES;
    if (read_all(fd, body, head.body_len, BODY_TIMEOUT_S) != 1) _exit(0);
    if (!pkrt_signature_verify(&sv->key, msg, PKRT_REMOTE_PREFIX_BYTES + head.body_len, head.sig)) {
      refuse(fd, peer, "the signature does not verify with this server's trusted key (another "
                       "key, or a request recorded on another connection)");
      _exit(0);
    }
    pkrt_remote_request rq;
    char *answer;
    if (pkrt_remote_request_parse(rt, body, head.body_len, &rq) != PKRT_OK) {
      log_line("%s: bad request: %s", peer, pkrt_ctx_error(rt));
      answer = serve_error_answer("bad_request", pkrt_ctx_error(rt));
    } else if (rq.op == PKRT_REMOTE_INFO) {
      answer = serve_info_answer();
    } else {
      /* the test hook: every Nth candidate of a connection crashes, the next Nth hangs */
      measures++;
      int fault = sv->fault_every > 0 && measures % sv->fault_every == 0
                      ? (measures / sv->fault_every % 2 ? SERVE_FAULT_CRASH : SERVE_FAULT_HANG)
                      : SERVE_FAULT_NONE;
      answer = serve_measure_answer(&rq, fault);
    }
    free(msg);
    if (send_answer(fd, answer) != 0) _exit(0);
  }
}

/* ---------------------------------------------------------------- listening */

static int listen_on(const char *addr, const char *port, char *where, size_t n) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *res;
  int e = getaddrinfo(addr, port, &hints, &res);
  if (e != 0) {
    log_line("error: --bind %s: %s", addr, gai_strerror(e));
    return -1;
  }
  int fd = -1;
  for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, 16) != 0) {
      log_line("error: cannot listen on %s port %s: %s", addr, port, strerror(errno));
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(res);
  if (fd < 0) return -1;
  struct sockaddr_storage ss;
  socklen_t sl = sizeof ss;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0 &&
      getnameinfo((struct sockaddr *)&ss, sl, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0)
    snprintf(where, n, "%s:%s", host, serv);
  return fd;
}

static void peer_name(const struct sockaddr_storage *ss, socklen_t sl, char *out, size_t n) {
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (getnameinfo((const struct sockaddr *)ss, sl, host, sizeof host, serv, sizeof serv,
                  NI_NUMERICHOST | NI_NUMERICSERV) == 0)
    snprintf(out, n, "%s:%s", host, serv);
  else
    snprintf(out, n, "?");
}

static noreturn void serve_forever(const server *sv, int lfd) {
  int active = 0;
  pid_t self = getpid();
  for (;;) {
    while (active > 0 && waitpid(-1, NULL, WNOHANG) > 0) active--;
    if (active >= MAX_CONNECTIONS && waitpid(-1, NULL, 0) > 0) active--;
    /* wake each second to reap connections that ended: no zombie waits for the next one */
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    if (poll(&p, 1, active > 0 ? 1000 : -1) <= 0) continue;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int fd = accept4(lfd, (struct sockaddr *)&ss, &sl, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EINTR && errno != ECONNABORTED) log_line("accept: %s", strerror(errno));
      continue;
    }
    char peer[NI_MAXHOST + NI_MAXSERV + 2];
    peer_name(&ss, sl, peer, sizeof peer);
    pid_t pid = fork();
    if (pid == 0) {
      close(lfd);
      prctl(PR_SET_PDEATHSIG, SIGKILL); /* a killed server leaves nothing running */
      if (getppid() != self) _exit(0);
      serve_connection(sv, fd, peer);
    }
    close(fd);
    if (pid > 0) active++;
    else log_line("%s: cannot fork: %s", peer, strerror(errno));
  }
}

int main(int argc, char **argv) {
  const char *port = NULL, *key = NULL, *bind_addr = "127.0.0.1";
  server sv = {.cap = PKRT_REMOTE_DEFAULT_CAP};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(serve_help, stdout);
      return 0;
    }
    if (i + 1 >= argc) return usage("%s needs a value (--help)", a);
    const char *v = argv[++i];
    int64_t n;
    if (!strcmp(a, "--port")) {
      if (!pkrt_cli_parse_i64(v, &n) || n < 0 || n > 65535) return usage("--port: want 0..65535");
      port = v;
    } else if (!strcmp(a, "--trusted-key")) {
      key = v;
    } else if (!strcmp(a, "--bind")) {
      bind_addr = v;
    } else if (!strcmp(a, "--max-request")) {
      if (!pkrt_cli_parse_i64(v, &n) || n < 1024 || n > ((int64_t)1 << 40))
        return usage("--max-request: want 1024..2^40 bytes");
      sv.cap = (uint64_t)n;
    } else {
      return usage("unknown option '%s' (--help)", a);
    }
  }
  if (!port) return usage("--port P is required");
  const char *fault = getenv("POCK_SERVE_FAULT_EVERY");
  if (fault && *fault && (!pkrt_cli_parse_i64(fault, &sv.fault_every) || sv.fault_every < 1))
    return usage("POCK_SERVE_FAULT_EVERY: want N >= 1");
  if (sv.fault_every > 0)
    log_line("POCK_SERVE_FAULT_EVERY=%lld: every %lldth candidate crashes or hangs (tests only)",
             (long long)sv.fault_every, (long long)sv.fault_every);
  if (!key) return usage("--trusted-key KEY is required: every request is signed with it");
  pkrt_ctx *rt = pkrt_ctx_new(1);
  if (!rt || pkrt_public_key_load(rt, key, &sv.key) != PKRT_OK) {
    log_line("error: %s", rt ? pkrt_ctx_error(rt) : "out of memory");
    return 1;
  }
  pkrt_ctx_free(rt);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGCHLD, SIG_DFL); /* connections are reaped by waitpid */
  char where[NI_MAXHOST + NI_MAXSERV + 2] = "?";
  int lfd = listen_on(bind_addr, port, where, sizeof where);
  if (lfd < 0) return 1;
  printf("listening on %s (trusted key %s)\n", where, sv.key.id);
  fflush(stdout);
  serve_forever(&sv, lfd);
}
