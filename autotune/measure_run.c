/* measure_run.c — one batch: candidates become jobs, every job is built (in parallel),
 * then the worker measures those that built, one at a time, with nothing else compiling;
 * a confirmation: leaders rebuilt (cached) and re-timed together in interleaved rounds. */
#define _GNU_SOURCE
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "measure_impl.h"

static void refuse(pk_ctx *run, meas_job *job, const char *why) {
  job->ready = false;
  job->status = PK_MEAS_ILLEGAL;
  job->error = pk_strdup(run, why);
}

/* An extern candidate needs no build: it is ready once its call's shape is known. C
 * targets call cblas_sgemm on the host, CUDA targets cuBLAS on the device (the call each
 * kind of artifact makes); OpenCL has no library to call. */
static void plan_extern(const pk_measurer *m, pk_ctx *run, const pk_te_program *prog,
                        const pk_candidate *c, meas_job *job) {
  job->is_extern = true;
  bool cuda = m->gpu && m->settings.target->kind == PK_TARGET_CUDA;
  if (m->gpu && !cuda)
    return refuse(run, job, "an extern candidate is not measured on an OpenCL target (there "
                            "is no library to call)");
  if (m->settings.remote)
    return refuse(run, job, "an extern candidate is measured on the device itself only (a "
                            "remote server may lack the library)");
  job->lib = c->extern_lib;
  job->sym = c->extern_sym;
  job->sig = c->extern_sig;
  if (!job->lib || !job->sym || !job->sig)
    return refuse(run, job, "an extern candidate needs a library, a symbol and a signature");
  const char *sym = cuda ? PK_CUBLAS_SYM : PK_SGEMM_SYM;
  if (strcmp(job->sym, sym) != 0)
    return refuse(run, job, pk_sprintf(run, "the measurer can call %s only%s, not %s", sym,
                                       cuda ? " on a CUDA target" : "", job->sym));
  if (cuda && strcmp(job->sig, PK_CUBLAS_SIGNATURE) != 0) /* the runtime's call is fixed */
    return refuse(run, job, pk_sprintf(run, "%s's signature is %s, not %s", sym,
                                       PK_CUBLAS_SIGNATURE, job->sig));
  /* From the program, not the knobs: the program is what the kernel must compute. */
  if (!pk_match_sgemm(prog, &job->sgemm))
    return refuse(run, job, pk_sprintf(run, "%s does not compute this task (it needs a program "
                                       "whose only compute is a 2-D f32 C = A·B)", sym));
  char *mask = pk_alloc(run, (size_t)prog->ntensors + 1);
  for (int i = 0; i < prog->ntensors; i++) mask[i] = i == job->sgemm.c ? '1' : '0';
  job->check_mask = mask;
  job->ready = true;
}

int64_t meas_time_left(const pk_measurer *m) {
  return m->settings.deadline_ns > 0 ? m->settings.deadline_ns - pkrt_now_ns() : INT64_MAX;
}

void meas_cut(pk_ctx *run, meas_job *job) {
  job->ready = false;
  job->cut = true;
  job->status = PK_MEAS_TIMEOUT;
  job->error = pk_strdup(run, "not measured: the run's time budget ran out");
}

/* Sends a request (its kind, rounds and call filled) to the worker and waits for the
 * verdict; false if the worker is gone. The time limit is limit_s, or what is left before
 * the deadline when that is less (*by_budget then says so: a timeout is the budget's, not
 * the candidate's). */
static bool ask_worker(pk_measurer *m, meas_request *rq, const char *const str[5],
                       double limit_s, meas_reply *r, bool *by_budget) {
  double left_s = (double)meas_time_left(m) * 1e-9;
  *by_budget = left_s < limit_s;
  rq->pin = m->settings.pin;
  rq->seed = m->settings.seed;
  rq->min_ns = m->settings.min_ns;
  rq->timeout_s = *by_budget ? left_s : limit_s;
  for (int i = 0; i < 5; i++) rq->len[i] = (uint32_t)strlen(str[i]) + 1;
  if (meas_write_full(m->link, rq, sizeof *rq) != 0) return false;
  for (int i = 0; i < 5; i++)
    if (meas_write_full(m->link, str[i], rq->len[i]) != 0) return false;
  return meas_read_full(m->link, r, sizeof *r) == 1;
}

