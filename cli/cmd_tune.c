/* cmd_tune.c — `pock tune INPUT --db FILE [...]`: options and output around the tuning
 * loop (autotune/pk_tune.h). INPUT is a TE file (one kernel) or a model (.json/.onnx:
 * every distinct kernel of its training graph, weighted by calls per step). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "pk_driver.h"
#include "pk_remote.h"
#include "pk_tune.h"

/* The one piece of process-wide state: a signal handler can only talk through a flag. */
static volatile sig_atomic_t interrupted;
static void on_sigint(int sig) { (void)sig; interrupted = 1; }

#define MAX_REMOTES 16

typedef struct tune_options {
  const char *input, *db, *target, *cc, *tuner, *sparse;
  const char *layout; /* model input: the layout pass's --layout (NULL: auto, untimed) */
  /* remote tuning: servers, the fleet key, and ARCH=VALUE targets and compilers */
  const char *remotes[MAX_REMOTES], *key, *arch_targets[MAX_REMOTES], *arch_ccs[MAX_REMOTES];
  int nremotes, narch_targets, narch_ccs;
  const char *remote_label; /* "HOST:P" while tuning through one, for the output */
  int64_t trials, total_trials, seed, batch, patience, min_ms, model_batch, confirm;
  double time_budget_s, timeout_s, build_timeout_s;
  bool resume, inference, model, no_transfer;
} tune_options;

static const char tune_help[] =
    "usage: pock tune INPUT --db DB [options]\n"
    "\n"
    "Autotunes kernels on this device into a SQLite tuning database. INPUT is a TE file\n"
    "(one kernel) or a model (MODEL.json or MODEL.onnx): every distinct kernel of its\n"
    "training graph (forward, backward and optimizer, pruned by --sparse), weighted by\n"
    "calls per step.\n"
    "\n"
    "options:\n"
    "  --db DB               the database (created when missing)\n"
    "  --trials N            trials PER TASK (default 64); with --resume, the total per task\n"
    "                        including records already in the database\n"
    "  --total-trials N      a model's budget for ALL tasks together: split by calls x FLOPs\n"
    "                        (pk_budget_split), each batch going to the task expected to gain\n"
    "                        most; replaces --trials\n"
    "  --tuner evo|random|grid   (default evo)\n"
    "  --time-budget S       stop S seconds after the start, loading the model included:\n"
    "                        nothing is built or measured past it (a batch is cut short)\n"
    "  --timeout S           per candidate (default 10)\n"
    "  --build-timeout S     per candidate build: lowering + compiling (default 120)\n"
    "  --tune-batch N        candidates built and measured per batch (default 16)\n"
    "  --batch N             TE input: as --tune-batch; model input: the model's batch size\n"
    "                        (default 32, as `pock compile`)\n"
    "  --sparse SPEC.json    model input: the sparse-update spec (as `pock compile`)\n"
    "  --inference           model input: tune the forward kernels only\n"
    "  --layout nchw|nhwc    model input: the conv chains' layout (as `pock compile`; tune\n"
    "                        both for `compile --db` to choose by the records)\n"
    "  --patience N          stop a task after N batches without a better result\n"
    "  --no-transfer         start from scratch: no learning from, and no first configs of,\n"
    "                        the nearest shapes of the same class tuned on this target\n"
    "  --confirm N           at the end, re-time each task's best N side by side in\n"
    "                        interleaved rounds; db best prefers those (default 3, 0: off)\n"
    "  --min-ms M            time each candidate at least M ms (default 50)\n"
    "  --target T            what to tune for (docs/targets.md; default c, this machine);\n"
    "                        opencl or 'cuda -arch=sm_NN': on this machine's GPU\n"
    "  --cc CC               the C compiler (default $CC, else cc)\n"
    "  --remote HOST:P       measure on the device serving there (pock-rt-serve;\n"
    "                        docs/remote-tuning.md) instead of here; repeatable: the\n"
    "                        servers are tuned at once, each under its own fingerprint\n"
    "  --key FLEET.key       with --remote: the fleet's secret key; every request is signed\n"
    "  --target ARCH=T, --cc ARCH=CC   with --remote: the target and compiler for the\n"
    "                        servers whose INFO says ARCH (e.g. --cc aarch64=aarch64-linux-\n"
    "                        gnu-gcc); without ARCH= for all; the compiler defaults to\n"
    "                        ARCH-linux-gnu-gcc for another arch than this host's\n"
    "  --resume              go on from the records already in the database\n"
    "  --seed N              (default 1)\n";

