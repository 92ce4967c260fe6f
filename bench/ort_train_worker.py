#!/usr/bin/env python3
"""ort_train_worker.py — one ONNX Runtime on-device training run (onnxruntime-training
1.19, the reference venv) of an ONNX model for a given trainable set; prints one JSON line.
bench_train.py runs it as the "ONNX Runtime training" column, one process per row.

  build-venv-onnx/bin/python bench/ort_train_worker.py --onnx M.onnx --trainable NAMES.txt
        --loss ce --optimizer sgd|adamw --lr LR [--momentum M] [--weight-decay WD]
        --data X.npy[,X2.npy]:Y.npy [--test X.npy[,X2.npy]:Y.npy] --batch B --threads T
        --warmup W --steps K [--epochs E] [--workdir DIR]

prints {"steps", "ms_median", "ms_min", "ms_max", "ms_mean", "peak_rss_kb", "acc",
"test_loss", "artifact_s", "train_steps", "losses"} or {"error": "..."} with exit status 1
(2: bad usage).

--trainable: one initializer name per line (blank lines and '#' comments skipped): those
get requires_grad, every other initializer is frozen. Artifacts come from
onnxruntime.training.artifacts.generate_artifacts: the training, eval and optimizer
models and the checkpoint, in --workdir (kept) or a temporary folder (removed);
"artifact_s" is how long that took.

--loss ce: mean softmax cross entropy over the labels (ORT's SoftmaxCrossEntropyLoss).
Per-token outputs (N, T, V) with labels (N, T) are flattened to (N*T, V) and (N*T) first,
since the ONNX op takes the classes on axis 1. Labels are cast to int64. LayerNormalization
nodes get their optional Mean and InvStdDev outputs first (ORT's gradient of the op reads
them; torch's export leaves them out).

--optimizer: adamw is ORT's AdamWOptimizer in PyTorch's mode (adam_mode 0: decoupled
weight decay before the update, eps 1e-8 added after the bias correction, betas 0.9 and
0.999), the same update as torch.optim.AdamW and Pock's adamw; sgd is ORT's
SGDOptimizerV2, plain SGD: it has no momentum and no weight decay, so --momentum or
--weight-decay other than 0 with sgd is refused ("n/a: ...").

--data: one .npy per model input, in the order of the graph's inputs (a float input takes
float data, an integer input integer data; each is cast to the input's type), and the
labels. Rows are taken in file order, B per step; a last partial batch is dropped, so
every step has the same shape (as bench_train.py's PyTorch worker). Without --epochs the
run takes W + K steps (wrapping around the data); with --epochs E it takes E epochs, and
the timed steps are those after the first W, K at most ("steps" says how many).

Memory: the artifacts are generated in a child process (this script with
--generate-into), which loads the ONNX model and onnxblock; this process then loads only
numpy, onnxruntime and ORT's training api, so "peak_rss_kb", this process's VmHWM, is the
training's own: interpreter, data, session, step. Neither process loads torch
(onnxruntime.training's package __init__ imports it for ORTModule, ~250 MB of RSS that
on-device training never uses: run as a script, the worker blocks it and loads the
subpackages it needs without that __init__).

Each timed step is ORT's training step: Module forward + backward, Optimizer.step(),
Module.lazy_reset_grad(), the batch handed over as numpy arrays (as a user writes it).
Batch norms run in training mode (batch statistics) as the export made them; ORT's
training graph does not write their running statistics back, so this worker copies the
new ones (the BatchNormalization outputs 1 and 2) into the checkpoint state after each
step, outside the timed part: the eval model (batch norms in inference mode) then uses
them, as PyTorch's and Pock's do. "ms_*" are over the timed steps; "acc" and "test_loss"
are over --test after training (the eval model; argmax over the last axis, per token for
per-token outputs), null without --test; "losses" are the losses of the first 8 steps
(bench/ort_train_check.py compares them with PyTorch's). --threads sets ORT's intra-op
threads (inter-op 1).
"""
import os

# numpy's BLAS single-threaded before numpy loads: the threads measured are ORT's.
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import types  # noqa: E402

import numpy as np  # noqa: E402

LOSSES_KEPT = 8  # first-step losses in the output: enough for a check against PyTorch
META = "worker.json"  # what the generating child tells the training process


