/* context.c — the runtime context: last error message, and the thread pool behind the
 * parallel_for that kernels receive. One pool per context, no OpenMP (docs/runtime.md). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pkrt.h"

#define PKRT_MAX_THREADS 512 /* a typo'd thread count should not fork-bomb the device */

/* How long a worker spins for the next job before it sleeps, and how long the caller spins
 * for the last chunk before it sleeps. A training step calls hundreds of kernels, most a
 * few microseconds apart: a condition variable's wake-up (tens of microseconds, more on a
 * VM) each time would cost more than a small kernel's parallel half saves. 2 ms of spinning
 * after the last job is noise next to a step; longer idle periods sleep. */
#define POOL_SPIN_NS 2000000
/* Chunks per thread: a thread that starts late (woken from sleep, or preempted) leaves its
 * chunks to the others rather than holding up the job. */
#define POOL_CHUNKS_PER_THREAD 4

/* A job is published by the caller and claimed chunk by chunk through `claim`, whose high
 * 32 bits are the job's generation and low 32 bits the next chunk: a worker that wakes
 * late can never claim a chunk of a newer job with the older job's body, because its
 * compare-and-swap names the generation it saw. The job's fields are written before the
 * generation is published and are stable while any of its chunks is unfinished (the next
 * job waits for `pending` to reach 0). Sleeping uses the mutex and condition variables;
 * the fast path takes no lock. */
typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t wake; /* workers: a new job (gen changed) or stop */
  pthread_cond_t done; /* caller: pending reached 0 */
  _Atomic uint64_t gen;
  atomic_bool stop;
  atomic_int sleepers;       /* workers blocked on `wake` */
  atomic_bool caller_asleep; /* the caller blocked on `done` */
  /* the job in flight */
  pkrt_parallel_body body;
  void *closure;
  int64_t n, chunk_len;
  _Atomic int64_t nchunks;
  _Atomic uint64_t claim; /* generation << 32 | next chunk */
  _Atomic int64_t pending;
  atomic_int status; /* first non-zero chunk status */
  /* Set while a job runs: a parallel_for that finds it set (a nested call from a body,
   * or a second thread sharing the context) runs inline instead of deadlocking. */
  atomic_flag busy;
  int nworkers;
  pthread_t workers[];
} pool;

struct pkrt_ctx {
  pkrt_exec_ctx exec; /* exec.pool is `pool`, or NULL for inline parallel_for */
  pool *pool;
  int nthreads;
  char error[512];
};

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

/* Spins until done(arg) or POOL_SPIN_NS pass; whether done(arg) held. After the first
 * 50 us it also yields at each clock check, so that with more threads than cores a spinning
 * thread does not hold a core that a working one is waiting for. */
static bool spin_until(bool (*done)(const pool *, uint64_t), const pool *p, uint64_t arg) {
  int64_t start = 0;
  for (unsigned i = 1;; i++) {
    if (done(p, arg)) return true;
    cpu_relax();
    if (i % 64 == 0) { /* the clock every 64 pauses: a few microseconds */
      int64_t now = pkrt_now_ns();
      if (!start) start = now;
      else if (now - start >= POOL_SPIN_NS) return false;
      else if (now - start >= 50000) sched_yield();
    }
  }
}

static bool new_job_or_stop(const pool *p, uint64_t seen) {
  return atomic_load(&p->gen) != seen || atomic_load(&p->stop);
}

static bool job_finished(const pool *p, uint64_t unused) {
  (void)unused;
  return atomic_load(&p->pending) == 0;
}

/* Runs chunks of job `gen` until none are left. Shared by the workers and the caller. */
static void pool_run_chunks(pool *p, uint64_t gen) {
  uint64_t tag = (gen & 0xffffffffu) << 32;
  for (;;) {
    uint64_t c = atomic_load(&p->claim);
    if ((c & ~(uint64_t)0xffffffffu) != tag) return; /* a newer job: ours is all claimed */
    int64_t idx = (int64_t)(c & 0xffffffffu);
    if (idx >= atomic_load_explicit(&p->nchunks, memory_order_relaxed)) return;
    if (!atomic_compare_exchange_weak(&p->claim, &c, c + 1)) continue;
    /* chunk idx of job gen is ours: the job's fields stay as they are until it is done */
    int64_t begin = idx * p->chunk_len;
    int64_t end = p->n - begin > p->chunk_len ? begin + p->chunk_len : p->n;
    int rc = p->body(begin, end, p->closure);
    if (rc != 0) {
      int zero = 0;
      atomic_compare_exchange_strong(&p->status, &zero, rc);
    }
    if (atomic_fetch_sub(&p->pending, 1) == 1 && atomic_load(&p->caller_asleep)) {
      pthread_mutex_lock(&p->mu); /* the caller is in (or about to enter) its wait */
      pthread_cond_signal(&p->done);
      pthread_mutex_unlock(&p->mu);
    }
  }
}

