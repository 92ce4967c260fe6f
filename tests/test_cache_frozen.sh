#!/usr/bin/env bash
# test_cache_frozen.sh — issue 21's frozen-prefix caching (`pock compile --cache-frozen`,
# `pock-rt train --cache-frozen`): the weights after 3 shuffled epochs (a padded last batch
# each) are byte for byte those of the same artifact trained without the cache and of an
# artifact compiled without --cache-frozen; epochs 2 and 3 take every step from the cache;
# a run stopped and resumed with the cache ends where the uninterrupted one does; and every
# case the cache cannot serve is refused with its reason: nothing frozen, dropout and
# training-mode batch norm in the prefix, an artifact without the section, a budget too
# small, an inference artifact. With a Python that has onnx and torch, the same equality on
# the tiny ResNet-18 (frozen batch norms with running stats) and LLaMA-style decoder.
#   test_cache_frozen.sh POCK POCK_RT SOURCE_DIR
pock=$(realpath "$1") rt=$(realpath "$2") src=$(realpath "$3")
. "$(dirname "$0")/cli_test_lib.sh"
cd "$tmp" || exit 1
D=$src/examples/digits
data=(--data "$D/target_train.csv" --scale 0.0625)

# same NAME A B: the files are byte for byte equal
same() { if cmp -s "$2" "$3"; then pass "$1"; else fail "$1" "$2 and $3 differ"; fi; }

expect compile_prefix 0 "frozen prefix: 8 of 15 nodes, 1 tensors cached" \
  "$pock" compile "$D/models/cnn.json" --batch 32 --sparse "$D/specs/cnn_head.json" \
  --cache-frozen --verbose -o head.pock
"$pock" compile "$D/models/cnn.json" --batch 32 --sparse "$D/specs/cnn_head.json" -o plain.pock \
  >/dev/null 2>&1 || fail compile_plain "pock compile"
expect train_cached 0 "trained 45 steps.*, 30 from the frozen cache" \
  "$rt" train head.pock "${data[@]}" --epochs 3 --cache-frozen --metrics m.jsonl --save cached.pkw
if [ "$(grep -c '"epoch_ms": [0-9.]*, "cache_hits": [0-9]*' m.jsonl)" -eq 3 ]; then
  pass metrics_epoch_ms
else fail metrics_epoch_ms "$(cat m.jsonl)"; fi
"$rt" train head.pock "${data[@]}" --epochs 3 --save uncached.pkw >/dev/null 2>&1 ||
  fail train_uncached "pock-rt train"
"$rt" train plain.pock "${data[@]}" --epochs 3 --save plain.pkw >/dev/null 2>&1 ||
  fail train_plain "pock-rt train"
same cached_equals_uncached cached.pkw uncached.pkw
same cached_equals_plain cached.pkw plain.pkw
# stopped after 20 steps (mid epoch 2) and resumed: a new run fills its cache again
"$rt" train head.pock "${data[@]}" --epochs 3 --cache-frozen --max-steps 20 \
  --checkpoint c.ckpt >/dev/null 2>&1 || fail resume_first "pock-rt train --max-steps"
expect train_resumed 0 "trained 25 steps" \
  "$rt" train head.pock "${data[@]}" --epochs 3 --cache-frozen --resume c.ckpt --save resumed.pkw
same resumed_equals_uninterrupted resumed.pkw cached.pkw

# refusals, each with its reason
expect refuse_full 1 "nothing to cache: every forward node reads a trained weight" \
  "$pock" compile "$D/models/cnn.json" --batch 32 --cache-frozen -o x.pock
expect refuse_no_section 1 "no frozen prefix to cache \(compile it with .pock compile --cache-frozen.\)" \
  "$rt" train plain.pock "${data[@]}" --epochs 1 --cache-frozen
expect refuse_budget 1 "the cache needs [0-9]+ bytes for 451 rows, over its budget of 65536 bytes" \
  "$rt" train head.pock "${data[@]}" --epochs 1 --cache-frozen --cache-budget 64K
expect budget_needs_cache 2 "--cache-budget needs --cache-frozen" \
  "$rt" train head.pock "${data[@]}" --epochs 1 --cache-budget 1G
expect budget_bad_size 2 "--cache-budget needs a size" \
  "$rt" train head.pock "${data[@]}" --epochs 1 --cache-frozen --cache-budget 12X
expect refuse_inference 2 "--cache-frozen is for training artifacts" \
  "$pock" compile "$D/models/cnn.json" --batch 32 --inference --cache-frozen -o x.pock
