#!/usr/bin/env bash
# test_bench_train.sh — bench/bench_train.py as a smoke test (1 round, 2 timed steps, 1
# thread) on the digits CNN's PockEngine-style scheme (25% of conv3's input channels +
# biases + head): the row has Pock's and PyTorch's ms/step, their ratio, Pock's planned
# memory and the step's FLOPs; scripts/sparse_spec.py resolves the spec exactly as Pock
# does (the bench compares it with `pock inspect`); ONNX Runtime says "n/a" (partial
# channels); after one epoch Pock's and PyTorch's test accuracy agree (same weights, data
# order and optimizer). Never a timing assertion. Kept to one row: each PyTorch worker is a
# process that imports torch (seconds). Needs a Python with torch: $POCK_ONNX_PYTHON, else
# /usr/bin/python3; skipped (exit 77) without one.
#   test_bench_train.sh BUILD_DIR SOURCE_DIR
build=$(realpath "$1") src=$(realpath "$2")
py=
for c in "${POCK_ONNX_PYTHON:-}" /usr/bin/python3; do
  if [ -n "$c" ] && "$c" -c 'import torch' >/dev/null 2>&1; then py=$c; break; fi
done
if [ -z "$py" ]; then
  echo "SKIP: no Python with torch (set POCK_ONNX_PYTHON, or apt install python3-torch)"
  exit 77
fi
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
"$py" "$src/bench/bench_train.py" --build "$build" --size tiny --models cnn \
  --schemes pockengine --batches 8 --threads 1 --rounds 1 --warmup 1 --steps 2 \
  --acc-epochs 1 --work "$tmp/work" --python "$py" >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -ne 0 ]; then
  echo "FAIL: bench_train.py exit $rc"; tail -5 "$tmp/err"; exit 1
fi
"$py" - "$tmp/out" <<'EOF'
import re, sys
text = open(sys.argv[1]).read()
lines = [l for l in text.splitlines() if l.startswith("| ")]
hdr = [c.strip() for c in lines[0].strip("|").split("|")]
rows = {}
for l in lines[1:]:
    c = dict(zip(hdr, (x.strip() for x in l.strip("|").split("|"))))
    rows[(c["model"], c["scheme"])] = c
bad = []
want = [("cnn", "pockengine")]
for k in want:
    c = rows.get(k)
    if c is None:
        bad.append("%s %s: no row" % k)
        continue
    num = lambda v: re.fullmatch(r"\d+\.\d+", v) is not None
    for col in ("Pock ms", "PyTorch ms", "arena MB", "BP MB", "GFLOP", "floor ms"):
        if not num(c[col]):
            bad.append("%s %s: %s is %r" % (k + (col, c[col])))
    if not re.fullmatch(r"(\d+\.\d+/){2}\d+\.\d+", c["PyTorch/Pock"]):
        bad.append("%s %s: ratio %r" % (k + (c["PyTorch/Pock"],)))
    if "differently" in c["note"]:
        bad.append("%s %s: %s" % (k + (c["note"],)))
if rows.get(("cnn", "pockengine"), {}).get("ORT ms") != "n/a":
    bad.append("cnn pockengine: ORT should be n/a (partial channels)")
for s in ("pockengine",):
    acc = rows.get(("cnn", s), {}).get("test acc Pock/PyTorch/ORT", "")
    v = acc.split("/")
    try:
        if abs(float(v[0]) - float(v[1])) > 0.03:
            bad.append("cnn %s: test accuracy Pock %s vs PyTorch %s" % (s, v[0], v[1]))
    except (ValueError, IndexError):
        bad.append("cnn %s: test accuracy %r" % (s, acc))
if "torch.__config__.show()" not in text or "estimate" not in text:
    bad.append("no estimate or torch config in the output")
for b in bad:
    print("FAIL:", b)
print("ok" if not bad else "%d failures" % len(bad))
sys.exit(1 if bad else 0)
EOF