class Failure(Exception):
    """A run that cannot go on: its message becomes the JSON "error"."""


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors are JSON too, for the benchmark reading stdout."""

    def error(self, message):
        print(json.dumps({"error": "usage: " + message}))
        sys.exit(2)


def parse_args(argv=None):
    ap = Parser(description=__doc__.splitlines()[0])
    ap.add_argument("--onnx", required=True, help="the model (graph inputs + 1 output)")
    ap.add_argument("--trainable", required=True, help="initializer names, one per line")
    ap.add_argument("--loss", default="ce", choices=("ce",))
    ap.add_argument("--optimizer", required=True, choices=("sgd", "adamw"))
    ap.add_argument("--lr", type=float, required=True)
    ap.add_argument("--momentum", type=float, default=0.0)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--data", required=True, help="X.npy[,X2.npy]:Y.npy")
    ap.add_argument("--test", help="X.npy[,X2.npy]:Y.npy, evaluated after training")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, required=True, help="timed steps")
    ap.add_argument("--epochs", type=int, help="train E full epochs (timed steps among them)")
    ap.add_argument("--workdir", help="keep the ORT artifacts here (default: a temp folder)")
    ap.add_argument("--generate-into", help=argparse.SUPPRESS)  # the child's job
    a = ap.parse_args(argv)
    a.argv = list(sys.argv[1:] if argv is None else argv)
    if a.lr <= 0 or a.batch < 1 or a.threads < 1 or a.warmup < 0 or a.steps < 1:
        ap.error("--lr, --batch, --threads and --steps must be > 0, --warmup >= 0")
    if a.epochs is not None and a.epochs < 1:
        ap.error("--epochs must be >= 1")
    if a.optimizer == "sgd" and (a.momentum != 0 or a.weight_decay != 0):
        raise Failure("n/a: ORT 1.19's SGD optimizer (SGDOptimizerV2) has no momentum and no "
                      "weight decay (got --momentum %g --weight-decay %g)"
                      % (a.momentum, a.weight_decay))
    if a.optimizer == "adamw" and a.momentum != 0:
        raise Failure("--momentum is for sgd; adamw's betas are 0.9 and 0.999")
    return a


def peak_rss_kb():
    """VmHWM of this process image (ru_maxrss would carry a parent's peak across exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def read_names(path):
    try:
        with open(path) as f:
            names = [s.strip() for s in f]
    except OSError as e:
        raise Failure("%s: %s" % (path, e.strerror))
    names = [s for s in names if s and not s.startswith("#")]
    if not names:
        raise Failure("%s: no trainable initializer named" % path)
    return names


def load_data(spec, what):
    """X1.npy[,X2.npy]:Y.npy -> ([X1, X2, ...], Y), every array with the same rows."""
    xs, sep, y = spec.rpartition(":")
    if not sep or not xs or not y:
        raise Failure("%s %r: expected X.npy[,X2.npy]:Y.npy" % (what, spec))
    arrays = []
    for p in xs.split(",") + [y]:
        try:
            arrays.append(np.load(p, allow_pickle=False))
        except (OSError, ValueError) as e:
            raise Failure("%s: %s: %s" % (what, p, e))
    rows = {a.shape[0] if a.ndim else -1 for a in arrays}
    if len(rows) != 1 or -1 in rows:
        raise Failure("%s %r: the arrays' first dims (rows) differ or are missing: %s"
                      % (what, spec, [a.shape for a in arrays]))
    return arrays[:-1], arrays[-1].astype(np.int64)


def model_io(model):
    """(the graph's inputs that are not initializers, as [name, numpy dtype name, rank], the
    output's name and rank); one output, the logits, as the exports have."""
    import onnx
    inits = {t.name for t in model.graph.initializer}
    ins = [[i.name, onnx.helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type).name,
            len(i.type.tensor_type.shape.dim)] for i in model.graph.input if i.name not in inits]
    if len(model.graph.output) != 1:
        raise Failure("the model has %d outputs: the worker takes one (the logits)"
                      % len(model.graph.output))
    out = model.graph.output[0]
    return ins, out.name, len(out.type.tensor_type.shape.dim)