static bool is_model_path(const char *p) {
  size_t n = strlen(p);
  return (n > 5 && !strcmp(p + n - 5, ".json")) || (n > 5 && !strcmp(p + n - 5, ".onnx"));
}

static int parse_options(int argc, char **argv, tune_options *o) {
  *o = (tune_options){.target = "c", .tuner = "evo", .trials = 64, .seed = 1, .batch = -1, .confirm = 3,
                      .min_ms = 50, .timeout_s = 10, .build_timeout_s = 120, .model_batch = 32};
  int64_t batch = -1, tune_batch = -1;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    bool val = i + 1 < argc;
    int64_t n;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(tune_help, stdout);
      return -1;
    }
    if (!strcmp(a, "--resume")) { o->resume = true; continue; }
    if (!strcmp(a, "--no-transfer")) { o->no_transfer = true; continue; }
    if (!strcmp(a, "--inference")) { o->inference = true; continue; }
    if (a[0] != '-') {
      if (o->input) return pk_cli_usage("tune: one INPUT expected, got '%s' and '%s'", o->input, a);
      o->input = a;
      continue;
    }
    if (!val) return pk_cli_usage("tune: %s needs a value", a);
    const char *v = argv[++i];
    bool per_arch = strcspn(v, "=") < strlen(v) && strcspn(v, "=") > 0 &&
                    strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789_") == strcspn(v, "=");
    if (!strcmp(a, "--db")) o->db = v;
    else if (!strcmp(a, "--key")) o->key = v;
    else if (!strcmp(a, "--remote")) {
      if (o->nremotes == MAX_REMOTES) return pk_cli_usage("tune: at most %d --remote", MAX_REMOTES);
      o->remotes[o->nremotes++] = v;
    } else if ((!strcmp(a, "--target") || !strcmp(a, "--cc")) && per_arch) {
      bool t = !strcmp(a, "--target");
      if ((t ? o->narch_targets : o->narch_ccs) == MAX_REMOTES) return pk_cli_usage("tune: too many %s", a);
      if (t) o->arch_targets[o->narch_targets++] = v;
      else o->arch_ccs[o->narch_ccs++] = v;
    }
    else if (!strcmp(a, "--target")) o->target = v;
    else if (!strcmp(a, "--cc")) o->cc = v;
    else if (!strcmp(a, "--tuner")) o->tuner = v;
    else if (!strcmp(a, "--sparse")) o->sparse = v;
    else if (!strcmp(a, "--layout")) o->layout = v;
    else if (!strcmp(a, "--time-budget") || !strcmp(a, "--timeout") || !strcmp(a, "--build-timeout")) {
      double d;
      if (!pkrt_cli_parse_double(v, &d) || !(d > 0) || d > 1e7) return pk_cli_usage("tune: %s needs a positive number of seconds", a);
      *(!strcmp(a, "--timeout") ? &o->timeout_s
        : !strcmp(a, "--build-timeout") ? &o->build_timeout_s : &o->time_budget_s) = d;
    } else if (!strcmp(a, "--trials") || !strcmp(a, "--seed") || !strcmp(a, "--batch") ||
               !strcmp(a, "--patience") || !strcmp(a, "--min-ms") || !strcmp(a, "--total-trials") ||
               !strcmp(a, "--tune-batch") || !strcmp(a, "--confirm")) {
      if (!pkrt_cli_parse_i64(v, &n) || n < 0 || n > 100000000)
        return pk_cli_usage("tune: %s needs a non-negative integer", a);
      int64_t *slot = !strcmp(a, "--trials") ? &o->trials : !strcmp(a, "--seed") ? &o->seed
                      : !strcmp(a, "--batch") ? &batch : !strcmp(a, "--tune-batch") ? &tune_batch
                      : !strcmp(a, "--total-trials") ? &o->total_trials
                      : !strcmp(a, "--confirm") ? &o->confirm
                      : !strcmp(a, "--patience") ? &o->patience : &o->min_ms;
      *slot = n;
    } else {
      return pk_cli_usage("tune: unknown option '%s'", a);
    }
  }
  if (!o->input) return pk_cli_usage("tune: expected INPUT (a TE file or a model)");
  if (!o->db) return pk_cli_usage("tune: --db FILE is required");
  if (!o->nremotes && (o->key || o->narch_targets || o->narch_ccs))
    return pk_cli_usage("tune: --key, --target ARCH=T and --cc ARCH=CC go with --remote");
  if (o->nremotes && !o->key)
    return pk_cli_usage("tune: --remote needs --key FLEET.key (every request is signed)");
  o->model = is_model_path(o->input);
  if (o->model) {
    if (batch >= 0) o->model_batch = batch;
    if (o->model_batch < 1) return pk_cli_usage("tune: --batch (the model's batch size) must be >= 1");
    o->batch = tune_batch >= 0 ? tune_batch : 16;
  } else {
    if (o->sparse || o->inference || o->total_trials || o->layout)
      return pk_cli_usage("tune: --sparse, --inference, --layout and --total-trials go with a model INPUT");
    o->batch = tune_batch >= 0 ? tune_batch : batch >= 0 ? batch : 16;
  }
  if (o->batch < 1 || o->batch > 256) return pk_cli_usage("tune: --tune-batch must be in 1..256");
  if (o->confirm > PK_CONFIRM_MAX) return pk_cli_usage("tune: --confirm must be in 0..%d", PK_CONFIRM_MAX);
  pk_tuner_kind k;
  if (!pk_tuner_kind_from_name(o->tuner, &k)) return pk_cli_usage("tune: unknown tuner '%s' (random, grid, evo)", o->tuner);
  return PK_EXIT_OK;
}