static bool ask_job(pk_measurer *m, pk_ctx *run, const char *te, const meas_job *job,
                    meas_reply *r, bool *by_budget) {
  if (m->settings.remote)
    return meas_remote_ask(m, run, te, job, m->settings.timeout_s, r, by_budget);
  if (m->gpu) {
    meas_request rq = {.kind = job->is_extern ? MEAS_REQ_GPU_BLAS : MEAS_REQ_GPU,
                       .sgemm = job->sgemm};
    const char *str[5] = {te, job->is_extern ? job->lib : job->so_path,
                          job->is_extern ? job->sym : job->trace ? job->trace : "",
                          job->check_mask,
                          m->settings.target->kind == PK_TARGET_CUDA ? "cuda" : "opencl"};
    return ask_worker(m, &rq, str, m->settings.timeout_s, r, by_budget);
  }
  meas_request rq = {.kind = job->is_extern ? MEAS_REQ_SGEMM : MEAS_REQ_KERNEL, .sgemm = job->sgemm};
  const char *str[5] = {te, job->is_extern ? job->lib : job->so_path,
                        job->is_extern ? job->sym : "k0", job->check_mask,
                        job->is_extern ? job->sig : ""};
  return ask_worker(m, &rq, str, m->settings.timeout_s, r, by_budget);
}

/* The test hook on a timing that came back. */
static void hook_timing(pk_measurer *m, const pk_candidate *c, bool confirming, double *median_ns,
                        double *min_ns) {
  if (m->settings.test_timing)
    m->settings.test_timing(m->settings.test_timing_arg, c, confirming, median_ns, min_ns);
}

/* The worker never dies of a candidate (each runs in its own child): if it is gone, so is
 * the measurer. Reap it now so no zombie waits for pk_measurer_free. */
static void break_measurer(pk_measurer *m) {
  m->broken = true;
  if (m->link >= 0) close(m->link);
  m->link = -1;
  if (m->worker > 0) {
    kill(m->worker, SIGKILL);
    meas_wait(m->worker);
  }
  m->worker = -1;
}

/* What died: the local worker, or the remote server (with the connection's reason). */
static const char *gone(const pk_measurer *m) {
  const char *why = m->settings.remote ? pk_remote_broken(m->settings.remote) : NULL;
  return why ? why : "the measurement worker died";
}

static pk_status measure_jobs(pk_measurer *m, pk_ctx *run, const pk_task *task,
                              const pk_te_program *prog, meas_job *jobs, int n,
                              pk_measurement *out) {
  meas_build_batch(m, run, prog, jobs, n);
  for (int i = 0; i < n; i++) {
    pk_measurement *o = &out[i];
    *o = (pk_measurement){.status = jobs[i].status};
    meas_reply r;
    bool by_budget = false;
    if (jobs[i].ready && meas_time_left(m) <= 0) meas_cut(run, &jobs[i]);
    if (jobs[i].cut) {
      *o = (pk_measurement){.status = PK_MEAS_TIMEOUT, .error = pk_strdup(m->ctx, jobs[i].error)};
      continue; /* not a result: no on_measured */
    }
    if (!jobs[i].ready) {
      o->error = pk_strdup(m->ctx, jobs[i].error);
    } else if (m->broken || !ask_job(m, run, task->canonical, &jobs[i], &r, &by_budget)) {
      if (!m->broken) break_measurer(m);
      for (int j = i; j < n; j++)
        out[j] = (pk_measurement){.status = PK_MEAS_RUNTIME_ERROR,
                                  .error = "not measured: the measurement worker is gone"};
      return pk_ctx_fail(m->ctx, PK_ERR_RUNTIME, "measurer: %s", gone(m));
    } else if (by_budget && r.status == PK_MEAS_TIMEOUT) {
      meas_cut(run, &jobs[i]);
      *o = (pk_measurement){.status = PK_MEAS_TIMEOUT, .error = pk_strdup(m->ctx, jobs[i].error)};
      continue;
    } else {
      o->status = (pk_meas_status)r.status;
      if (r.grid[0] > 0) /* a GPU kernel's launch, for its record */
        o->launch = pk_sprintf(m->ctx, "{\"block\":[%u,%u,%u],\"grid\":[%u,%u,%u]}", r.block[0],
                               r.block[1], r.block[2], r.grid[0], r.grid[1], r.grid[2]);
      if (o->status == PK_MEAS_OK) {
        hook_timing(m, jobs[i].cand, false, &r.timing.median_ns, &r.timing.min_ns);
        o->timing = r.timing;
        o->gflops = r.timing.median_ns > 0 ? task->flops / r.timing.median_ns : 0;
      } else {
        o->error = pk_strdup(m->ctx, r.error);
      }
    }
    if (m->settings.on_measured) m->settings.on_measured(m->settings.on_measured_arg, i, o);
  }
  return PK_OK;
}

