#!/usr/bin/env python3
"""bench_train.py — issue 23's training benchmark: per model x scheme x batch x threads, the
ms/step of Pock (untuned, and tuned with a stated budget), PyTorch eager and ONNX Runtime
training, in interleaved rounds, with min/median/max of each ratio over the rounds, peak RSS
of every process, Pock's planned arena and BP memory, the step's FLOPs against the cores'
measured fp32 peak, and (optionally) test accuracy after the same number of epochs. One
invocation prints every row in one table. Never fails on timing.

  build-venv-onnx/bin/python bench/bench_train.py [--build build] [--size device]
      [--models cnn,mlp,mobilenet_v2,mobilenet_v2_w1,resnet18,llama,minilm]
      [--schemes head,norms_biases_head,last2,pockengine,full] [--batches auto|8,32]
      [--threads 1,2] [--rounds 3] [--warmup 2] [--steps 10] [--tune SECONDS]
      [--tune-trials N] [--acc-epochs E] [--tools pock,tuned,torch,ort] [--work DIR]
      [--python PY] [--estimate-only]

  quick smoke run:  bench/bench_train.py --size tiny --models cnn,llama --schemes head,full \\
                        --rounds 1 --steps 2 --warmup 1 --threads 1

Models (bench/bench_models.py): the digits demo's cnn and mlp (real data; their schemes
map onto the demo's specs, and the demo names bias_head, partial25, partial25_localbias
also work for them), examples/models' mobilenet_v2, mobilenet_v2_w1, resnet18 and llama
(also bert) at --size (device: the issue's sizes; tiny: a quick smoke run), exported by
scripts/model_export.py, and the pretrained MiniLM (scripts/minilm_export.py at seq 128,
scripts/minilm_data.py's review task; skipped at --size tiny). Specs: examples/NAME/specs/
SCHEME.json when present, else the same rule built in (the table says which). Batches
(auto): 8 and 32 for the conv nets, 8 for the transformers.

Timing data: random images / token ids (the real task for the digits and MiniLM). Each
round runs every row's workers once, in an order rotated per round: Pock
(bench_train_step: W untimed steps, then K timed), Pock tuned (--tune S and/or
--tune-trials N: `pock tune MODEL --batch B --sparse SPEC --time-budget S --total-trials N
--db WORK/tune.db` once per model x scheme x batch before the rounds, then `pock compile
--db`; the note says how long each tuning took: the budget holds, loading included),
PyTorch (bench/torch_train_worker.py: the spec resolved by scripts/sparse_spec.py, checked
against `pock inspect` on every row: a difference is in the note) and ONNX Runtime
(bench/ort_train_worker.py, the same trainable set; "n/a" where the spec trains a slice
of a weight's input channels, which ORT cannot express). Every model trains with AdamW
(bench_models.optimizer), the optimizer all three tools offer (ORT 1.19's SGD has no momentum).
A worker reports the median of its K steps; the table shows
the median over rounds of those, and min/median/max over rounds of each round's ratio.
--acc-epochs E trains every scheme E epochs on each model's real task at the first batch
and the most threads (file order, same initial weights and optimizer; MiniLM with the lr
of bench_models.ACC_LR) and reports test accuracy; "no data" where the task's data script
(scripts/image_data.py, scripts/llama_data.py) is missing.

Work files (exports, data, artifacts, tuning database) stay in --work (default
BUILD/bench_train) and are reused by the next run. Progress goes to stderr; the estimate
of the run's duration, the machine, `torch.__config__.show()` and the table to stdout.
"""
import os

# One thread in this process (the workers set their own), before torch or numpy load.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))

TOOLS = ("pock", "tuned", "torch", "ort")
TOOL_NAME = {"pock": "Pock", "tuned": "Pock tuned", "torch": "PyTorch", "ort": "ORT"}
ORT_PARTIAL = "ORT trains whole initializers only (no slice of a weight's input channels)"


def log(msg):
    print("bench_train: " + msg, file=sys.stderr, flush=True)