def fit_inputs(xs, ins, what):
    """Each array cast to its graph input's dtype (float to float, integer to integer)."""
    if len(xs) != len(ins):
        raise Failure("%s: %d input array%s, but the model has %d inputs (%s)" % (
            what, len(xs), "" if len(xs) == 1 else "s", len(ins), ", ".join(n for n, _, _ in ins)))
    out = []
    for x, (name, dt, rank) in zip(xs, ins):
        dt = np.dtype(dt)
        if np.issubdtype(x.dtype, np.floating) != np.issubdtype(dt, np.floating):
            raise Failure("%s: input %s takes %s, the data is %s" % (what, name, dt, x.dtype))
        if x.ndim != rank:
            raise Failure("%s: input %s has rank %d, the data %d" % (what, name, rank, x.ndim))
        out.append(np.ascontiguousarray(x, dtype=dt))
    return out


def batch_norm_stats(model):
    """[[output name, running-stat initializer]] of every training-mode BatchNormalization:
    its outputs 1 and 2 are the updated running mean and variance."""
    inits = {t.name for t in model.graph.initializer}
    pairs = []
    for n in model.graph.node:
        if n.op_type != "BatchNormalization" or len(n.output) < 3:
            continue
        for k in (1, 2):
            if n.output[k] and n.input[k + 2] in inits:
                pairs.append([n.output[k], n.input[k + 2]])
    return pairs


def flat_ce_block(per_token):
    """The loss block: ORT's CrossEntropyLoss, or for per-token logits (N, T, V) a
    SoftmaxCrossEntropyLoss over (N*T, V) and labels (N*T), fed labels (N, T)."""
    import onnx
    ort_training()
    from onnxruntime.training import onnxblock
    if not per_token:
        return onnxblock.loss.CrossEntropyLoss()

    class FlatCrossEntropy(onnxblock.Block):
        def build(self, scores, labels="labels"):
            from onnxruntime.training.onnxblock import _graph_utils as gu
            g = self.base.graph
            lab = onnx.helper.make_tensor_value_info(labels, onnx.TensorProto.INT64, ["N", "T"])
            g.input.append(lab)
            names = {k: gu.generate_graph_name(k) for k in
                     ("ce.shape2", "ce.shape1", "ce.scores", "ce.labels", "loss", "log_prob")}
            vocab = gu.get_output_from_output_name(self.base, scores).type.tensor_type.shape.dim[-1]
            if not vocab.dim_value:
                raise Failure("per-token logits need a fixed vocabulary (last) dim")
            g.initializer.extend([
                onnx.numpy_helper.from_array(np.array([-1, vocab.dim_value], np.int64),
                                             names["ce.shape2"]),
                onnx.numpy_helper.from_array(np.array([-1], np.int64), names["ce.shape1"])])
            g.node.extend([
                onnx.helper.make_node("Reshape", [scores, names["ce.shape2"]],
                                      [names["ce.scores"]]),
                onnx.helper.make_node("Reshape", [labels, names["ce.shape1"]],
                                      [names["ce.labels"]]),
                onnx.helper.make_node("SoftmaxCrossEntropyLoss",
                                      [names["ce.scores"], names["ce.labels"]],
                                      [names["loss"], names["log_prob"]], reduction="mean")])
            return names["loss"]

    return FlatCrossEntropy()


def eval_batch_norms(path):
    """The eval model's batch norms in inference mode (generate_artifacts clears
    training_mode) keep the running-stat outputs, which ORT then refuses: drop them, and
    the graph outputs they were."""
    import onnx
    em = onnx.load(path)
    dropped = set()
    for n in em.graph.node:
        if n.op_type == "BatchNormalization" and len(n.output) > 1:
            dropped.update(o for o in n.output[1:] if o)
            del n.output[1:]
    keep = [o for o in em.graph.output if o.name not in dropped]
    del em.graph.output[:]
    em.graph.output.extend(keep)
    onnx.save(em, path)


def layer_norm_outputs(model):
    """LayerNormalization's optional outputs Mean and InvStdDev added where the export
    left them out: ORT's gradient of the op reads them."""
    k = 0
    for n in model.graph.node:
        if n.op_type == "LayerNormalization" and n.domain in ("", "ai.onnx"):
            while len(n.output) < 3:
                n.output.append("ort_worker_ln_saved_%d" % k)
                k += 1


