/* cmd_compile.c — `pock compile MODEL.json|MODEL.onnx [...] -o OUT.pock`: the model, its
 * sparse-update spec and the tuning database into one artifact for the runtime
 * (driver/pk_driver.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "pk_backend.h"
#include "pk_driver.h"
#include "pk_measurer.h"
#include "pk_passes.h"

static const char compile_help[] =
    "usage: pock compile MODEL [options] -o OUT.pock\n"
    "\n"
    "Compiles a model's training step (forward, loss, backward pruned to what the sparse\n"
    "spec trains, optimizer updates) into an artifact for `pock train` / libpockrt.\n"
    "MODEL is a graph JSON (docs/graph-format.md) or an ONNX file (docs/onnx.md).\n"
    "\n"
    "options:\n"
    "  -o OUT.pock           the artifact to write\n"
    "  --sparse SPEC.json    sparse-update spec (docs/sparse-update.md); default: train all\n"
    "  --weights W.pkw       initial weights over the model's own (e.g. pretrained)\n"
    "  --reinit GLOB         params that keep the model's initial values despite --weights\n"
    "  --batch B             batch size, fixed at compile time (default 32)\n"
    "  --db DB               tuning database: each kernel's best schedule for this device\n"
    "  --inference           forward only (no loss, no backward)\n"
    "  --optimizer sgd|adam|adamw, --lr X, --momentum X, --weight-decay X\n"
    "                        override the model file's training object\n"
    "  --loss softmax_cross_entropy|mse\n"
    "                        the loss (default: the model's training object; an ONNX\n"
    "                        model's is in MODEL.training.json beside it)\n"
    "  --classes K           check: the output has K classes (softmax_cross_entropy)\n"
    "  --input-shape NAME=D0,D1,...\n"
    "                        an ONNX input's whole shape, binding its symbolic dims (D0 is\n"
    "                        the batch, as --batch); repeat for several inputs\n"
    "  --warmup-steps N      linear lr warmup over N optimizer steps, then the schedule\n"
    "  --accum-steps K       gradient accumulation: one optimizer step per K steps (mean)\n"
    "  --clip-global X       clip the global L2 norm of all gradients to X (0: off)\n"
    "  --print-memory        print the planned memory (peak beside the naive sum), the\n"
    "                        kernels' workspace and the backward-pass memory\n"
    "  --dump-after STAGE    print the IR after STAGE and stop; stages:\n"
    "                        " PK_DRIVER_STAGES "\n"
    "  --passes LIST         graph passes: all (default), none, or a comma list of\n"
    "                        " PK_PASS_NAMES " (docs/passes.md)\n"
    "  --disable-pass NAME   turn one pass off (repeatable; after --passes)\n"
    "  --layout auto|nchw|nhwc\n"
    "                        conv chains channels last (the layout pass): auto (default)\n"
    "                        where --db's records say the step is faster so; --layout\n"
    "                        auto given also times kernels without a record (host C\n"
    "                        target; seconds); nchw or nhwc: forced (docs/passes.md)\n"
    "  --verbose             a line per pass: nodes and planned arena before and after\n"
    "  --list-passes         print the passes, in the order they run, and exit\n"
    "  --cache-frozen        run the frozen prefix (layers before the first trained one)\n"
    "                        first and let `train --cache-frozen` cache its results per\n"
    "                        sample (docs/runtime.md); refused with the reason where the\n"
    "                        model has none, or it has dropout or training-mode batch norm\n"
    "  --target T            what to build for (docs/targets.md): c, 'c -march=CPU',\n"
    "                        'c -mcpu=CPU' (default c: this machine), opencl,\n"
    "                        'cuda -arch=sm_NN' (kernels run on the GPU)\n"
    "  --no-device-binary    opencl: the OpenCL C source only (default: also the program\n"
    "                        binary of this machine's OpenCL device 0, which a device\n"
    "                        equal in name, version, driver and platform loads unbuilt)\n"
    "  --cc CC               the C compiler (a cross compiler builds for its machine)\n"
    "  --build-timeout S     limit on building the kernels, seconds (default 300)\n"
    "  -j, --jobs N          compilers at once, a kernel each (default: this machine's CPUs)\n"
    "\n"
    "Exit status: 0 success, 1 error (bad model, spec, weights or build), 2 usage.\n";

static int parse_options(int argc, char **argv, pk_compile_options *o,
                         pk_input_shape shapes[PK_CLI_MAX_SHAPES], char *disabled, size_t cap) {
  *o = pk_compile_defaults();
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    bool val = i + 1 < argc;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      fputs(compile_help, stdout);
      return -1;
    }
    if (!strcmp(a, "--list-passes")) {
      for (int p = 0; p < PK_PASS_COUNT_; p++)
        printf("%-10s %s\n", pk_passes_table()[p].name, pk_passes_table()[p].summary);
      return -1;
    }
    if (!strcmp(a, "--inference")) { o->inference = true; continue; }
    if (!strcmp(a, "--print-memory")) { o->print_memory = true; continue; }
    if (!strcmp(a, "--verbose")) { o->verbose = true; continue; }
    if (!strcmp(a, "--cache-frozen")) { o->cache_frozen = true; continue; }
    if (!strcmp(a, "--no-device-binary")) { o->no_device_binary = true; continue; }
    if (a[0] != '-' || !a[1]) {
      if (o->model) return pk_cli_usage("compile: one MODEL expected, got '%s' and '%s'", o->model, a);
      o->model = a;
      continue;
    }
    if (!val) return pk_cli_usage("compile: %s needs a value", a);
    char *v = argv[++i];
    double d;
    if (!strcmp(a, "-o") || !strcmp(a, "--output")) o->out = v;
    else if (!strcmp(a, "--sparse")) o->sparse = v;
    else if (!strcmp(a, "--weights")) o->weights = v;
    else if (!strcmp(a, "--reinit")) o->reinit = v;
    else if (!strcmp(a, "--db")) o->db = v;
    else if (!strcmp(a, "--target")) o->target = v;
    else if (!strcmp(a, "--cc")) o->cc = v;
    else if (!strcmp(a, "--dump-after")) o->dump_after = v;
    else if (!strcmp(a, "--passes")) o->passes = v;
    else if (!strcmp(a, "--layout")) o->layout = v;
    else if (!strcmp(a, "--disable-pass")) {
      size_t used = strlen(disabled);
      if (used + strlen(v) + 2 > cap) return pk_cli_usage("compile: too many --disable-pass options");
      snprintf(disabled + used, cap - used, "%s%s", used ? "," : "", v);
      o->disable_passes = disabled;
    }
    else if (!strcmp(a, "--optimizer")) {
      if (strcmp(v, "sgd") && strcmp(v, "adam") && strcmp(v, "adamw"))
        return pk_cli_usage("compile: unknown optimizer '%s' (sgd, adam, adamw)", v);
      o->optimizer = v;
    } else if (!strcmp(a, "--input-shape")) {
      if (o->ninput_shapes == PK_CLI_MAX_SHAPES)
        return pk_cli_usage("compile: at most %d --input-shape options", PK_CLI_MAX_SHAPES);
      int rc = pk_cli_input_shape("compile", v, &shapes[o->ninput_shapes]);
      if (rc != PK_EXIT_OK) return rc;
      o->input_shapes = shapes;
      o->ninput_shapes++;
    } else if (!strcmp(a, "--loss")) {
      if (strcmp(v, "softmax_cross_entropy") && strcmp(v, "mse"))
        return pk_cli_usage("compile: unknown loss '%s' (softmax_cross_entropy, mse)", v);
      o->loss = v;
    } else if (!strcmp(a, "--classes")) {
      if (!pkrt_cli_parse_i64(v, &o->classes) || o->classes < 1 || o->classes > INT32_MAX)
        return pk_cli_usage("compile: --classes needs an integer in 1..2147483647");
    } else if (!strcmp(a, "--batch")) {
      if (!pkrt_cli_parse_i64(v, &o->batch) || o->batch < 1 || o->batch > 1000000)
        return pk_cli_usage("compile: --batch needs an integer in 1..1000000");
    } else if (!strcmp(a, "-j") || !strcmp(a, "--jobs")) {
      int64_t n;
      if (!pkrt_cli_parse_i64(v, &n) || n < 1 || n > PK_BUILD_JOBS_MAX)
        return pk_cli_usage("compile: %s needs an integer in 1..%d", a, PK_BUILD_JOBS_MAX);
      o->build_jobs = (int)n;
    } else if (!strcmp(a, "--build-timeout")) {
      if (!pkrt_cli_parse_double(v, &d) || !(d > 0) || d > 1e6)
        return pk_cli_usage("compile: --build-timeout needs seconds in (0, 1e6]");
      o->build_timeout_s = d;
    } else if (!strcmp(a, "--lr") || !strcmp(a, "--momentum") || !strcmp(a, "--weight-decay")) {
      if (!pkrt_cli_parse_double(v, &d) || d < 0 || (!strcmp(a, "--lr") && d == 0) ||
          (!strcmp(a, "--momentum") && d >= 1))
        return pk_cli_usage("compile: %s needs a number (lr > 0, 0 <= momentum < 1, weight decay >= 0)", a);
      *(!strcmp(a, "--lr") ? &o->lr : !strcmp(a, "--momentum") ? &o->momentum : &o->weight_decay) = d;
    } else if (!strcmp(a, "--warmup-steps") || !strcmp(a, "--accum-steps")) {
      int64_t n;
      bool acc = !strcmp(a, "--accum-steps");
      if (!pkrt_cli_parse_i64(v, &n) || n < (acc ? 1 : 0) || n > INT32_MAX)
        return pk_cli_usage("compile: %s needs an integer in %d..2147483647", a, acc ? 1 : 0);
      *(acc ? &o->accum_steps : &o->warmup_steps) = n;
    } else if (!strcmp(a, "--clip-global")) {
      if (!pkrt_cli_parse_double(v, &d) || !(d >= 0) || d > 1e30)
        return pk_cli_usage("compile: --clip-global needs a norm >= 0 (0: off)");
      o->clip_global = d;
    } else {
      return pk_cli_usage("compile: unknown option '%s'", a);
    }
  }
  if (!o->model) return pk_cli_usage("compile: expected MODEL (a graph JSON or an ONNX file)");
  if (!o->out && !o->dump_after) return pk_cli_usage("compile: expected -o OUT.pock");
  if (o->reinit && !o->weights) return pk_cli_usage("compile: --reinit goes with --weights");
  if (o->inference && o->sparse) return pk_cli_usage("compile: --sparse has no meaning with --inference");
  return PK_EXIT_OK;
}

int pk_cmd_compile(int argc, char **argv) {
  pk_compile_options o;
  pk_input_shape shapes[PK_CLI_MAX_SHAPES];
  char disabled[256] = "";
  int rc = parse_options(argc, argv, &o, shapes, disabled, sizeof disabled);
  if (rc < 0) return PK_EXIT_OK; /* --help */
  if (rc != PK_EXIT_OK) return rc;
  /* Progress and tables go to stdout, except while a dump owns it. */
  o.log = o.dump_after ? stderr : stdout;
  pk_ctx *ctx = pk_ctx_new();
  pk_status s = PK_OK;
  pk_measurer *m = NULL;
  if (o.layout && !strcmp(o.layout, "auto") && (!o.target || !strcmp(o.target, "c")) && !o.cc) {
    /* --layout auto asked for timings (of this machine's kernels: not for a cross or GPU
     * target): first, before anything could start a thread (pk_measurer.h); one timing
     * per kernel, 10 ms of repeats (as sparse-search's) */
    pk_measure_settings set;
    pk_measure_settings_default(&set);
    set.min_ns = 10000000;
    s = pk_measurer_new(ctx, &set, &m);
    o.measurer = m;
  }
  pk_compile_result res;
  if (s == PK_OK) s = pk_compile(ctx, &o, &res);
  pk_measurer_free(m);
  rc = s == PK_OK ? PK_EXIT_OK : pk_cli_fail(ctx, s);
  pk_ctx_free(ctx);
  return rc;
}
