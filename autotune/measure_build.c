/* measure_build.c — the build phase: each candidate is replayed, lowered, emitted and
 * compiled in a child process of its own, up to m->jobs at once, so every core compiles
 * and a lowering bug that crashes or hangs fails one candidate, not the tuning run. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "measure_impl.h"

typedef struct builder {
  meas_job *job;
  pid_t pid;
  int fd;           /* read end of the pipe its result comes through */
  pk_strbuf out;    /* what it wrote so far */
  int64_t deadline; /* pkrt_now_ns() after which its process group is killed */
  bool by_budget;   /* that deadline is the measurer's (the run's budget), not the build's */
  bool killed;
} builder;

/* ---- in the builder process ---- */

static pk_meas_status failure_status(pk_status s) {
  return s == PK_ERR_SCHEDULE ? PK_MEAS_ILLEGAL : PK_MEAS_COMPILE_ERROR;
}

/* Replays, lowers, emits and compiles one job, then writes "STATUS\nMASK\nSO\nERROR". */
static noreturn void builder_main(pk_measurer *m, pk_ctx *run, const pk_te_program *prog,
                                  const meas_job *job, int fd) {
  int64_t start = pkrt_now_ns();
  pk_ctx_clear_error(run);
  pk_ctx_clear_error(m->own);
  pk_meas_status st = PK_MEAS_OK;
  const char *error = "", *so = "";
  pk_schedule *sched = NULL;
  char *source = (char *)job->source;
  if (!source && job->trace && pk_sched_from_json(run, prog, job->trace, &sched) != PK_OK) {
    st = PK_MEAS_ILLEGAL; /* a trace that does not replay here is not a config of this task */
    error = pk_ctx_error(run);
  }
  pk_lfunc *f = NULL;
  if (st == PK_MEAS_OK && !source) {
    pk_status s = pk_sched_lower(run, prog, sched, "k0", &f);
    if (s != PK_OK) {
      st = failure_status(s);
      error = pk_ctx_error(run);
    }
  }
  if (st == PK_MEAS_OK) {
    /* The compiler's own limit ends first (the caller's kill below is for lowering that
     * hangs), and it takes the compiler's children with it. */
    double left = m->settings.build_timeout_s - (double)(pkrt_now_ns() - start) * 1e-9 - 0.5;
    if (m->cc) pk_cc_set_timeout(m->cc, left > 0.1 ? left : 0.1); /* GPU: NVRTC in this process */
    pk_build_result built;
    pk_status s = source ? pk_backend_build_source(m->backend, source, &built)
                         : pk_backend_build_funcs(m->backend, &f, 1, &built);
    if (s == PK_OK) {
      so = built.path;
    } else { /* PK_ERR_SCHEDULE: a GPU target's lowering check refused the kernel */
      st = failure_status(s);
      error = pk_ctx_error(m->own); /* the backend reports into the compiler's ctx */
    }
  }
  /* Outputs a schedule inlined are never written, so they are not compared. */
  char *mask = pk_alloc(run, (size_t)prog->ntensors + 1);
  for (int i = 0; i < prog->ntensors; i++)
    mask[i] = prog->tensors[i]->kind == PK_TE_COMPUTE &&
                      (!sched || pk_sched_is_materialized(sched, i)) ? '1' : '0';
  pk_strbuf msg;
  pk_strbuf_init(&msg);
  pk_strbuf_printf(&msg, "%d\n%s\n%s\n%s", (int)st, mask, so, error);
  int rc = meas_write_full(fd, msg.data, msg.len);
  _exit(rc == 0 ? 0 : 1); /* _exit: the caller's stdio buffers must not be flushed twice */
}

/* ---- in the caller ---- */

static void fail_job(pk_ctx *run, meas_job *job, pk_meas_status st, const char *error) {
  job->ready = false;
  job->status = st;
  job->error = pk_strdup(run, error);
}

static bool start_builder(pk_measurer *m, pk_ctx *run, const pk_te_program *prog, meas_job *job,
                          builder *b) {
  int fds[2];
  /* CLOEXEC: the compilers that builders spawn must not hold this pipe open. */
  if (pipe2(fds, O_CLOEXEC) != 0) {
    fail_job(run, job, PK_MEAS_COMPILE_ERROR, pk_sprintf(run, "cannot make a pipe: %s", strerror(errno)));
    return false;
  }
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    meas_close_fds_except(&fds[1], 1);
    /* Its own process group, so that a timeout kills the compiler it runs as well. */
    setpgid(0, 0);
    meas_die_with_parent(parent);
    builder_main(m, run, prog, job, fds[1]);
  }
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    fail_job(run, job, PK_MEAS_COMPILE_ERROR, pk_sprintf(run, "cannot fork a builder: %s", strerror(errno)));
    return false;
  }
  setpgid(pid, pid); /* also here: the kill below must not race the child's own call */
  int64_t own = pkrt_now_ns() + (int64_t)(m->settings.build_timeout_s * 1e9);
  bool by_budget = m->settings.deadline_ns > 0 && m->settings.deadline_ns < own;
  *b = (builder){.job = job, .pid = pid, .fd = fds[0], .by_budget = by_budget,
                 .deadline = by_budget ? m->settings.deadline_ns : own};
  pk_strbuf_init(&b->out);
  pk_strbuf_append(&b->out, "");
  return true;
}

