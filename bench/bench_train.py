#!/usr/bin/env python3
"""bench_train.py — training speed of the digits models, PyTorch eager (CPU, one thread) vs
Pock (`pock compile` + bench_train_step), same initial weights (torch2pock) and data order,
for the full update and the sparse schemes at batch 1, 8 and 32. Never fails on timing.

  /usr/bin/python3 bench/bench_train.py [--build build] [--models cnn,mlp]
        [--schemes full,head,bias_head,last2,partial25,partial25_localbias] [--batches 1,8,32] [--epochs 2]

Prints per (model, scheme, batch): median ms/step of each and their ratio, peak RSS of each
process, test accuracy of each, the step's FLOPs (multiply-adds x 2 of the conv/matmul
forward and backward kernels the scheme needs) and the floor = FLOPs / one core's fp32 peak
(measured with bench/fma_peak.c: vector FMA chains, -O2 -march=native).
"""
import os

# One thread everywhere, before torch (or numpy's BLAS) is imported.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_v] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, os.path.join(ROOT, "examples", "digits"))

SGD = {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "weight_decay": 1e-3}


def load_digits(tmp):
    """digits.csv (pixels 0..16, label last) scaled by 1/16; every 5th row is the test set.
    Writes the .npy files bench_train_step reads; returns (x, y, tx, ty)."""
    raw = np.loadtxt(os.path.join(ROOT, "examples", "digits", "digits.csv"), delimiter=",",
                     ndmin=2, comments="#")
    if not np.isfinite(raw[0]).all():
        raw = raw[1:]
    x, y = (raw[:, :64] / 16.0).astype(np.float32), raw[:, 64].astype(np.int32)
    test = np.arange(len(y)) % 5 == 0
    out = (x[~test], y[~test], x[test], y[test])
    for name, a in zip(("x", "y", "tx", "ty"), out):
        np.save(os.path.join(tmp, name + ".npy"), a)
    return out