# dropout after a frozen layer: its mask changes every step
sed 's/"inputs": \["relu1.out", "fc2.weight"\]/"inputs": ["drop1.out", "fc2.weight"]/;
     s/{"name": "fc2", "op"/{"name": "drop1", "op": "dropout", "inputs": ["relu1.out"], "output": "drop1.out", "attrs": {"p": 0.1}},\n  {"name": "fc2", "op"/' \
  "$D/models/mlp.json" >drop.json
sed -i 's/"weights_file": "mlp.pkw"/"weights_file": "'"${D//\//\\/}"'\/models\/mlp.pkw"/' drop.json
expect refuse_dropout 1 "node 'drop1' \(dropout\), whose result changes every step: dropout draws a new mask" \
  "$pock" compile drop.json --batch 32 --sparse "$D/specs/mlp_head.json" --cache-frozen -o x.pock
[ -e x.pock ] && fail refusals_wrote "x.pock exists"

py=
for c in "${POCK_ONNX_PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$c" ] && "$c" -c 'import importlib.util as u
assert u.find_spec("onnx") and u.find_spec("torch") and u.find_spec("numpy")' >/dev/null 2>&1
  then py=$c; break; fi
done
if [ -z "$py" ]; then
  echo "(no Python with onnx, torch and numpy: the tiny example models are not run)"
  finish
  exit
fi
"$py" - <<'PY' || fail data "random data"
import numpy as np
r = np.random.default_rng(0)
np.save("img_x.npy", r.standard_normal((42, 3, 8, 8)).astype(np.float32))
np.save("img_y.npy", r.integers(0, 10, 42).astype(np.int64))
np.save("ids.npy", r.integers(0, 256, (42, 8)).astype(np.int64))
np.save("tok_y.npy", r.integers(0, 256, (42, 8)).astype(np.int64))
PY
for m in resnet18 llama; do
  "$py" "$src/scripts/model_export.py" $m m --size tiny >/dev/null 2>&1 || fail "export_$m" "model_export.py"
done
echo '{"version": 1, "train": [{"params": "fc.*"}]}' >res_head.json
echo '{"version": 1, "train": [{"params": "lm_head.*"}]}' >llama_head.json
# exported in training mode, ResNet's frozen batch norms still use batch statistics
expect refuse_bn_train 1 "batch norm in training mode normalizes with each batch's statistics" \
  "$pock" compile m/resnet18.onnx --batch 4 --sparse res_head.json --cache-frozen -o x.pock
mkdir auto && cp m/resnet18.onnx auto/ &&
  sed 's/{/{"bn_mode": "auto", /' m/resnet18.training.json >auto/resnet18.training.json
# case NAME MODEL SPEC DATA: cached training equals the same artifact trained without the
# cache (bytes) and an artifact compiled without --cache-frozen (bytes, or within 1e-5 of
# each tensor's largest magnitude: --cache-frozen keeps forward epilogues and prologues out
# of the prefix, and a prologue computed while packing, LLaMA's rotary embedding, may round
# a*b+c differently from its own kernel)
case_() {
  "$pock" compile "$2" --batch 4 --sparse "$3" --cache-frozen -o "$1.c.pock" >"$1.log" 2>&1 &&
    "$pock" compile "$2" --batch 4 --sparse "$3" -o "$1.p.pock" >>"$1.log" 2>&1 &&
    "$rt" train "$1.c.pock" --data "$4" --epochs 3 --cache-frozen --save "$1.c.pkw" >>"$1.log" 2>&1 &&
    "$rt" train "$1.c.pock" --data "$4" --epochs 3 --save "$1.u.pkw" >>"$1.log" 2>&1 &&
    "$rt" train "$1.p.pock" --data "$4" --epochs 3 --save "$1.p.pkw" >>"$1.log" 2>&1 ||
    { fail "$1" "$(tail -c 400 "$1.log")"; return; }
  grep -q "22 from the frozen cache" "$1.log" || fail "$1_hits" "$(grep trained "$1.log")"
  same "$1" "$1.c.pkw" "$1.u.pkw"
  if cmp -s "$1.c.pkw" "$1.p.pkw"; then pass "$1_plain"
  elif "$py" -c 'import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from torch2pock import read_pkw
a, b = read_pkw(sys.argv[2]), read_pkw(sys.argv[3])
assert list(a) == list(b), (list(a), list(b))
for k in a:
    err = np.max(np.abs(a[k] - b[k]), initial=0) / max(np.max(np.abs(b[k]), initial=0), 1e-30)
    assert err <= 1e-5, "%s: relative difference %g" % (k, err)' "$src/scripts" "$1.c.pkw" "$1.p.pkw" \
    >"$1.diff" 2>&1; then pass "$1_plain (within 1e-5)"
  else fail "$1_plain" "$(tail -c 300 "$1.diff")"; fi
}
case_ resnet18_head auto/resnet18.onnx res_head.json img_x.npy:img_y.npy
case_ llama_head m/llama.onnx llama_head.json ids.npy:tok_y.npy
finish