/* The programs: the TE file's one, or the model's distinct kernels. */
static pk_status load_input(pk_ctx *ctx, const tune_options *o, pk_tune_input *in) {
  memset(in, 0, sizeof *in);
  if (o->model) {
    pk_compile_options co = pk_compile_defaults();
    co.model = o->input;
    co.sparse = o->sparse;
    co.batch = o->model_batch;
    co.target = o->target;
    co.cc = o->cc;
    co.inference = o->inference;
    co.layout = o->layout;
    pk_model_tasks mt;
    pk_status s = pk_model_tasks_of(ctx, &co, &mt);
    if (s != PK_OK) return s;
    *in = (pk_tune_input){.n = mt.n, .progs = mt.progs, .calls = mt.calls, .labels = mt.names};
    return PK_OK;
  }
  char *text;
  size_t len;
  pk_te_program **progs = pk_alloc(ctx, sizeof *progs);
  pk_status s = pk_read_file(ctx, o->input, &text, &len);
  if (s == PK_OK) s = pk_te_parse(ctx, text, len, o->input, &progs[0]);
  if (s != PK_OK) return s;
  *in = (pk_tune_input){.n = 1, .progs = progs};
  return PK_OK;
}

typedef struct tune_output {
  const tune_options *o;
} tune_output;