def step_flops(graph, trains, partial):
    """Multiply-adds x 2 per batch row of one training step's conv/matmul kernels: the
    forward of each layer; dW of a trained weight (over the trained fraction of its input
    channels: partial = {weight name: fraction}); dX of a layer when any param of an earlier
    layer trains (its input needs a gradient)."""
    shapes = {i["name"]: [1] + i["shape"][1:] for i in graph["inputs"]}
    shapes.update({p["name"]: p["shape"] for p in graph["params"]})
    layers = []
    for n in graph["nodes"]:
        a = [shapes[i] for i in n["inputs"]]
        at = n.get("attrs", {})
        if n["op"] == "matmul":
            out = [a[0][0], a[1][0] if at.get("trans_b") else a[1][1]]
            macs = out[1] * a[0][1]
            layers.append((n["inputs"][1], macs))
        elif n["op"] == "conv2d":
            w, p, s, d = a[1], at["pad"], at["stride"], at["dilation"]
            oh = (a[0][2] + p[0] + p[2] - d[0] * (w[2] - 1) - 1) // s[0] + 1
            ow = (a[0][3] + p[1] + p[3] - d[1] * (w[3] - 1) - 1) // s[1] + 1
            out = [a[0][0], w[0], oh, ow]
            layers.append((n["inputs"][1], w[0] * oh * ow * w[1] * w[2] * w[3]))
        elif n["op"] in ("max_pool2d", "avg_pool2d"):
            k, p, s = at["kernel"], at["pad"], at["stride"]
            out = a[0][:2] + [(a[0][2] + p[0] + p[2] - k[0]) // s[0] + 1,
                              (a[0][3] + p[1] + p[3] - k[1]) // s[1] + 1]
        elif n["op"] == "mean":
            out = a[0][:2] if not at.get("keepdims") else a[0][:2] + [1, 1]
        else:
            out = a[0]
        shapes[n["output"]] = out
    names = [w.rsplit(".", 1)[0] for w, _ in layers]
    trained_layer = [any(t and k.rsplit(".", 1)[0] == ln for k, t in trains.items())
                     for ln in names]
    fwd = sum(m for _, m in layers)
    bwd = 0
    for i, (w, macs) in enumerate(layers):
        if trains.get(w):
            bwd += macs * partial.get(w, 1.0)
        if any(trained_layer[:i]):
            bwd += macs
    return 2 * (fwd + bwd)


def torch_worker(args):
    """One (model, scheme, batch) run of PyTorch in this process; prints a JSON line."""
    import torch
    torch.set_num_threads(1)
    import gen_train_fixtures as gtf
    import models
    data = {k: np.load(os.path.join(args.data, k + ".npy")) for k in ("x", "y", "tx", "ty")}
    tr = gtf.TorchTrainer(args.model, args.scheme, SGD, "f32",
                          model=models.MODELS[args.model](dtype=torch.float32))
    x, y = torch.from_numpy(data["x"]), torch.from_numpy(data["y"]).long()
    b, per = args.batch, len(y) // args.batch
    ms, last = [], []
    for ep in range(args.epochs):
        last = []
        for s in range(per):
            t0 = time.perf_counter()
            loss = tr.step(x[s * b:(s + 1) * b], y[s * b:(s + 1) * b])
            ms.append((time.perf_counter() - t0) * 1e3)
            last.append(loss.item())
    tx, ty = torch.from_numpy(data["tx"]), torch.from_numpy(data["ty"]).long()
    logits = tr.logits(tx)
    acc = (logits.argmax(1) == ty).double().mean().item()
    tloss = torch.nn.functional.cross_entropy(logits, ty).item()
    print(json.dumps({"steps": len(ms), "ms_median": statistics.median(ms),
                      "ms_mean": sum(ms) / len(ms), "loss": sum(last) / len(last),
                      "acc": acc, "test_loss": tloss,
                      "peak_rss_kb": peak_rss_kb()}))


def peak_rss_kb():
    """VmHWM of this process image (ru_maxrss would carry a parent's peak across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def run_json(cmd, what):
    """Runs cmd, returns its last stdout line as JSON, or {"error": ...}."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"error": "%s: %s" % (what, e)}
    if p.returncode != 0:
        msg = (p.stderr.strip() or p.stdout.strip()).splitlines()
        return {"error": "%s: %s" % (what, msg[-1] if msg else "exit %d" % p.returncode)}
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return {"error": "%s: no JSON in output" % what}


def find_or_build_helper(build, tmp):
    """bench_train_step: the CMake target when built, else built here against libpockrt."""
    exe = os.path.join(build, "bench", "bench_train_step")
    if os.access(exe, os.X_OK):
        return exe
    exe = os.path.join(tmp, "bench_train_step")
    lib = os.path.join(os.path.abspath(build), "runtime")
    cmd = ["cc", "-O2", "-std=gnu11", os.path.join(HERE, "bench_train_step.c"),
           "-I" + os.path.join(ROOT, "include"), "-L" + lib, "-lpockrt",
           "-Wl,-rpath," + lib, "-lm", "-o", exe]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit("bench_train: cannot build bench_train_step: %s" % p.stderr.strip())
    return exe


def measure_peak(tmp):
    exe = os.path.join(tmp, "fma_peak")
    p = subprocess.run(["cc", "-O2", "-march=native", "-ffp-contract=fast",
                        os.path.join(HERE, "fma_peak.c"), "-o", exe],
                       capture_output=True, text=True)
    if p.returncode != 0:
        return None
    r = run_json([exe], "fma_peak")
    return r.get("gflops")


def cpu_mhz():
    """The nominal clock /proc/cpuinfo reports (a cross-check of the measured peak)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("cpu MHz"):
                    return float(line.split(":")[1])
    except (OSError, ValueError):
        pass
    return None


def fmt(v, f="%.3f"):
    return "-" if v is None else f % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default="cnn,mlp")
    ap.add_argument("--schemes", default="full,head,bias_head,last2,partial25,partial25_localbias")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--db", help="tuning database for `pock compile --db` (default: none)")
    ap.add_argument("--keep", help="keep the work files in this directory")
    ap.add_argument("--torch-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model"), ap.add_argument("--scheme"), ap.add_argument("--data")
    ap.add_argument("--batch", type=int)
    a = ap.parse_args()
    if a.torch_worker:
        return torch_worker(a)

    import gen_train_fixtures as gtf
    import models
    import torch
    import torch2pock
    pock = os.path.join(a.build, "cli", "pock")
    if not os.access(pock, os.X_OK):
        sys.exit("bench_train: %s not found (build first: scripts/build.sh)" % pock)
    tmp = a.keep or tempfile.mkdtemp(prefix="pock_bench_train_")
    os.makedirs(tmp, exist_ok=True)
    helper = find_or_build_helper(a.build, tmp)
    x, y, tx, ty = load_digits(tmp)
    peak = measure_peak(tmp)
    print("bench_train: %d train rows, %d test rows, %d epoch(s), SGD lr %g momentum %g wd %g,"
          " f32, 1 thread" % (len(y), len(ty), a.epochs, SGD["lr"], SGD["momentum"],
                             SGD["weight_decay"]))
    mhz = cpu_mhz()
    print("fp32 peak of one core: %s GFLOP/s measured (bench/fma_peak.c FMA loop; the floor "
          "uses this)%s" % (fmt(peak, "%.1f"), "; 32 FLOP/cycle x %.0f MHz = %.1f GFLOP/s"
                            % (mhz, 32 * mhz / 1e3) if mhz else ""))
    print("schedules: %s" % ("tuned, from " + a.db if a.db else
                             "untuned (presets/defaults; pass --db for tuned kernels)"))
    hdr = ("%-4s %-10s %5s | %9s %9s %6s | %9s %9s | %8s %8s | %7s %7s | %s"
           % ("model", "scheme", "batch", "torch ms", "pock ms", "ratio", "MFLOP", "floor ms",
              "torch MB", "pock MB", "t acc", "p acc", "note"))
    rows = []
    for mname in a.models.split(","):
        m = models.MODELS[mname](dtype=torch.float32)
        mj = os.path.join(tmp, mname + ".json")
        g = torch2pock.save(m, mj, m.input_shape, name="digits_" + mname,
                            training={"loss": "softmax_cross_entropy", "classes": 10,
                                      "optimizer": SGD})
        for scheme in a.schemes.split(","):
            spec = os.path.join(tmp, "%s_%s.json" % (mname, scheme))
            with open(spec, "w") as f:
                json.dump(gtf.spec_of(mname, scheme), f)
            tr = gtf.TorchTrainer(mname, scheme, SGD, "f32")
            partial = {}
            if tr.split:
                w = tr.split[3]
                partial[w] = tr.split[1].shape[1] / float(tr.split[1].shape[1] + tr.split[2].shape[1])
            for b in [int(v) for v in a.batches.split(",")]:
                flops = step_flops(g, tr.trains, partial) * b
                art = os.path.join(tmp, "%s_%s_b%d.pock" % (mname, scheme, b))
                cc = subprocess.run([pock, "compile", mj, "--sparse", spec, "--batch", str(b),
                                     "--optimizer", "sgd", "--lr", str(SGD["lr"]),
                                     "--momentum", str(SGD["momentum"]), "--weight-decay",
                                     str(SGD["weight_decay"]), "-o", art]
                                    + (["--db", a.db] if a.db else []),
                                    capture_output=True, text=True)
                if cc.returncode != 0:
                    msg = (cc.stderr.strip() or "exit %d" % cc.returncode).splitlines()[-1]
                    pk = {"error": "pock compile: " + msg}
                else:
                    pk = run_json([helper, art] + [os.path.join(tmp, n + ".npy") for n in
                                                   ("x", "y", "tx", "ty")] + [str(a.epochs)],
                                  "bench_train_step")
                tt = run_json([sys.executable, os.path.abspath(__file__), "--torch-worker",
                               "--model", mname, "--scheme", scheme, "--batch", str(b),
                               "--epochs", str(a.epochs), "--data", tmp], "torch")
                tms, pms = tt.get("ms_median"), pk.get("ms_median")
                floor = flops / (peak * 1e9) * 1e3 if peak else None
                note = "; ".join(r["error"] for r in (tt, pk) if "error" in r)
                row = ("%-4s %-10s %5d | %9s %9s %6s | %9s %9s | %8s %8s | %7s %7s | %s"
                       % (mname, scheme, b, fmt(tms), fmt(pms),
                          fmt(tms / pms if tms and pms else None, "%.2fx"),
                          fmt(flops / 1e6, "%.3f"), fmt(floor, "%.4f"),
                          fmt(tt.get("peak_rss_kb") and tt["peak_rss_kb"] / 1024, "%.1f"),
                          fmt(pk.get("peak_rss_kb") and pk["peak_rss_kb"] / 1024, "%.1f"),
                          fmt(tt.get("acc"), "%.3f"), fmt(pk.get("acc"), "%.3f"), note))
                rows.append(row)
                print(row if len(rows) > 1 else hdr + "\n" + row, flush=True)
    print("ratio = PyTorch ms / Pock ms (> 1: Pock faster); ms = median over steps; MB = "
          "peak RSS of each process (PyTorch's includes libtorch); acc = test accuracy after "
          "training; floor = FLOPs / peak.")
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
