/* context.c — the runtime context: last error message, and the thread pool behind the
 * parallel_for that kernels receive. One pool per context, no OpenMP (docs/runtime.md). */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "pkrt.h"

#define PKRT_MAX_THREADS 512 /* a typo'd thread count should not fork-bomb the device */

/* Every job field is read and written under `mu`, except inside body(): a worker that
 * wakes late can then never run one job's chunk with another job's body. Jobs have only
 * nthreads chunks, so the lock is taken a handful of times per parallel_for. */
typedef struct pool {
  pthread_mutex_t mu;
  pthread_cond_t wake; /* workers: a new job (gen changed) or stop */
  pthread_cond_t done; /* caller: pending reached 0 */
  uint64_t gen;
  bool stop;
  /* the job in flight */
  pkrt_parallel_body body;
  void *closure;
  int64_t n, chunk_len, nchunks, next_chunk, pending;
  int status; /* first non-zero chunk status */
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

/* Runs chunks of the current job until none are left; called with mu held, returns with
 * mu held. Shared by the workers and the calling thread. */
static void pool_run_chunks(pool *p) {
  while (p->next_chunk < p->nchunks) {
    int64_t c = p->next_chunk++;
    int64_t begin = c * p->chunk_len;
    int64_t end = p->n - begin > p->chunk_len ? begin + p->chunk_len : p->n;
    pkrt_parallel_body body = p->body;
    void *closure = p->closure;
    pthread_mutex_unlock(&p->mu);
    int rc = body(begin, end, closure);
    pthread_mutex_lock(&p->mu);
    if (rc != 0 && p->status == 0) p->status = rc;
    if (--p->pending == 0) pthread_cond_signal(&p->done);
  }
}

static void *pool_worker(void *arg) {
  pool *p = arg;
  uint64_t seen = 0;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->gen == seen) pthread_cond_wait(&p->wake, &p->mu);
    if (p->stop) break;
    seen = p->gen;
    pool_run_chunks(p);
  }
  pthread_mutex_unlock(&p->mu);
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

  int64_t nthreads = p->nworkers + 1;
  pthread_mutex_lock(&p->mu);
  p->body = body;
  p->closure = closure;
  p->n = n;
  p->nchunks = n < nthreads ? n : nthreads;
  /* Ceiling divisions written so that no n up to INT64_MAX overflows. */
  p->chunk_len = n / p->nchunks + (n % p->nchunks != 0);
  p->nchunks = n / p->chunk_len + (n % p->chunk_len != 0); /* no empty trailing chunk */
  p->next_chunk = 0;
  p->pending = p->nchunks;
  p->status = 0;
  p->gen++;
  pthread_cond_broadcast(&p->wake);
  pool_run_chunks(p); /* the caller works too rather than just waiting */
  while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
  int status = p->status;
  pthread_mutex_unlock(&p->mu);

  atomic_flag_clear_explicit(&p->busy, memory_order_release);
  return status;
}

static void pool_free(pool *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = true;
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