static void *pool_worker(void *arg) {
  pool *p = arg;
  uint64_t seen = 0;
  for (;;) {
    if (!spin_until(new_job_or_stop, p, seen)) {
      /* sleep: counted in `sleepers` before gen is read again, so a caller that publishes
       * after that read sees the count and broadcasts under the mutex (both seq_cst) */
      pthread_mutex_lock(&p->mu);
      atomic_fetch_add(&p->sleepers, 1);
      while (!new_job_or_stop(p, seen)) pthread_cond_wait(&p->wake, &p->mu);
      atomic_fetch_sub(&p->sleepers, 1);
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->stop)) break;
    seen = atomic_load(&p->gen);
    pool_run_chunks(p, seen);
  }
  return NULL;
}

static int inline_for(int64_t n, pkrt_parallel_body body, void *closure) {
  return n > 0 ? body(0, n, closure) : 0;
}

static int pool_parallel_for(pkrt_exec_ctx *ctx, int64_t n, pkrt_parallel_body body,
                             void *closure) {
  pool *p = ctx ? ctx->pool : NULL;
  if (!body || n <= 0) return 0;
  if (!p || n == 1) return inline_for(n, body, closure);
  if (atomic_flag_test_and_set_explicit(&p->busy, memory_order_acquire))
    return inline_for(n, body, closure);

  /* Publish the job: its fields, then the claim counter, then the generation. */
  int64_t most = (int64_t)(p->nworkers + 1) * POOL_CHUNKS_PER_THREAD;
  int64_t nchunks = n < most ? n : most;
  /* Ceiling divisions written so that no n up to INT64_MAX overflows. */
  p->chunk_len = n / nchunks + (n % nchunks != 0);
  nchunks = n / p->chunk_len + (n % p->chunk_len != 0); /* no empty trailing chunk */
  p->body = body;
  p->closure = closure;
  p->n = n;
  atomic_store(&p->nchunks, nchunks);
  atomic_store(&p->pending, nchunks);
  atomic_store(&p->status, 0);
  uint64_t gen = atomic_load(&p->gen) + 1;
  atomic_store(&p->claim, (gen & 0xffffffffu) << 32);
  atomic_store(&p->gen, gen);
  if (atomic_load(&p->sleepers) > 0) {
    pthread_mutex_lock(&p->mu);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
  }
  pool_run_chunks(p, gen); /* the caller works too rather than just waiting */
  if (!spin_until(job_finished, p, 0)) {
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->caller_asleep, true);
    while (atomic_load(&p->pending) > 0) pthread_cond_wait(&p->done, &p->mu);
    atomic_store(&p->caller_asleep, false);
    pthread_mutex_unlock(&p->mu);
  }
  int status = atomic_load(&p->status);
  atomic_flag_clear_explicit(&p->busy, memory_order_release);
  return status;
}

static void pool_free(pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->stop, true);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nworkers; i++) pthread_join(p->workers[i], NULL);
  pthread_cond_destroy(&p->done);
  pthread_cond_destroy(&p->wake);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

/* Starts nworkers threads. If the system refuses some, the pool runs with those it got:
 * fewer threads is slower, never wrong. */
static pool *pool_new(int nworkers) {
  pool *p = calloc(1, sizeof *p + (size_t)nworkers * sizeof(pthread_t));
  if (!p) return NULL;
  atomic_flag_clear(&p->busy);
  if (pthread_mutex_init(&p->mu, NULL) != 0) {
    free(p);
    return NULL;
  }
  pthread_cond_init(&p->wake, NULL);
  pthread_cond_init(&p->done, NULL);

  /* Workers block all signals so that the host program's handlers (the tuner's timeouts,
   * a CLI's SIGINT) keep running on its own threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  for (int i = 0; i < nworkers; i++) {
    if (pthread_create(&p->workers[p->nworkers], NULL, pool_worker, p) != 0) break;
    p->nworkers++;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return p;
}

pkrt_ctx *pkrt_ctx_new(int nthreads) {
  pkrt_ctx *rt = calloc(1, sizeof *rt);
  if (!rt) return NULL;
  if (nthreads > PKRT_MAX_THREADS) nthreads = PKRT_MAX_THREADS;
  rt->nthreads = 1;
  rt->exec.parallel_for = pool_parallel_for;
  /* nthreads <= 1 starts no thread at all: the tuner's measurement workers fork, and a
   * process with threads is not safe to fork. */
  if (nthreads > 1) {
    rt->pool = pool_new(nthreads - 1);
    if (!rt->pool) {
      free(rt);
      return NULL;
    }
    rt->nthreads = rt->pool->nworkers + 1;
  }
  rt->exec.pool = rt->pool;
  return rt;
}

void pkrt_ctx_free(pkrt_ctx *rt) {
  if (!rt) return;
  pool_free(rt->pool);
  free(rt);
}

const char *pkrt_ctx_error(const pkrt_ctx *rt) { return rt ? rt->error : ""; }

pkrt_status pkrt_ctx_fail(pkrt_ctx *rt, pkrt_status s, const char *fmt, ...) {
  if (!rt) return s; /* callers without a context still get the status */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(rt->error, sizeof rt->error, fmt, ap);
  va_end(ap);
  return s;
}

pkrt_exec_ctx *pkrt_ctx_exec(pkrt_ctx *rt) { return rt ? &rt->exec : NULL; }

int pkrt_ctx_threads(const pkrt_ctx *rt) { return rt ? rt->nthreads : 1; }

int64_t pkrt_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}
