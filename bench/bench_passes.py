#!/usr/bin/env python3
"""bench_passes.py — issue 21's pass benchmark: per example model and sparse scheme, the
training step with no graph passes, each pass alone and all passes, compiled from the same
model and timed in the same run (interleaved rounds): ms/step (median over rounds of each
round's median step, with min–max), distinct kernels, kernel calls per step (the training
graph's nodes), the planned arena and BP memory, and the speed-up over no passes. Never
fails on timing.

  build-venv-onnx/bin/python bench/bench_passes.py [--build build] [--size device]
      [--models cnn,mobilenet_v2,resnet18,llama,bert] [--schemes full,pockengine]
      [--batch 8] [--threads 1] [--rounds 3] [--warmup 1] [--steps 5]

Models and schemes are bench_models.py's (bench_train.py's); work files stay in --work
(default BUILD/bench_passes). Progress to stderr, the machine and the table to stdout.
"""
import os

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import datetime  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_models as bm  # noqa: E402
import bench_train as bt  # noqa: E402


def pass_names(pock):
    """The passes `pock compile --list-passes` names, in the order they run."""
    p = subprocess.run([pock, "compile", "--list-passes"], capture_output=True, text=True)
    return [line.split()[0] for line in p.stdout.splitlines() if line.strip()]


def calls_per_step(pock, src, spec, batch, passes):
    """Nodes of the training graph after the passes (each one kernel call a step), less the
    fold pass's load-phase nodes (they run once, at load)."""
    lay = ["--layout", "auto"] if passes in ("layout", "all") else []
    p = subprocess.run([pock, "compile", src, "--batch", str(batch), "--sparse", spec,
                        "--passes", passes, "--dump-after", "reorder"] + lay,
                       capture_output=True, text=True)
    m = re.search(r"^graph batch=\d+ tensors=\d+ nodes=(\d+)", p.stdout, re.M)
    load = len(re.findall(r"^  #\d+ load ", p.stdout, re.M))
    return int(m.group(1)) - load if m else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(bt.ROOT, "build"))
    ap.add_argument("--size", default="device", choices=("tiny", "standard", "device"))
    ap.add_argument("--models", default="cnn,mobilenet_v2,resnet18,llama,bert")
    ap.add_argument("--schemes", default="full,pockengine")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--work", help="work files (default BUILD/bench_passes)")
    ap.add_argument("--python", default=bt.default_python(),
                    help="Python with torch and onnx (model export)")
    a = ap.parse_args()
    pock = os.path.join(a.build, "cli", "pock")
    work = os.path.abspath(a.work or os.path.join(a.build, "bench_passes"))
    os.makedirs(work, exist_ok=True)
    helper = bt.find_or_build_helper(a.build, work)
    configs = ["none"] + pass_names(pock) + ["all"]
    cpu, march, cores, peak = bt.machine(work)
    print("bench_passes: %s, %s, %d cores, fp32 peak %s GFLOP/s a core; %s; batch %d, "
          "%d thread(s), %d rounds of %d+%d steps" % (
              cpu, march, cores, "%.0f" % peak if peak else "?",
              datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), a.batch, a.threads,
              a.rounds, a.warmup, a.steps), flush=True)

    rows = []
    for name in a.models.split(","):
        try:
            m = bm.torch_model(name, a.size)
            files = bm.prepare(name, a.size, m, work, a.python, rows=a.batch * 3)
        except (RuntimeError, OSError, ImportError, ModuleNotFoundError) as e:
            bt.log("%s skipped: %s" % (name, e))
            continue
        for scheme in bm.schemes_of(name, a.schemes.split(",")):
            spec, _ = bm.spec_file(name, scheme, m, work)
            for cfg in configs:
                art = os.path.join(work, "%s_%s_%s_b%d_%s.pock" % (name, a.size, scheme,
                                                                   a.batch, cfg))
                bt.log("compile %s %s passes %s" % (name, scheme, cfg))
                # the layout pass chooses by kernel times: without a database's records
                # it needs --layout auto said explicitly to time the presets
                lay = ["--layout", "auto"] if cfg in ("layout", "all") else []
                c = bt.compile_pock(pock, files["pock"], spec, a.batch, art,
                                    extra=["--passes", cfg] + lay)
                c["calls"] = calls_per_step(pock, files["pock"], spec, a.batch, cfg)
                rows.append({"model": name, "scheme": scheme, "passes": cfg, "art": art,
                             "data": files["train"], "c": c, "ms": []})
    for r in range(a.rounds):
        for row in rows:  # interleaved: every configuration once per round
            if "error" in row["c"]:
                continue
            bt.log("round %d/%d %s %s %s" % (r + 1, a.rounds, row["model"], row["scheme"],
                                             row["passes"]))
            out = bt.run_json([helper, row["art"], "--data", row["data"], "--threads",
                               str(a.threads), "--warmup", str(a.warmup), "--steps",
                               str(a.steps)], "bench_train_step")
            if "error" in out:
                row["c"]["error"] = out["error"]
            else:
                row["ms"].append(out["ms_median"])

    print("| model | scheme | passes | kernels | calls/step | arena MB | BP MB | ms/step "
          "(min–max) | speed-up |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    base = {}
    for row in rows:
        c, ms = row["c"], row["ms"]
        key = (row["model"], row["scheme"])
        med = statistics.median(ms) if ms else None
        if row["passes"] == "none":
            base[key] = med
        if "error" in c or med is None:
            print("| %s | %s | %s | error: %s |||||| " % (row["model"], row["scheme"],
                                                          row["passes"], c.get("error", "?")))
            continue
        mb = lambda v: "-" if v is None else "%.2f" % (v / 1e6)
        sp = base.get(key)
        print("| %s | %s | %s | %s | %s | %s | %s | %.3f (%.3f–%.3f) | %s |" % (
            row["model"], row["scheme"], row["passes"], c.get("kernels") or "-",
            c.get("calls") or "-", mb(c.get("arena")), mb(c.get("bp")), med, min(ms), max(ms),
            "%.2fx" % (sp / med) if sp else "-"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
