/* measure_worker.c — the measurement worker: a process forked before the tuner has any
 * thread, reading requests from its socket and measuring each candidate in a child of its
 * own that it kills at the time limit. It never starts a thread, so its forks are safe. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure_impl.h"

#define MAX_STRING_BYTES (64u << 20) /* a request string longer than this is garbage */

/* The task whose reference outputs are at hand: computed once per task and seed, then
 * inherited by every measurement child through fork. */
typedef struct worker_task {
  pk_ctx *ctx; /* owns everything below; NULL: none yet */
  const char *te;
  uint64_t seed;
  pk_te_program *prog;
  pk_te_ref *ref;
} worker_task;

static pk_status prepare_task(worker_task *wt, const char *te, uint64_t seed, meas_reply *r) {
  if (wt->ctx && wt->seed == seed && strcmp(wt->te, te) == 0) return PK_OK;
  pk_ctx_free(wt->ctx);
  *wt = (worker_task){.ctx = pk_ctx_new(), .seed = seed};
  wt->te = pk_strdup(wt->ctx, te);
  pk_status s = pk_te_parse(wt->ctx, te, strlen(te), "task.te", &wt->prog);
  if (s == PK_OK) {
    wt->ref = pk_te_ref_new(wt->ctx, wt->prog);
    pk_te_ref_fill_random(wt->prog, wt->ref, seed);
    s = pk_te_interp_run(wt->ctx, wt->prog, wt->ref);
  }
  if (s != PK_OK) {
    r->status = PK_MEAS_RUNTIME_ERROR;
    meas_set_error(r->error, pk_sprintf(wt->ctx, "no reference for the task: %s", pk_ctx_error(wt->ctx)));
    pk_ctx_free(wt->ctx);
    *wt = (worker_task){0};
  }
  return s;
}

/* Reads the child's reply until it exits (EOF) or the deadline passes; returns the bytes
 * read, and whether the deadline passed first. */
static size_t collect_reply(int fd, int64_t deadline, meas_reply *r, bool *timed_out) {
  size_t got = 0;
  *timed_out = false;
  for (;;) {
    int64_t left_ms = (deadline - pkrt_now_ns()) / 1000000;
    if (left_ms <= 0) {
      *timed_out = true;
      return got;
    }
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int pr = poll(&p, 1, left_ms > 60000 ? 60000 : (int)left_ms + 1);
    if (pr <= 0) continue; /* EINTR or the timeout: the loop rechecks the deadline */
    char sink[64];
    char *into = got < sizeof *r ? (char *)r + got : sink;
    ssize_t n = read(fd, into, got < sizeof *r ? sizeof *r - got : sizeof sink);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return got; /* EOF: the child exited or died */
    if (got < sizeof *r) got += (size_t)n;
  }
}

/* Turns what happened to the child into the reply's status. */
static void judge(meas_reply *r, size_t got, bool timed_out, int wstatus, double timeout_s) {
  if (got == sizeof *r) return; /* it finished and said how it went */
  memset(r, 0, sizeof *r);
  if (timed_out) {
    r->status = PK_MEAS_TIMEOUT;
    snprintf(r->error, sizeof r->error, "ran past the time limit of %g s and was killed", timeout_s);
  } else if (wstatus != -1 && WIFSIGNALED(wstatus)) {
    r->status = PK_MEAS_CRASH;
    snprintf(r->error, sizeof r->error, "the measuring process died on SIG%s",
             meas_signal_name(WTERMSIG(wstatus)));
  } else {
    r->status = PK_MEAS_CRASH;
    snprintf(r->error, sizeof r->error, "the measuring process exited (status %d) without a result",
             wstatus != -1 && WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1);
  }
}

static void measure_in_child(const worker_task *wt, const meas_request *rq, char *const *str,
                             meas_reply *r) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r->status = PK_MEAS_RUNTIME_ERROR;
    snprintf(r->error, sizeof r->error, "cannot make a pipe: %s", strerror(errno));
    return;
  }
  pid_t worker = getpid();
  int64_t deadline = pkrt_now_ns() + (int64_t)(rq->timeout_s * 1e9);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    meas_close_fds_except(&fds[1], 1);
    meas_die_with_parent(worker);
    meas_child_main(wt->ctx, wt->prog, wt->ref, rq, str, fds[1]);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    r->status = PK_MEAS_RUNTIME_ERROR;
    snprintf(r->error, sizeof r->error, "cannot fork a measuring process: %s", strerror(errno));
    return;
  }
  bool timed_out;
  size_t got = collect_reply(fds[0], deadline, r, &timed_out);
  if (timed_out) kill(pid, SIGKILL);
  close(fds[0]);
  judge(r, got, timed_out, meas_wait(pid), rq->timeout_s);
}

/* Reads one request and its strings (into rctx); 0 at a clean end of the stream. */
static int read_request(int link, pk_ctx *rctx, meas_request *rq, char **str) {
  int got = meas_read_full(link, rq, sizeof *rq);
  if (got <= 0) return got;
  for (int i = 0; i < 5; i++) {
    if (rq->len[i] == 0 || rq->len[i] > MAX_STRING_BYTES) return -1;
    str[i] = pk_alloc(rctx, rq->len[i]);
    if (meas_read_full(link, str[i], rq->len[i]) != 1) return -1;
    str[i][rq->len[i] - 1] = '\0';
  }
  return 1;
}

noreturn void meas_worker_main(int link) {
  /* Ctrl-C on the terminal reaches the whole process group: the tuner decides what an
   * interrupt means, and a worker killed by it would turn the candidate being measured
   * into a bogus failure. The worker ends when the tuner closes the link or dies. */
  signal(SIGINT, SIG_IGN);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGCHLD, SIG_DFL); /* a caller's SIG_IGN would reap children before waitpid could */
  worker_task wt = {0};
  for (;;) {
    pk_ctx *rctx = pk_ctx_new();
    meas_request rq;
    char *str[5];
    if (read_request(link, rctx, &rq, str) != 1) {
      pk_ctx_free(rctx);
      break;
    }
    meas_reply r = {.status = PK_MEAS_OK};
    if (prepare_task(&wt, str[0], rq.seed, &r) == PK_OK) measure_in_child(&wt, &rq, str, &r);
    pk_ctx_free(rctx);
    if (meas_write_full(link, &r, sizeof r) != 0) break;
  }
  pk_ctx_free(wt.ctx);
  _exit(0); /* _exit: the tuner's stdio buffers, copied at fork, are not ours to flush */
}