static void print_plan(void *arg, const pk_tune_report *r) {
  const tune_output *out = arg;
  const pk_tune_task_report *t = r->tasks;
  if (r->ntasks == 1) {
    printf("tuning %s (%s) on %s%s%s: %llu configs in the space, %lld records already\n",
           t->task.name, pk_task_class_name(t->task.cls), r->fp.target,
           out->o->remote_label ? " at " : "", out->o->remote_label ? out->o->remote_label : "",
           (unsigned long long)t->space_size, (long long)r->existing);
    if (t->transfer_records)
      printf("transfer: %d records of %d other %s workload%s on this target (%d of this "
             "program at other sizes) and of this one on %d other target%s; %d of their best "
             "configs tried first\n",
             t->transfer_records, t->transfer_shapes, pk_task_class_name(t->task.cls),
             t->transfer_shapes == 1 ? "" : "s", t->transfer_same, t->transfer_targets,
             t->transfer_targets == 1 ? "" : "s", t->transfer_seeds);
  } else {
    printf("tuning %s on %s%s%s: %d distinct kernels\n", out->o->input, r->fp.target,
           out->o->remote_label ? " at " : "", out->o->remote_label ? out->o->remote_label : "",
           r->ntasks);
    for (int i = 0; i < r->ntasks; i++)
      printf("  task %d %-32s %-9s calls/step %-3g trials %lld  %s\n", i + 1, t[i].label,
             pk_task_class_name(t[i].task.cls), t[i].task.weight, (long long)t[i].cap, t[i].task.name);
  }
  fflush(stdout); /* before the progress lines on stderr */
}

/* The model's predicted step (pk_tune_step_estimate) for the progress line, "" for one TE. */
static const char *step_text(const pk_tune_report *r, char *buf, size_t n) {
  double def_ms, best_ms;
  int covered;
  pk_tune_step_estimate(r, &def_ms, &best_ms, &covered);
  if (r->ntasks < 2 || !covered) return "";
  snprintf(buf, n, " step %.3f -> %.3f ms (%d/%d kernels)", def_ms, best_ms, covered, r->ntasks);
  return buf;
}

static void print_progress(void *arg, const pk_tune_report *r, int i, double elapsed_s, bool final) {
  const tune_output *out = arg;
  const pk_tune_task_report *R = &r->tasks[i];
  double budget = out->o->time_budget_s;
  double eta = R->done > 0 && R->cap > R->done ? elapsed_s / (double)R->done * (double)(R->cap - R->done) : 0;
  if (budget > 0 && eta > budget - elapsed_s) eta = budget > elapsed_s ? budget - elapsed_s : 0;
  char sb[96];
  const char *step = step_text(r, sb, sizeof sb);
  /* one rewritten line on a terminal; whole lines when several servers share it */
  if (isatty(STDERR_FILENO) && out->o->nremotes < 2) {
    fprintf(stderr, "\r[tune] task %d/%d %-28.28s trial %lld/%lld  best %7.2f GFLOP/s  failed %lld %s ETA %4.0fs ",
            i + 1, r->ntasks, R->label, (long long)R->done, (long long)R->cap, R->best_gflops,
            (long long)R->failed, step, eta);
    if (final) fputc('\n', stderr);
  } else if (!final) {
    fprintf(stderr, "[tune%s%s] task %d/%d %s trial %lld/%lld best %.2f GFLOP/s failed %lld%s elapsed %.0fs\n",
            out->o->remote_label ? " " : "", out->o->remote_label ? out->o->remote_label : "",
            i + 1, r->ntasks, R->label, (long long)R->done, (long long)R->cap, R->best_gflops,
            (long long)R->failed, step, elapsed_s);
  }
}

/* ", confirmed G GFLOP/s" when the best record was re-timed beside the task's leaders. */
static const char *confirmed_text(const pk_tune_task_report *R, char *buf, size_t n) {
  const pk_confirmation *c = &R->best.confirmed;
  if (!c->rounds) return "";
  snprintf(buf, n, ", confirmed %.2f GFLOP/s over %d rounds", R->task.flops / c->median_ns, c->rounds);
  return buf;
}