/* A candidate's job: an extern planned, a schedule's trace to build. */
static void plan_job(const pk_measurer *m, pk_ctx *run, const pk_te_program *prog,
                     const pk_candidate *c, meas_job *job) {
  if (c->kind == PK_CAND_EXTERN) plan_extern(m, run, prog, c, job);
  else job->trace = c->trace;
  job->cand = c;
}

/* Parses the task's canonical text: the worker parses the same text, so kernel parameters
 * and reference tensors are in the same order on both sides by construction. */
static pk_status parse_task(pk_measurer *m, pk_ctx *run, const pk_task *task, int n,
                            pk_measurement *out, pk_te_program **prog) {
  if (m->broken) {
    for (int i = 0; i < n; i++)
      out[i] = (pk_measurement){.status = PK_MEAS_RUNTIME_ERROR,
                                .error = "not measured: the measurement worker is gone"};
    return pk_ctx_fail(m->ctx, PK_ERR_RUNTIME, "measurer: %s earlier", gone(m));
  }
  pk_status s = pk_te_parse(run, task->canonical, strlen(task->canonical), "task.te", prog);
  if (s == PK_OK) return PK_OK;
  for (int i = 0; i < n; i++)
    out[i] = (pk_measurement){.status = PK_MEAS_COMPILE_ERROR, .error = "the task does not parse"};
  return pk_ctx_fail(m->ctx, s, "measurer: task %s: %s", task->name, pk_ctx_error(run));
}

pk_status pk_measurer_run(pk_measurer *m, const pk_task *task, const pk_candidate *cands, int n,
                          pk_measurement *out) {
  pk_ctx *run = pk_ctx_new(); /* everything of this batch, freed at its end */
  pk_te_program *prog;
  pk_status s = parse_task(m, run, task, n, out, &prog);
  if (s == PK_OK) {
    meas_job *jobs = pk_alloc(run, sizeof(meas_job) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) plan_job(m, run, prog, &cands[i], &jobs[i]);
    s = measure_jobs(m, run, task, prog, jobs, n, out);
  }
  pk_ctx_free(run);
  return s;
}

/* The ROUNDS request's list: one line per job that is ready. */
static const char *rounds_list(pk_ctx *run, const meas_job *jobs, int n) {
  pk_strbuf b;
  pk_strbuf_init(&b);
  pk_strbuf_append(&b, "");
  for (int i = 0; i < n; i++) {
    if (!jobs[i].ready) continue;
    if (jobs[i].is_extern) pk_strbuf_printf(&b, "e\t%s\t%s\n", jobs[i].lib, jobs[i].sym);
    else pk_strbuf_printf(&b, "k\t%s\n", jobs[i].so_path);
  }
  return pk_strbuf_finish(run, &b);
}

/* A remote or GPU confirmation: the device (or a GPU process, which opens the device
 * itself) times one candidate per request, so the rounds are interleaved request by
 * request (each round: every candidate in turn, one timing each). */
static pk_status request_rounds(pk_measurer *m, pk_ctx *run, const pk_task *task,
                               const pk_candidate *cands, meas_job *jobs, int n, int rounds,
                               pk_confirmation *out) {
  double *med = pk_alloc(run, sizeof(double) * (size_t)(n * rounds + 1));
  double *fast = pk_alloc(run, sizeof(double) * (size_t)(n + 1));
  bool *failed = pk_alloc(run, (size_t)n + 1);
  memset(failed, 0, (size_t)n + 1);
  for (int k = 0; k < rounds; k++)
    for (int i = 0; i < n; i++) {
      if (!jobs[i].ready || failed[i]) continue;
      meas_reply r;
      bool by_budget;
      if (meas_time_left(m) <= 0) {
        failed[i] = true;
        continue;
      }
      if (!ask_job(m, run, task->canonical, &jobs[i], &r, &by_budget)) {
        break_measurer(m);
        return pk_ctx_fail(m->ctx, PK_ERR_RUNTIME, "measurer: %s", gone(m));
      }
      if (r.status != PK_MEAS_OK) {
        failed[i] = true;
        continue;
      }
      med[i * rounds + k] = r.timing.median_ns;
      if (k == 0 || r.timing.min_ns < fast[i]) fast[i] = r.timing.min_ns;
    }
  for (int i = 0; i < n; i++) {
    if (!jobs[i].ready || failed[i]) continue;
    double median = pk_measure_median(&med[i * rounds], rounds), min = fast[i];
    hook_timing(m, &cands[i], true, &median, &min);
    out[i] = (pk_confirmation){.median_ns = median, .min_ns = min, .rounds = rounds};
  }
  return PK_OK;
}

