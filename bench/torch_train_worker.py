#!/usr/bin/env python3
"""torch_train_worker.py — bench_train.py's PyTorch worker: trains one model of
bench/bench_models.py in PyTorch eager under a Pock sparse spec (scripts/sparse_spec.py:
frozen weights requires_grad=False, a partial-channel weight as a trained slice [:, :S] and
a frozen rest), times each step, and prints one JSON line.

  build-venv-onnx/bin/python bench/torch_train_worker.py --model NAME [--size device]
      --spec SPEC.json --optimizer sgd|adamw --lr LR [--momentum M] [--weight-decay WD]
      --data X.npy[,X2.npy]:Y.npy [--test X.npy[,X2.npy]:Y.npy] --batch B --threads T
      (--warmup W --steps K | --epochs E) [--device cpu|cuda]

Rows in file order, batches cycling through the data, the last partial batch of an epoch
dropped (as bench_train_step). Every module is in training mode (the ONNX exports train
every batch norm with batch statistics, and Pock does the same); test accuracy in eval
mode, batches of B with the last one partial. Output: {"steps", "ms_median", "ms_min",
"ms_max", "ms_mean", "loss", "acc", "test_loss", "peak_rss_kb", "torch_threads"} or
{"error": "..."}.
"""
import os
import sys

if __name__ == "__main__":  # the thread count before torch (and numpy's BLAS) load
    _t = sys.argv[sys.argv.index("--threads") + 1] if "--threads" in sys.argv else "1"
    for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_v] = _t

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "scripts"))


def peak_rss_kb():
    """VmHWM of this process image (ru_maxrss would carry a parent's peak across exec)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    return None


def load_data(arg):
    """X.npy[,X2.npy]:Y.npy -> ([arrays], labels)."""
    if ":" not in arg:
        raise SystemExit("torch_train_worker: --data/--test is X.npy[,X2.npy]:Y.npy, got %r" % arg)
    xs, y = arg.rsplit(":", 1)
    return [np.load(p) for p in xs.split(",")], np.load(y)


def batch(m, xs, y, r0, b, dtype):
    """Rows [r0, r0 + b) as the module's inputs and int64 labels."""
    import torch
    out = []
    for x in xs:
        v = torch.from_numpy(np.ascontiguousarray(x[r0:r0 + b]))
        if v.is_floating_point():
            v = v.to(dtype)
            if len(xs) == 1:
                v = v.reshape((v.shape[0],) + tuple(m.input_shape))
        else:
            v = v.long()
        out.append(v)
    return out, torch.from_numpy(np.ascontiguousarray(y[r0:r0 + b])).long()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--size", default="device")
    ap.add_argument("--spec", required=True, help="a Pock sparse spec, or 'all'")
    ap.add_argument("--optimizer", choices=("sgd", "adamw"), required=True)
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--data", required=True)
    ap.add_argument("--test")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int)
    ap.add_argument("--epochs", type=int)
    ap.add_argument("--device", default="cpu", help="cpu, or cuda for CUDA eager (bench/gpu.sh)")
    a = ap.parse_args()
    if (a.steps is None) == (a.epochs is None) or (a.steps or a.epochs) < 1:
        raise SystemExit("torch_train_worker: one of --steps K or --epochs E (>= 1)")

    import torch
    import torch.nn.functional as F
    import bench_models
    import sparse_spec
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    m = bench_models.torch_model(a.model, a.size)
    try:
        spec = None if a.spec == "all" else sparse_spec.load(a.spec)
        r = sparse_spec.resolve(spec, m, bench_models.example_inputs(a.model, m, 2))
    except sparse_spec.SpecError as e:
        print(json.dumps({"error": "sparse spec: %s" % e}))
        return 0
    if a.device != "cpu" and not (a.device.startswith("cuda") and torch.cuda.is_available()):
        print(json.dumps({"error": "device %s: PyTorch sees no CUDA device" % a.device}))
        return 0
    dev = torch.device(a.device)
    m.to(dev)  # before the split: the slices are cut from the moved weights
    params, splits = sparse_spec.apply(m, r)
    if a.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, weight_decay=a.weight_decay)
    else:
        opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=a.weight_decay)
    xs, y = load_data(a.data)
    b = a.batch
    per = len(y) // b
    if per < 1:
        raise SystemExit("torch_train_worker: %s: fewer rows than the batch (%d)" % (a.data, b))
    total = a.warmup + a.steps if a.steps else per * a.epochs
    m.train()
    ms, losses = [], []
    for s in range(total):
        t0 = time.perf_counter()
        inp, yb = batch(m, xs, y, (s % per) * b, b, torch.float32)
        inp, yb = [v.to(dev) for v in inp], yb.to(dev)
        sparse_spec.join(splits)
        z = m(*inp)
        loss = F.cross_entropy(z.reshape(-1, z.shape[-1]), yb.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        lv = loss.item()  # waits for the device too
        dt = (time.perf_counter() - t0) * 1e3
        if a.steps and s < a.warmup:
            continue
        ms.append(dt)
        losses.append(lv)
    acc = tloss = None
    if a.test:
        txs, ty = load_data(a.test)
        m.eval()
        sparse_spec.join(splits)
        correct = count = 0
        lsum = 0.0
        with torch.no_grad():
            for r0 in range(0, len(ty), b):
                inp, yb = batch(m, txs, ty, r0, b, torch.float32)
                inp, yb = [v.to(dev) for v in inp], yb.to(dev)
                z = m(*inp)
                z, yb = z.reshape(-1, z.shape[-1]), yb.reshape(-1)
                lsum += F.cross_entropy(z, yb, reduction="sum").item()
                correct += (z.argmax(1) == yb).sum().item()
                count += yb.numel()
        acc, tloss = correct / count, lsum / count
    print(json.dumps({"steps": len(ms), "ms_median": statistics.median(ms), "ms_min": min(ms),
                      "ms_max": max(ms), "ms_mean": sum(ms) / len(ms),
                      "loss": sum(losses) / len(losses), "acc": acc, "test_loss": tloss,
                      "peak_rss_kb": peak_rss_kb(), "torch_threads": torch.get_num_threads()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