def make_artifacts(a, model, trainable, out_name, out_rank, stats, workdir):
    """generate_artifacts into workdir with AdamW set to PyTorch's mode; returns seconds."""
    import onnx
    ort_training()
    from onnxruntime.training import artifacts, onnxblock
    inits = {t.name: t for t in model.graph.initializer}
    missing = [n for n in trainable if n not in inits]
    if missing:
        raise Failure("trainable names that are no initializer of the model: %s"
                      % ", ".join(missing[:5]))
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16)
    bad = [n for n in trainable if inits[n].data_type not in floats]
    if bad:
        raise Failure("trainable initializers that are not float: %s" % ", ".join(bad[:5]))
    frozen = [n for n in inits if n not in set(trainable)]
    layer_norm_outputs(model)
    if a.optimizer == "adamw":
        opt = onnxblock.optim.AdamW(eps=1e-8, weight_decay=a.weight_decay)
    else:
        opt = artifacts.OptimType.SGD
    t0 = time.perf_counter()
    cwd = os.getcwd()
    os.chdir(workdir)  # onnxblock writes its temporary files into the working folder
    # The gradient builder logs every graph transform at info level whatever the default
    # severity says: into workdir/artifacts.log, not the benchmark's stderr.
    sys.stderr.flush()
    saved_err = os.dup(2)
    log = os.open(os.path.join(workdir, "artifacts.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                  0o644)
    os.dup2(log, 2)
    os.close(log)
    try:
        artifacts.generate_artifacts(
            model, requires_grad=list(trainable), frozen_params=frozen,
            loss=flat_ce_block(out_rank > 2), optimizer=opt, artifact_directory=workdir,
            additional_output_names=[out_name] + [o for o, _ in stats])
    except Failure:
        raise
    except Exception as e:  # ORT's errors are of many kinds; each ends the run the same way
        raise Failure("generate_artifacts: %s: %s" % (type(e).__name__, str(e).strip()[-400:]))
    finally:
        os.dup2(saved_err, 2)
        os.close(saved_err)
        os.chdir(cwd)
    if stats:
        eval_batch_norms(os.path.join(workdir, "eval_model.onnx"))
    if a.optimizer == "adamw":
        path = os.path.join(workdir, "optimizer_model.onnx")
        om = onnx.load(path)
        for n in om.graph.node:
            if n.op_type == "AdamWOptimizer":
                for at in n.attribute:
                    if at.name == "adam_mode":
                        at.i = 0  # PyTorch's AdamW (ORT's default, 1, is Hugging Face's)
        onnx.save(om, path)
    return time.perf_counter() - t0


def ort_training():
    """Makes onnxruntime.training's subpackages (api, artifacts, onnxblock) importable:
    the package itself, or where its __init__ cannot load (torch blocked: see main) a bare
    parent package over its folder, which they do not need."""
    try:
        import onnxruntime.training  # noqa: F401
    except ImportError:
        import onnxruntime
        parent = types.ModuleType("onnxruntime.training")
        parent.__path__ = [os.path.join(os.path.dirname(onnxruntime.__file__), "training")]
        sys.modules["onnxruntime.training"] = parent


def open_session(a, workdir):
    ort_training()
    import onnxruntime as ort
    from onnxruntime.training import api
    so = ort.SessionOptions()
    so.intra_op_num_threads = a.threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # errors only: the graph transformers log at info
    state = api.CheckpointState.load_checkpoint(os.path.join(workdir, "checkpoint"))
    module = api.Module(os.path.join(workdir, "training_model.onnx"), state,
                        os.path.join(workdir, "eval_model.onnx"), session_options=so)
    opt = api.Optimizer(os.path.join(workdir, "optimizer_model.onnx"), module)
    opt.set_learning_rate(a.lr)
    return state, module, opt


def batches(rows, b):
    """Start rows of the full batches of one epoch, in file order."""
    return list(range(0, rows - b + 1, b))


def train(a, xs, y, state, module, opt, stats):
    """Returns (timed step ms, losses of the first steps, steps taken)."""
    starts = batches(len(y), a.batch)
    if not starts:
        raise Failure("--data has %d rows: fewer than one batch of %d" % (len(y), a.batch))
    total = a.epochs * len(starts) if a.epochs else a.warmup + a.steps
    ms, losses = [], []
    module.train()
    params = state.parameters
    for s in range(total):
        r = starts[s % len(starts)]
        feed = [x[r:r + a.batch] for x in xs] + [y[r:r + a.batch]]
        t0 = time.perf_counter()
        out = module(*feed)
        opt.step()
        module.lazy_reset_grad()
        t = (time.perf_counter() - t0) * 1e3
        if a.warmup <= s < a.warmup + a.steps:
            ms.append(t)
        loss = float(out[0])
        if not np.isfinite(loss):
            raise Failure("step %d: the loss is %g (lower --lr)" % (s + 1, loss))
        if len(losses) < LOSSES_KEPT:
            losses.append(loss)
        for (_, init), v in zip(stats, out[2:]):
            params[init].data = v
    return ms, losses, total


def evaluate(a, xs, y, module):
    """(accuracy, mean loss) over every label of the set, batches of B (the last smaller)."""
    module.eval()
    correct = count = 0
    loss_sum = 0.0
    for r in range(0, len(y), a.batch):
        lab = y[r:r + a.batch]
        out = module(*([x[r:r + a.batch] for x in xs] + [lab]))
        pred = np.argmax(out[1], axis=-1)
        correct += int((pred == lab).sum())
        loss_sum += float(out[0]) * lab.size
        count += lab.size
    return correct / count, loss_sum / count


def generate(a):
    """The child's job: load the model, write the artifacts and META into
    --generate-into."""
    import onnx  # before onnxruntime, which imports torch where it can (see main)
    names = read_names(a.trainable)
    try:
        model = onnx.load(a.onnx)
    except Exception as e:  # OSError, DecodeError, ...: each is "cannot read the model"
        raise Failure("%s: %s" % (a.onnx, e))
    ins, out_name, out_rank = model_io(model)
    stats = batch_norm_stats(model)
    artifact_s = make_artifacts(a, model, names, out_name, out_rank, stats, a.generate_into)
    with open(os.path.join(a.generate_into, META), "w") as f:
        json.dump({"inputs": ins, "stats": stats, "artifact_s": artifact_s}, f)
    return None


def generate_in_child(a, workdir):
    """Runs this script with --generate-into workdir; returns META's contents."""
    cmd = [sys.executable, os.path.abspath(__file__)] + a.argv + ["--generate-into", workdir]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        lines = p.stdout.strip().splitlines()
        try:
            msg = json.loads(lines[-1])["error"]
        except (IndexError, ValueError, KeyError):
            tail = (p.stderr.strip() or "exit %d" % p.returncode).splitlines()
            msg = "artifact generation: %s" % tail[-1]
        raise Failure(msg)
    with open(os.path.join(workdir, META)) as f:
        return json.load(f)


def run(a):
    xs, y = load_data(a.data, "--data")
    test = load_data(a.test, "--test") if a.test else None
    if len(y) < a.batch:  # before the artifacts, which take a while
        raise Failure("--data has %d rows: fewer than one batch of %d" % (len(y), a.batch))
    workdir = a.workdir or tempfile.mkdtemp(prefix="ort_train_")
    os.makedirs(workdir, exist_ok=True)
    try:
        meta = generate_in_child(a, workdir)
        ins, stats = meta["inputs"], meta["stats"]
        xs = fit_inputs(xs, ins, "--data")
        if test:
            test = (fit_inputs(test[0], ins, "--test"), test[1])
        state, module, opt = open_session(a, workdir)
        ms, losses, total = train(a, xs, y, state, module, opt, stats)
        acc = tloss = None
        if test:
            acc, tloss = evaluate(a, test[0], test[1], module)
    finally:
        if not a.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if not ms:
        raise Failure("no timed step: %d steps taken, %d warmup" % (total, a.warmup))
    return {"steps": len(ms), "ms_median": statistics.median(ms), "ms_min": min(ms),
            "ms_max": max(ms), "ms_mean": sum(ms) / len(ms), "peak_rss_kb": peak_rss_kb(),
            "acc": acc, "test_loss": tloss, "artifact_s": meta["artifact_s"],
            "train_steps": total, "losses": losses}


def main(argv=None):
    try:
        a = parse_args(argv)
        res = generate(a) if a.generate_into else run(a)
    except Failure as e:
        print(json.dumps({"error": str(e)}))
        return 1
    except Exception as e:  # ORT raises RuntimeError, Fail, InvalidArgument, ...
        print(json.dumps({"error": "%s: %s" % (type(e).__name__, str(e).strip()[-400:])}))
        return 1
    if res is not None:
        print(json.dumps(res))
    return 0


if __name__ == "__main__":
    # No torch in either process (see the docstring): `import onnxruntime` imports it
    # when it can, for ORTModule, which neither uses; that costs ~250 MB and 4 s.
    if "torch" not in sys.modules:
        sys.modules["torch"] = None
    sys.exit(main())