static void summary(const pk_tune_report *r) {
  const char *end = r->interrupted ? "interrupted" : "done";
  for (int i = 0; i < r->ntasks; i++) {
    const pk_tune_task_report *R = &r->tasks[i];
    const pk_record *b = &R->best;
    bool ext = R->has_best && b->cand.kind == PK_CAND_EXTERN;
    char cb[80];
    const char *conf = R->has_best ? confirmed_text(R, cb, sizeof cb) : "";
    if (r->ntasks > 1) {
      if (R->has_best)
        printf("  %s: %lld new records (%lld failed); best %.2f GFLOP/s (%s%s%s)\n", R->label,
               (long long)R->committed, (long long)R->failed, b->meas.gflops,
               ext ? "extern " : "generated", ext ? b->cand.extern_sym : "", conf);
      else
        printf("  %s: %lld new records; none measured successfully\n", R->label, (long long)R->committed);
    } else if (R->has_best) {
      printf("%s: %lld new records (%lld failed); best %.2f GFLOP/s (%s%s%s%s)\n", end,
             (long long)r->committed, (long long)r->failed, b->meas.gflops,
             ext ? "extern " : "generated", ext ? b->cand.extern_sym : "", ext ? "" : " kernel", conf);
    } else {
      printf("%s: no candidate measured successfully\n", end);
    }
  }
  if (r->ntasks > 1) {
    printf("%s: %lld new records (%lld failed) over %d tasks\n", end, (long long)r->committed,
           (long long)r->failed, r->ntasks);
    char sb[96];
    const char *step = step_text(r, sb, sizeof sb);
    if (*step) printf("predicted%s\n", step);
  }
}

/* One tuning run: here, or through remote (o's target and compiler already the device's). */
static int run_tune(const tune_options *o, pk_ctx *ctx, pk_remote *remote, int64_t start_ns) {
  tune_output out = {o};
  pk_tune_options to;
  pk_tune_options_default(&to);
  to.db = o->db;
  to.tuner = o->tuner;
  to.trials = o->trials;
  to.total_trials = o->total_trials;
  to.batch = o->batch;
  to.patience = o->patience;
  to.seed = o->seed;
  to.time_budget_s = o->time_budget_s;
  to.start_ns = start_ns;
  to.confirm_top = (int)o->confirm;
  to.transfer = !o->no_transfer;
  to.resume = o->resume;
  to.allow_untunable = o->model; /* a TE file with nothing to tune is an error */
  to.measure.timeout_s = o->timeout_s;
  to.measure.build_timeout_s = o->build_timeout_s;
  to.measure.min_ns = o->min_ms * 1000000;
  to.measure.cc.cc = o->cc;
  to.measure.remote = remote;
  to.stop = &interrupted;
  to.on_plan = print_plan;
  to.on_progress = print_progress;
  to.arg = &out;
  pk_tune_input in;
  pk_target *t;
  pk_tune_report rep;
  pk_status s = pk_target_parse(ctx, o->target, o->cc, &t);
  if (s == PK_OK) to.target = t, s = load_input(ctx, o, &in);
  if (s == PK_OK) {
    struct sigaction sa = {0};
    sa.sa_handler = on_sigint;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    s = pk_tune(ctx, &to, &in, &rep);
  }
  if (s == PK_OK) summary(&rep);
  return s == PK_OK ? PK_EXIT_OK : pk_cli_fail(ctx, s);
}

/* VALUE of the first "ARCH=VALUE" in vals for arch, else fallback. */
static const char *for_arch(const char *const *vals, int n, const char *arch, const char *fallback) {
  size_t al = strlen(arch);
  for (int i = 0; i < n; i++)
    if (!strncmp(vals[i], arch, al) && vals[i][al] == '=') return vals[i] + al + 1;
  return fallback;
}