/* Parses the builder's "STATUS\nMASK\nSO\nERROR" into its job. */
static void take_result(pk_measurer *m, pk_ctx *run, builder *b, int wstatus) {
  meas_job *job = b->job;
  if (b->killed && b->by_budget) {
    meas_cut(run, job);
    return;
  }
  if (b->killed) {
    fail_job(run, job, PK_MEAS_COMPILE_ERROR,
             pk_sprintf(run, "the build took longer than %g s and was killed", m->settings.build_timeout_s));
    return;
  }
  if (wstatus != -1 && WIFSIGNALED(wstatus)) {
    fail_job(run, job, PK_MEAS_COMPILE_ERROR,
             pk_sprintf(run, "the builder died on SIG%s (lowering or code generation crashed)",
                        meas_signal_name(WTERMSIG(wstatus))));
    return;
  }
  char *text = b->out.data, *mask = strchr(text, '\n');
  char *so = mask ? strchr(mask + 1, '\n') : NULL;
  char *error = so ? strchr(so + 1, '\n') : NULL;
  if (!error) {
    fail_job(run, job, PK_MEAS_COMPILE_ERROR,
             pk_sprintf(run, "the builder exited (status %d) without a result",
                        wstatus != -1 && WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : -1));
    return;
  }
  *mask++ = *so++ = *error++ = '\0';
  pk_meas_status st = (pk_meas_status)atoi(text);
  if (st != PK_MEAS_OK) {
    fail_job(run, job, st, error);
    return;
  }
  job->ready = true;
  job->so_path = pk_strdup(run, so);
  job->check_mask = pk_strdup(run, mask);
}

static void finish_builder(pk_measurer *m, pk_ctx *run, builder *b) {
  close(b->fd);
  int wstatus = meas_wait(b->pid);
  take_result(m, run, b, wstatus);
  pk_strbuf_free(&b->out);
}

/* Reads what is there; returns true at end of file (the builder is done or dead). */
static bool drain(builder *b) {
  char buf[4096];
  for (;;) {
    ssize_t r = read(b->fd, buf, sizeof buf);
    if (r > 0) {
      pk_strbuf_appendn(&b->out, buf, (size_t)r);
      return false; /* poll says when there is more */
    }
    if (r < 0 && errno == EINTR) continue;
    return true; /* EOF, or an error that leaves nothing more to read */
  }
}

static int poll_timeout_ms(const builder *running, int nrun) {
  int64_t now = pkrt_now_ns(), soonest = INT64_MAX;
  for (int i = 0; i < nrun; i++)
    if (!running[i].killed && running[i].deadline < soonest) soonest = running[i].deadline;
  if (soonest == INT64_MAX) return -1;
  int64_t ms = (soonest - now) / 1000000 + 1;
  return ms < 0 ? 0 : ms > 60000 ? 60000 : (int)ms;
}

void meas_build_batch(pk_measurer *m, pk_ctx *run, const pk_te_program *prog, meas_job *jobs,
                      int n) {
  builder *running = pk_alloc(run, sizeof(builder) * (size_t)m->jobs);
  struct pollfd *pfds = pk_alloc(run, sizeof(struct pollfd) * (size_t)m->jobs);
  int next = 0, nrun = 0;
  for (;;) {
    for (; nrun < m->jobs && next < n; next++) {
      meas_job *job = &jobs[next];
      if (job->ready || job->status != PK_MEAS_OK) continue;
      if (meas_time_left(m) <= 0) meas_cut(run, job);
      else if (start_builder(m, run, prog, job, &running[nrun])) nrun++;
    }
    if (nrun == 0) break;
    for (int i = 0; i < nrun; i++) pfds[i] = (struct pollfd){.fd = running[i].fd, .events = POLLIN};
    if (poll(pfds, (nfds_t)nrun, poll_timeout_ms(running, nrun)) < 0 && errno != EINTR) {
      /* Cannot happen with valid descriptors; finish by blocking reads rather than spin. */
      for (int i = 0; i < nrun; i++) pfds[i].revents = POLLIN;
    }
    int64_t now = pkrt_now_ns();
    for (int i = nrun - 1; i >= 0; i--) {
      builder *b = &running[i];
      if (!b->killed && now >= b->deadline) {
        kill(-b->pid, SIGKILL); /* the group: the builder and the compiler it runs */
        b->killed = true;
      }
      if (!pfds[i].revents || !drain(b)) continue;
      finish_builder(m, run, b);
      running[i] = running[--nrun];
      pfds[i] = pfds[nrun];
    }
  }
}