def run_json(cmd, what, timeout=3600, env=None):
    """Runs cmd, returns its last stdout line as JSON, or {"error": ...}."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": "%s: %s" % (what, e)}
    try:
        out = json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        out = None
    if p.returncode != 0 or not isinstance(out, dict):
        if isinstance(out, dict) and "error" in out:  # a worker's own JSON error ("n/a: ...")
            return out
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return {"error": "%s: %s" % (what, msg[-1] if msg else "exit %d" % p.returncode)}
    return out


def default_python():
    """The reference venv (onnx, onnxruntime-training, torch through system packages)."""
    for p in (os.path.join(ROOT, "build-venv-onnx", "bin", "python"),
              os.environ.get("POCK_ONNX_PYTHON", "")):
        if p and os.access(p, os.X_OK):
            return p
    return sys.executable


def find_or_build_helper(build, work):
    """bench_train_step: the CMake target when built, else built here against libpockrt."""
    exe = os.path.join(build, "bench", "bench_train_step")
    if os.access(exe, os.X_OK):
        return exe
    exe = os.path.join(work, "bench_train_step")
    lib = os.path.join(os.path.abspath(build), "runtime")
    p = subprocess.run(["cc", "-O2", "-std=gnu11", os.path.join(HERE, "bench_train_step.c"),
                        "-I" + os.path.join(ROOT, "include"), "-L" + lib, "-lpockrt",
                        "-Wl,-rpath," + lib, "-lm", "-o", exe], capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("bench_train: cannot build bench_train_step: %s" % p.stderr.strip())
    return exe


def machine(work):
    """(CPU model, gcc's -march=native, cores, one core's measured fp32 GFLOP/s)."""
    model = platform.processor() or "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    march = "?"
    p = subprocess.run(["cc", "-march=native", "-Q", "--help=target"], capture_output=True,
                       text=True)
    m = re.search(r"^\s*-march=\s*(\S+)", p.stdout, re.M)
    if m:
        march = m.group(1)
    exe = os.path.join(work, "fma_peak")
    p = subprocess.run(["cc", "-O2", "-march=native", "-ffp-contract=fast",
                        os.path.join(HERE, "fma_peak.c"), "-o", exe], capture_output=True, text=True)
    peak = run_json([exe], "fma_peak").get("gflops") if p.returncode == 0 else None
    return model, march, os.cpu_count(), peak


def parse_memory(text):
    """Planned arena bytes and BP bytes from `pock compile --print-memory`."""
    arena = re.search(r"^arena\s+(\d+)\s+\d+", text, re.M)
    bp = re.search(r"^\s+bp_total\s+(\d+)", text, re.M)
    return (int(arena.group(1)) if arena else None, int(bp.group(1)) if bp else None)


def compile_pock(pock, src, spec, batch, out, db=None, extra=()):
    """pock compile with --print-memory (and extra options): {"arena", "bp", "kernels",
    "seconds"} or {"error"}."""
    t0 = time.time()
    cmd = [pock, "compile", src, "--batch", str(batch), "--sparse", spec, "--print-memory",
           "-o", out] + (["--db", db] if db else []) + list(extra)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        msg = (p.stderr.strip() or "exit %d" % p.returncode).splitlines()[-1]
        return {"error": "pock compile: " + msg}
    arena, bp = parse_memory(p.stdout + p.stderr)
    k = re.search(r": (\d+) kernels", p.stdout + p.stderr)
    return {"arena": arena, "bp": bp, "kernels": int(k.group(1)) if k else None,
            "seconds": time.time() - t0}


def pock_resolution(pock, src, spec, batch):
    """{param: None (whole) or S} of what Pock trains under spec (`pock inspect`), or an
    error string: the check that scripts/sparse_spec.py resolved the spec as Pock does."""
    p = subprocess.run([pock, "inspect", src, "--batch", str(batch), "--sparse", spec],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return "pock inspect: " + ((p.stderr.strip() or "failed").splitlines() or ["failed"])[-1]
    out = {}
    for m in re.finditer(r"^  (\S+)\s+\([\d, ]*\)\s+\d+\s+trains(?: channels 0\.\.(\d+) of \d+)?$",
                         p.stdout, re.M):
        out[m.group(1)] = int(m.group(2)) + 1 if m.group(2) else None
    return out


def resolution_diff(ours, pocks):
    """'' when the two resolutions agree, else what differs (a few names)."""
    if isinstance(pocks, str):
        return pocks
    diff = sorted(set(ours.items()) ^ set(pocks.items()))
    names = list(dict.fromkeys(n for n, _ in diff))
    return "" if not names else "PyTorch/ORT resolve the spec differently from Pock: %s%s" % (
        ", ".join(names[:3]), " and %d more" % (len(names) - 3) if len(names) > 3 else "")


def est_compile_s(name, size):
    """Rough compile time of one artifact (first time; the kernel cache helps later)."""
    if size == "tiny" or name in ("cnn", "mlp"):
        return 3
    return 60 if name in ("mobilenet_v2", "mobilenet_v2_w1", "resnet18") else 8


def est_worker_s(tool, flops, threads, peak, steps, name):
    """Rough wall time of one worker run: start-up + steps at a fraction of peak."""
    start = {"pock": 0.5, "tuned": 0.5, "torch": 3.0, "ort": 6.0}[tool]
    if name == "minilm":
        start *= 3
    eff = 0.2 * (peak or 50) * 1e9 * threads
    return start + steps * (flops / eff + (0.0005 if tool in ("pock", "tuned") else 0.003))


def fmt(v, f="%.3f"):
    return "-" if v is None else f % v


def ratio_stats(num, den):
    """min/median/max over rounds of num[r] / den[r] (rounds where both ran)."""
    rs = [a / b for a, b in zip(num, den) if a and b]
    return (min(rs), statistics.median(rs), max(rs)) if rs else None


def fmt_ratio(st):
    return "-" if not st else "%.2f/%.2f/%.2f" % st


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--size", default="device", choices=("tiny", "standard", "device"))
    ap.add_argument("--models", default="cnn,mlp,mobilenet_v2,mobilenet_v2_w1,resnet18,llama,minilm")
    ap.add_argument("--schemes", default="head,norms_biases_head,last2,pockengine,full")
    ap.add_argument("--batches", default="auto", help="auto: 8,32 for conv nets, 8 for transformers")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=10, help="timed steps per worker run")
    ap.add_argument("--target", help="pock compile/tune --target (bench/gpu.sh: 'cuda -arch=sm_90')")
    ap.add_argument("--torch-device", default="cpu", help="PyTorch's device (cuda: CUDA eager)")
    ap.add_argument("--tune", type=float, metavar="SECONDS",
                    help="pock tune --time-budget per model x scheme x batch (turns tuning on)")
    ap.add_argument("--tune-trials", type=int, metavar="N",
                    help="pock tune --total-trials per model x scheme x batch (turns tuning on)")
    ap.add_argument("--acc-epochs", type=int, metavar="E", help="train E epochs for accuracy")
    ap.add_argument("--tools", default=",".join(TOOLS), help="a subset of " + ",".join(TOOLS))
    ap.add_argument("--work", help="work files, reused across runs (default BUILD/bench_train)")
    ap.add_argument("--python", default=default_python(),
                    help="Python with torch, onnx, onnxruntime-training (default the reference venv)")
    ap.add_argument("--estimate-only", action="store_true", help="print the plan and stop")
    ap.add_argument("--export-digits", nargs=2, metavar=("MODEL", "OUT"), help=argparse.SUPPRESS)
    a = ap.parse_args()
    import bench_models as bm
    if a.export_digits:
        bm.export_digits(*a.export_digits)
        return 0

    def ints(s, what):
        try:
            v = [int(x) for x in s.split(",")]
        except ValueError:
            v = []
        if not v or min(v) < 1:
            raise SystemExit("bench_train: %s: a comma-separated list of integers >= 1, got %r"
                             % (what, s))
        return v
    threads = ints(a.threads, "--threads")
    batches = None if a.batches == "auto" else ints(a.batches, "--batches")
    models = a.models.split(",")
    bad = [m for m in models if m not in bm.ALL + ("bert",)]
    if bad:
        raise SystemExit("bench_train: unknown model %s: one of %s" % (bad[0], ", ".join(bm.ALL)))
    schemes = a.schemes.split(",")
    bad = [s for s in schemes if s not in bm.SCHEMES and s not in bm.DIGITS_SPEC]
    if bad:
        raise SystemExit("bench_train: unknown scheme %s: one of %s (digits also %s)" % (
            bad[0], ", ".join(bm.SCHEMES), ", ".join(sorted(set(bm.DIGITS_SPEC) - set(bm.SCHEMES)))))
    tools = [t for t in a.tools.split(",") if t]
    if set(tools) - set(TOOLS):
        raise SystemExit("bench_train: --tools: a subset of %s" % ",".join(TOOLS))
    if "tuned" in tools and not (a.tune or a.tune_trials):
        tools.remove("tuned")
    if a.rounds < 1 or a.steps < 1 or a.warmup < 0:
        raise SystemExit("bench_train: --rounds and --steps >= 1, --warmup >= 0")
    if a.size == "tiny" and "minilm" in models:
        models.remove("minilm")
        log("minilm skipped: it has no tiny size (the pretrained model is 90 MB)")
    pock = os.path.join(a.build, "cli", "pock")
    if not os.access(pock, os.X_OK):
        raise SystemExit("bench_train: %s not found (build first: scripts/build.sh)" % pock)
    work = os.path.abspath(a.work or os.path.join(a.build, "bench_train"))
    os.makedirs(work, exist_ok=True)
    helper = find_or_build_helper(a.build, work)
    ort_worker = os.path.join(HERE, "ort_train_worker.py")

    import torch
    import sparse_spec
    import step_flops
    t_phase = time.time()
    cpu, march, cores, peak = machine(work)
    log("fp32 peak measured in %.1f s" % (time.time() - t_phase))

    # ---- the plan: models, specs, FLOPs ----
    log("preparing models in %s" % work)
    plan, rows, skipped = [], [], []
    for name in models:
        try:
            m = bm.torch_model(name, a.size)
        except Exception as e:  # noqa: BLE001 (a missing package, a bad checkpoint: say so)
            log("%s skipped: %s" % (name, e))
            skipped.append("%s (%s)" % (name, e))
            continue
        opt = bm.optimizer(name, m)
        bs = batches or list(bm.default_batches(name))
        try:
            files = bm.prepare(name, a.size, m, work, a.python, rows=max(bs) * 3)
        except (RuntimeError, OSError) as e:
            log("%s: %s" % (name, e))
            files = {"error": str(e)}
        log("  %s ready (%.1f s)" % (name, time.time() - t_phase))
        for scheme in bm.schemes_of(name, schemes):
            spec, origin = bm.spec_file(name, scheme, m, work)
            try:
                res = sparse_spec.resolve(sparse_spec.load(spec), m,
                                          bm.example_inputs(name, m, 2))
                err = None
            except sparse_spec.SpecError as e:
                res, err = None, str(e)
            for b in bs:
                flops = None
                if res is not None:
                    f, bw = step_flops.step_flops(m, bm.example_inputs(name, m, b), res)
                    flops = f + bw
                item = {"model": name, "scheme": scheme, "batch": b, "spec": spec,
                        "origin": origin, "files": files, "opt": opt, "resolved": res,
                        "spec_error": err, "flops": flops}
                plan.append(item)
                for t in threads:
                    rows.append({"item": item, "threads": t, "ms": {k: [] for k in tools},
                                 "rss": {}, "err": {}})

    # ---- the estimate ----
    n_compile = len(plan) * (2 if "tuned" in tools else 1)
    compile_s = sum(est_compile_s(p["model"], a.size) for p in plan)
    tune_s = len(plan) * (a.tune or 0.2 * (a.tune_trials or 0)) if "tuned" in tools else 0
    round_s = sum(est_worker_s(t, r["item"]["flops"] or 0, r["threads"], peak,
                               a.warmup + a.steps, r["item"]["model"])
                  for r in rows for t in tools)
    acc_s = 0
    if a.acc_epochs:
        acc_s = sum(est_worker_s(t, p["flops"] or 0, max(threads), peak, 30 * a.acc_epochs,
                                 p["model"]) for p in plan for t in tools
                    if p["batch"] == (batches or bm.default_batches(p["model"]))[0])
    total = compile_s * (2 if "tuned" in tools else 1) + tune_s + a.rounds * round_s + acc_s
    print("bench_train: %d rows (%d models), tools %s, %d round(s) of %d+%d steps" % (
        len(rows), len(models), ",".join(tools), a.rounds, a.warmup, a.steps))
    print("estimate (rough: assumes 20%% of peak): %.0f min = compile %.0f s x %d artifacts"
          " + tuning %.0f s + %d rounds x %.0f s + accuracy %.0f s" % (
              total / 60, compile_s / max(1, len(plan)), n_compile, tune_s, a.rounds, round_s,
              acc_s), flush=True)
    if a.estimate_only:
        return 0

    # ---- compile (and tune) ----
    db = os.path.join(work, "tune.db")
    tune_args = (["--time-budget", repr(a.tune)] if a.tune else []) + \
        (["--total-trials", str(a.tune_trials)] if a.tune_trials else [])
    target = ["--target", a.target] if a.target else []
    tune_args += target
    budget = " ".join(tune_args)
    for i, p in enumerate(plan):
        log("[compile %d/%d] %s %s batch %d" % (i + 1, len(plan), p["model"], p["scheme"], p["batch"]))
        t_phase = time.time()
        if "error" in p["files"]:
            p["pock"] = {"error": p["files"]["error"]}
            continue
        base = os.path.join(work, "artifacts", "%s_%s_%s_b%d" % (p["model"], a.size, p["scheme"], p["batch"]))
        os.makedirs(os.path.dirname(base), exist_ok=True)
        p["pock"] = compile_pock(pock, p["files"]["pock"], p["spec"], p["batch"], base + ".pock",
                                 extra=target)
        p["art"] = base + ".pock"
        if p["resolved"] is not None:
            p["mismatch"] = resolution_diff(p["resolved"], pock_resolution(
                pock, p["files"]["pock"], p["spec"], p["batch"]))
        log("  compiled in %.1f s%s" % (time.time() - t_phase, "; " + p["pock"]["error"]
                                         if "error" in p["pock"] else ""))
        if "tuned" in tools and "error" not in p["pock"]:
            t0 = time.time()
            tr = subprocess.run([pock, "tune", p["files"]["pock"], "--db", db, "--batch",
                                 str(p["batch"]), "--sparse", p["spec"]] + tune_args,
                                capture_output=True, text=True)
            if tr.returncode != 0:
                p["tuned"] = {"error": "pock tune: " + (tr.stderr.strip() or "failed").splitlines()[-1]}
            else:
                p["art_tuned"] = base + "_tuned.pock"
                p["tuned"] = compile_pock(pock, p["files"]["pock"], p["spec"], p["batch"],
                                          p["art_tuned"], db, extra=target)
                p["tuned"]["tune_s"] = time.time() - t0
            log("  tuned and compiled in %.1f s%s" % (time.time() - t0, "; " + p["tuned"]["error"]
                                                       if "error" in p["tuned"] else ""))
        if p["files"].get("onnx") and p["resolved"] is not None:
            names = os.path.join(work, "artifacts", "%s_%s.trainable.txt" % (p["model"], p["scheme"]))
            with open(names, "w") as f:
                f.write("".join(n + "\n" for n, s in p["resolved"].items() if s is None))
            p["trainable"] = names

    # ---- interleaved rounds ----
    def worker(tool, p, t, steps_args, data, test=None, lr=None):
        """One worker run: its JSON result or {"error"}."""
        files, opt = p["files"], p["opt"]
        if "error" in files:
            return {"error": files["error"]}
        if tool in ("pock", "tuned"):
            c = p.get(tool)
            if not c or "error" in c:
                return {"error": (c or {}).get("error", "not compiled")}
            art = p["art"] if tool == "pock" else p["art_tuned"]
            cmd = [helper, art, "--data", data, "--threads", str(t)] + steps_args
            cmd += (["--test", test] if test else []) + (["--lr", repr(lr)] if lr else [])
            return run_json(cmd, "bench_train_step")
        if p["spec_error"]:
            return {"error": "sparse_spec: " + p["spec_error"]}
        oargs = ["--optimizer", opt["kind"], "--lr", repr(lr or opt["lr"]),
                 "--weight-decay", repr(opt.get("weight_decay", 0.0))]
        if opt["kind"] == "sgd":
            oargs += ["--momentum", repr(opt.get("momentum", 0.0))]
        common = oargs + ["--data", data, "--batch", str(p["batch"]), "--threads", str(t)]
        if tool == "ort" and "--epochs" in steps_args:  # its --warmup/--steps are required
            steps_args = ["--warmup", str(a.warmup), "--steps", str(a.steps)] + steps_args
        common += steps_args + (["--test", test] if test else [])
        env = dict(os.environ, OMP_NUM_THREADS=str(t), OPENBLAS_NUM_THREADS=str(t),
                   MKL_NUM_THREADS=str(t))
        if tool == "torch":
            return run_json([a.python, os.path.join(HERE, "torch_train_worker.py"), "--model",
                             p["model"], "--size", a.size, "--spec", p["spec"],
                             "--device", a.torch_device] + common,
                            "torch", env=env)
        if any(s is not None for s in p["resolved"].values()):
            return {"error": "n/a: " + ORT_PARTIAL}
        if not files.get("onnx"):
            return {"error": "n/a: no ONNX file of this model"}
        if not os.path.exists(ort_worker):
            return {"error": "n/a: bench/ort_train_worker.py not merged yet"}
        try:
            bm.ensure_onnx(p["model"], files["onnx"], a.python)
        except RuntimeError as e:
            return {"error": str(e)}
        wd = os.path.join(work, "ort", "%s_%s_%s_b%d" % (p["model"], a.size, p["scheme"], p["batch"]))
        return run_json([a.python, ort_worker, "--onnx", files["onnx"], "--trainable",
                         p["trainable"], "--loss", "ce"] + common + ["--workdir", wd],
                        "ort_train_worker", env=env)

    steps_args = ["--warmup", str(a.warmup), "--steps", str(a.steps)]
    n, total_runs = 0, a.rounds * len(rows) * len(tools)
    t_start = time.time()
    for rnd in range(a.rounds):
        for ri, r in enumerate(rows):
            p = r["item"]
            k = (rnd + ri) % len(tools)
            for tool in tools[k:] + tools[:k]:
                n += 1
                res = worker(tool, p, r["threads"], steps_args, p["files"].get("train", ""))
                if "error" in res:
                    r["err"][tool] = res["error"]
                    r["ms"][tool].append(None)
                else:
                    r["ms"][tool].append(res["ms_median"])
                    r["rss"][tool] = max(r["rss"].get(tool, 0), res.get("peak_rss_kb") or 0)
                log("[%d/%d, %.0f s] round %d %s %s b%d t%d %s: %s" % (
                    n, total_runs, time.time() - t_start, rnd + 1, p["model"], p["scheme"],
                    p["batch"], r["threads"], tool,
                    res.get("error") or "%.3f ms" % res["ms_median"]))

    # ---- accuracy ----
    acc = {}
    if a.acc_epochs:
        for p in plan:
            if p["batch"] != (batches or bm.default_batches(p["model"]))[0]:
                continue
            key = (p["model"], p["scheme"])
            if not p["files"].get("acc_test"):
                acc[key] = {t: {"error": "no data"} for t in tools}
                continue
            lr = bm.ACC_LR.get(p["model"], {}).get(p["scheme"])
            acc[key] = {}
            for tool in tools:
                res = worker(tool, p, max(threads), ["--epochs", str(a.acc_epochs)],
                             p["files"]["acc_train"], p["files"]["acc_test"], lr)
                acc[key][tool] = res
                log("[accuracy] %s %s %s: %s" % (p["model"], p["scheme"], tool,
                                                 res.get("error") or "acc %s" % res.get("acc")))

    # ---- the table ----
    # the workers' torch and onnxruntime (this process's when it is that Python: no
    # second torch import; the ORT version from the package metadata, without importing it)
    same = os.path.realpath(a.python) == os.path.realpath(sys.executable)
    torch_cfg = torch.__config__.show().strip() if same else subprocess.run(
        [a.python, "-c", "import torch; print(torch.__config__.show())"],
        capture_output=True, text=True).stdout.strip()
    ort_ver = subprocess.run(
        [a.python, "-c", "import importlib.metadata as m\nfor n in ('onnxruntime-training-cpu', "
         "'onnxruntime-training', 'onnxruntime'):\n  try:\n    print(n, m.version(n)); break\n"
         "  except m.PackageNotFoundError: pass"],
        capture_output=True, text=True).stdout.strip() or "not installed"
    print()
    print("date: %s UTC" % datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"))
    print("machine: %s (gcc -march=native: %s), %d cores; fp32 peak of one core %s GFLOP/s "
          "(bench/fma_peak.c)" % (cpu, march, cores, fmt(peak, "%.1f")))
    print("command: %s" % " ".join(sys.argv))
    print("size %s; %d round(s), each worker %d untimed + %d timed steps; Pock %s; PyTorch %s "
          "eager; ONNX Runtime: %s" % (a.size, a.rounds, a.warmup, a.steps,
                                      "untuned" + (" and tuned (pock tune %s per model x scheme"
                                                   " x batch, database %s)" % (budget, db)
                                                   if "tuned" in tools else ""),
                                      torch.__version__, ort_ver))
    hdr = ["model", "scheme", "batch", "thr"] + ["%s ms" % TOOL_NAME[t] for t in tools]
    hdr += ["%s/Pock" % TOOL_NAME[k] for k in ("torch", "ort") if k in tools]
    hdr += ["PyTorch/tuned"] if "tuned" in tools and "torch" in tools else []
    hdr += ["RSS MB " + "/".join(TOOL_NAME[t] for t in tools), "arena MB", "BP MB", "GFLOP",
            "floor ms", "% peak"]
    if a.acc_epochs:
        hdr += ["test acc " + "/".join(TOOL_NAME[t] for t in tools)]
    hdr += ["note"]
    print()
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        p, t = r["item"], r["threads"]
        med = {k: (statistics.median([v for v in r["ms"][k] if v]) if any(r["ms"][k]) else None)
               for k in tools}
        cells = [p["model"], p["scheme"], str(p["batch"]), str(t)]
        cells += [fmt(med[k]) if med[k] else "n/a" if "n/a" in r["err"].get(k, "") else "-"
                  for k in tools]
        pk = r["ms"].get("pock", [])
        cells += [fmt_ratio(ratio_stats(r["ms"][k], pk)) for k in ("torch", "ort") if k in tools]
        if "tuned" in tools and "torch" in tools:
            cells.append(fmt_ratio(ratio_stats(r["ms"]["torch"], r["ms"]["tuned"])))
        cells.append("/".join(fmt(r["rss"].get(k) and r["rss"][k] / 1024, "%.0f") for k in tools))
        c = p.get("pock") or {}
        cells += [fmt(c.get("arena") and c["arena"] / 2**20, "%.2f"),
                  fmt(c.get("bp") and c["bp"] / 2**20, "%.2f")]
        fl = p["flops"]
        floor = fl / (peak * 1e9 * t) * 1e3 if fl and peak else None
        cells += [fmt(fl and fl / 1e9, "%.4g"), fmt(floor, "%.4g"),
                  fmt(floor and med.get("pock") and 100 * floor / med["pock"], "%.1f")]
        notes = []
        if a.acc_epochs:
            av = acc.get((p["model"], p["scheme"]))
            if av is None:
                cells.append("")
            elif all(v.get("error") == "no data" for v in av.values()):
                cells.append("no data")
            else:
                cells.append("/".join(fmt(v.get("acc"), "%.3f") if "error" not in v else
                                      "n/a" if v["error"].startswith("n/a") else "err"
                                      for v in av.values()))
                notes += ["acc %s: %s" % (TOOL_NAME[k], v["error"]) for k, v in av.items()
                          if "error" in v and not v["error"].startswith("n/a")]
        if p["origin"] != "examples":
            notes.append("built-in spec")
        if p.get("mismatch"):
            notes.append(p["mismatch"])
        if p.get("tuned", {}).get("tune_s"):
            notes.append("tuned in %.0f s" % p["tuned"]["tune_s"])
        by_err = {}  # one note per distinct error, naming every tool that hit it
        for k in tools:
            if k in r["err"]:
                by_err.setdefault(r["err"][k].replace(p["spec"], os.path.basename(p["spec"])),
                                  []).append(TOOL_NAME[k])
        notes += ["%s: %s" % (", ".join(ks), e) for e, ks in by_err.items()]
        cells.append("; ".join(dict.fromkeys(notes)))
        print("| " + " | ".join(cells) + " |")
    print()
    print("ms: median over rounds of each worker's median step (a step: feeding the batch, "
          "forward, backward, update). Ratios: other tool's ms / Pock's ms per round, "
          "min/median/max over rounds (> 1: Pock faster). RSS: peak resident set (VmHWM) of "
          "each worker process (PyTorch's and ORT's include their libraries and Python). "
          "arena, BP: Pock's planned activation arena and backward-pass memory (saved "
          "activations + gradients + optimizer state, `pock compile --print-memory`). GFLOP: "
          "conv/matmul multiply-adds x 2 of one step (bench/step_flops.py); floor = GFLOP / "
          "(threads x one core's measured peak); % peak = floor / Pock ms.")
    if skipped:
        print("skipped models: " + "; ".join(skipped))
    print()
    print("torch.__config__.show():")
    print(torch_cfg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