/* Tunes through one server: its INFO's arch picks the target and the compiler
 * (docs/remote-tuning.md, "Several devices"). */
static int tune_remote(const tune_options *o, const char *hostport, int64_t start_ns) {
  pk_ctx *ctx = pk_ctx_new();
  pk_remote *r;
  pk_status s = pk_remote_open(ctx, hostport, o->key, &r);
  int rc;
  if (s != PK_OK) {
    rc = pk_cli_fail(ctx, s);
  } else {
    const pk_remote_info *info = pk_remote_info_of(r);
    struct utsname u;
    bool same_arch = uname(&u) == 0 && !strcmp(u.machine, info->arch);
    tune_options ro = *o;
    ro.remote_label = hostport;
    ro.target = for_arch(o->arch_targets, o->narch_targets, info->arch, o->target);
    ro.cc = for_arch(o->arch_ccs, o->narch_ccs, info->arch,
                     o->cc || same_arch ? o->cc : pk_sprintf(ctx, "%s-linux-gnu-gcc", info->arch));
    printf("remote %s: %s device (%s, %d cores): target '%s', compiler %s\n", hostport,
           info->arch, info->cpu, info->cores, ro.target, ro.cc ? ro.cc : "(default)");
    if (info->emulated)
      printf("remote %s: runs under an emulator (qemu-user): its timings mean nothing; "
             "records are marked \"emulated\"\n", hostport);
    fflush(stdout);
    rc = run_tune(&ro, ctx, r, start_ns);
  }
  pk_remote_close(r);
  pk_ctx_free(ctx);
  return rc;
}

/* Several servers at once: one tuning process each (the database takes concurrent
 * writers); the exit status is the worst of theirs. */
static int tune_remotes(const tune_options *o, int64_t start_ns) {
  if (o->nremotes == 1) return tune_remote(o, o->remotes[0], start_ns);
  fflush(NULL);
  pid_t pids[MAX_REMOTES];
  int started = 0, rc = PK_EXIT_OK;
  for (int i = 0; i < o->nremotes; i++) {
    pids[i] = fork();
    if (pids[i] == 0) {
      setvbuf(stdout, NULL, _IOLBF, 0); /* whole lines, interleaved with the others' */
      int crc = tune_remote(o, o->remotes[i], start_ns);
      fflush(NULL);
      _exit(crc);
    }
    if (pids[i] < 0) {
      fprintf(stderr, "pock: error: tune: cannot fork for --remote %s\n", o->remotes[i]);
      rc = PK_EXIT_ERROR;
    } else {
      started++;
    }
  }
  /* Ctrl-C reaches the children too: each stops after its batch; this one waits for them */
  signal(SIGINT, SIG_IGN);
  for (int i = 0; i < o->nremotes; i++) {
    if (pids[i] <= 0) continue;
    int st;
    while (waitpid(pids[i], &st, 0) < 0)
      if (errno != EINTR) break;
    int crc = WIFEXITED(st) ? WEXITSTATUS(st) : PK_EXIT_ERROR;
    if (crc != PK_EXIT_OK)
      fprintf(stderr, "pock: tune: --remote %s ended with exit status %d\n", o->remotes[i], crc);
    if (crc > rc) rc = crc;
  }
  return started ? rc : PK_EXIT_ERROR;
}

int pk_cmd_tune(int argc, char **argv) {
  int64_t start_ns = pkrt_now_ns(); /* the budget counts loading the model too */
  tune_options o;
  int rc = parse_options(argc, argv, &o);
  if (rc < 0) return PK_EXIT_OK; /* --help */
  if (rc != PK_EXIT_OK) return rc;
  if (o.nremotes) return tune_remotes(&o, start_ns);
  pk_ctx *ctx = pk_ctx_new();
  rc = run_tune(&o, ctx, NULL, start_ns);
  pk_ctx_free(ctx);
  return rc;
}