pk_status pk_measurer_confirm(pk_measurer *m, const pk_task *task, const pk_candidate *cands,
                              int n, int rounds, pk_confirmation *out) {
  PK_ASSERT(n >= 0 && n <= PK_CONFIRM_MAX && rounds >= 1);
  memset(out, 0, sizeof *out * (size_t)n);
  pk_ctx *run = pk_ctx_new();
  pk_measurement *ignored = pk_alloc(run, sizeof *ignored * (size_t)(n + 1));
  pk_te_program *prog;
  pk_status s = parse_task(m, run, task, n, ignored, &prog);
  meas_job *jobs = pk_alloc(run, sizeof(meas_job) * (size_t)(n > 0 ? n : 1));
  const char *sig = "";
  int ready = 0;
  if (s == PK_OK) {
    for (int i = 0; i < n; i++) {
      plan_job(m, run, prog, &cands[i], &jobs[i]);
      if (jobs[i].is_extern) sig = jobs[i].sig;
    }
    meas_build_batch(m, run, prog, jobs, n);
    for (int i = 0; i < n; i++) ready += jobs[i].ready;
  }
  meas_reply r;
  bool by_budget;
  if (s == PK_OK && ready > 0 && meas_time_left(m) > 0 && !m->broken && (m->settings.remote || m->gpu)) {
    s = request_rounds(m, run, task, cands, jobs, n, rounds, out);
  } else if (s == PK_OK && ready > 0 && meas_time_left(m) > 0 && !m->broken) {
    char *mask = pk_alloc(run, (size_t)prog->ntensors + 1); /* checked when first measured */
    memset(mask, '0', (size_t)prog->ntensors);
    mask[prog->ntensors] = '\0';
    meas_request rq = {.kind = MEAS_REQ_ROUNDS, .rounds = rounds, .sgemm = jobs[0].sgemm};
    for (int i = 0; i < n; i++)
      if (jobs[i].is_extern && jobs[i].ready) rq.sgemm = jobs[i].sgemm;
    const char *str[5] = {task->canonical, rounds_list(run, jobs, n), "k0", mask, sig};
    /* a candidate's limit covered its one timing; each round is such a timing again (a
     * kernel of a second a call takes a few seconds a round) */
    if (!ask_worker(m, &rq, str, m->settings.timeout_s * ready * rounds, &r, &by_budget)) {
      break_measurer(m);
      s = pk_ctx_fail(m->ctx, PK_ERR_RUNTIME, "measurer: %s", gone(m));
    } else if (r.status == PK_MEAS_OK) {
      for (int i = 0, k = 0; i < n; i++) {
        if (!jobs[i].ready) continue;
        double med = r.round_median_ns[k], min = r.round_min_ns[k];
        k++;
        if (!(med > 0)) continue;
        hook_timing(m, &cands[i], true, &med, &min);
        out[i] = (pk_confirmation){.median_ns = med, .min_ns = min, .rounds = rounds};
      }
    }
  }
  pk_ctx_free(run);
  return s;
}

pk_status pk_measurer_run_sources(pk_measurer *m, const pk_task *task,
                                  const char *const *c_sources, int n, pk_measurement *out) {
  pk_ctx *run = pk_ctx_new();
  pk_te_program *prog;
  pk_status s = parse_task(m, run, task, n, out, &prog);
  if (s == PK_OK) {
    meas_job *jobs = pk_alloc(run, sizeof(meas_job) * (size_t)(n > 0 ? n : 1));
    for (int i = 0; i < n; i++) jobs[i].source = c_sources[i];
    s = measure_jobs(m, run, task, prog, jobs, n, out);
  }
  pk_ctx_free(run);
  return s;
}
