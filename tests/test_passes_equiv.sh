#!/usr/bin/env bash
# test_passes_equiv.sh — issue 21's acceptance: every graph pass keeps the result. For the
# digits CNN and MLP and the tiny example models (examples/models: MobileNetV2, ResNet,
# BERT, LLaMA) under several sparse schemes and optimizers, `pock compile --passes all`
# and `--passes none` are trained 10 steps on the same rows (--no-shuffle) and the saved
# weights must agree (f32 within 1e-5 relative; copy elimination and reordering keep every
# bit, fusion may round differently: the compiler contracts a*b+c across what were two
# kernels). Also checks that the passes did something (fewer kernels with copy_elim, fused
# chains, epilogues, frozen batch norms folded: fewer kernel calls per step and a load plan,
# refolded after pock-rt train --weights) and the --passes, --disable-pass and --dump-after
# errors.
# The tiny models need a Python with onnx, torch and numpy ($POCK_ONNX_PYTHON, else
# python3): without one only the digits cases run.
#   test_passes_equiv.sh POCK POCK_RT SOURCE_DIR [LAYOUT_DB_FIXTURE]
pock=$(realpath "$1") rt=$(realpath "$2") src=$(realpath "$3")
fixture=${4:+$(realpath "$4")}
. "$(dirname "$0")/cli_test_lib.sh"
cd "$tmp" || exit 1
py=
for c in "${POCK_ONNX_PYTHON:-}" python3 /usr/bin/python3; do
  if [ -n "$c" ] && "$c" -c 'import importlib.util as u
assert u.find_spec("onnx") and u.find_spec("torch") and u.find_spec("numpy")' >/dev/null 2>&1
  then py=$c; break; fi
done

# same NAME A.pkw B.pkw [FLOOR]: equal bytes, or (with numpy) every tensor within 1e-5
# relative (f32; f64 within 1e-9) to its largest magnitude, or to FLOOR where that is
# larger (default 0.01): an element near zero may differ by an ulp of the tensor's scale
# when a fused kernel rounds a*b+c once. A tensor that is only rounding noise (a batch
# norm's bias before another batch norm in training mode: its gradient is zero but for
# rounding; that norm's running mean; both ~1e-9) has no scale of its own: the floor
# compares it on the scale 0.01 (absolute 1e-7, an ulp at 1.0; f64 1e-11)
same() {
  if cmp -s "$2" "$3"; then pass "$1"; return; fi
  if [ -n "$py" ] && "$py" -c 'import sys, numpy as np
sys.path.insert(0, sys.argv[1])
from torch2pock import read_pkw
a, b = read_pkw(sys.argv[2]), read_pkw(sys.argv[3])
assert list(a) == list(b), (list(a), list(b))
for k in a:
    tol = 1e-9 if a[k].dtype == np.float64 else 1e-5
    err = np.max(np.abs(a[k] - b[k]), initial=0) / max(np.max(np.abs(b[k]), initial=0), float(sys.argv[4]))
    assert err <= tol, "%s: relative difference %g" % (k, err)' "$src/scripts" "$2" "$3" "${4:-0.01}" \
    >diff.txt 2>&1; then pass "$1 (within 1e-5)"; return; fi
  fail "$1" "the weights differ: $(tail -c 300 diff.txt)"
}

# case NAME MODEL DATA [compile options...]: compile with all passes and with none, train
# 10 steps of batch 4 from the same rows, compare the weights ($floor: same's FLOOR)
case_() {
  local name=$1 model=$2 data=$3
  shift 3
  local p ok=1
  for p in all none; do
    if ! "$pock" compile "$model" --batch 4 --passes $p "$@" -o "$name.$p.pock" >"$name.$p.log" 2>&1 ||
       ! "$rt" train "$name.$p.pock" $data --epochs 1 --max-steps 10 --no-shuffle \
         --save "$name.$p.pkw" >>"$name.$p.log" 2>&1; then
      fail "$name" "passes $p: $(tail -c 400 "$name.$p.log")"
      ok=0
    fi
  done
  [ $ok = 1 ] && same "$name" "$name.all.pkw" "$name.none.pkw" "${floor:-0.01}"
}

D=$src/examples/digits
digits="--data $D/target_train.csv --scale 0.0625"
for spec in full head last2 partial25_bias_head; do
  case_ "cnn_$spec" "$D/models/cnn.json" "$digits" --sparse "$D/specs/cnn_$spec.json"
done
case_ cnn_adamw_clip "$D/models/cnn.json" "$digits" --optimizer adamw --clip-global 1
case_ cnn_accum "$D/models/cnn.json" "$digits" --accum-steps 2 --sparse "$D/specs/cnn_last2.json"
for spec in full partial25_head_localbias; do
  case_ "mlp_$spec" "$D/models/mlp.json" "$digits" --sparse "$D/specs/mlp_$spec.json"
done
case_ mlp_adam "$D/models/mlp.json" "$digits" --optimizer adam
# SGD with momentum and weight decay: each weight's update fused into its gradient's kernel
case_ cnn_momentum_wd "$D/models/cnn.json" "$digits" --momentum 0.9 --weight-decay 0.01

# layout: conv chains NHWC (--layout nhwc forces what auto chooses by measured kernel
# times), transposes at the chains' ends; without a record or a timing auto keeps NCHW
for spec in full partial25_bias_head; do
  case_ "cnn_nhwc_$spec" "$D/models/cnn.json" "$digits" --layout nhwc --sparse "$D/specs/cnn_$spec.json"
done
expect layout_nhwc 0 "pass layout +nodes 39 -> 40, .*: 1 of 1 chain NHWC: chain 1 \(24 kernels, 1 conversion\): NHWC \(--layout\)" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --layout nhwc --verbose --dump-after reorder
expect layout_auto_untimed 0 "pass layout +nodes 39 -> 39, .*: 0 of 1 chain NHWC: chain 1 .*: NCHW \(not timed" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --verbose --dump-after reorder
expect dump_after_layout 0 "= fused\(conv2d_grad1@nhwc\)\(%[0-9]+, %[0-9]+\)  # grad\(conv1\)" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --layout nhwc --dump-after layout
expect layout_unknown 2 "--layout: unknown layout 'nwhc' \(auto, nchw or nhwc\)" \
  "$pock" compile "$D/models/cnn.json" --layout nwhc -o x.pock
expect list_passes_layout 0 "^layout .*NHWC" "$pock" compile --list-passes
# the default (auto) by tuning records: a database where the NHWC kernels are faster
if [ -z "$fixture" ]; then
  echo "(no layout_db_fixture: the layout pass's choice by tuning records is not run)"
elif "$fixture" layout.db "$D/models/cnn.json" 4 >fixture.log 2>&1; then
  expect layout_auto_records 0 "pass layout .*: 1 of 1 chain NHWC: chain 1 .*: step kernels NCHW [0-9.]+ ms, NHWC [0-9.]+ ms: NHWC" \
    "$pock" compile "$D/models/cnn.json" --batch 4 --db layout.db --verbose --dump-after reorder
  case_ cnn_layout_auto_records "$D/models/cnn.json" "$digits" --db layout.db
else fail layout_db_fixture "$(tail -c 300 fixture.log)"; fi

# the passes did something: copy_elim removed the CNN's add gradients (add_grad0 copies)
k_all=$(sed -n 's/.*: \([0-9]*\) kernels.*/\1/p' cnn_full.all.log)
k_none=$(sed -n 's/.*: \([0-9]*\) kernels.*/\1/p' cnn_full.none.log)
if [ -n "$k_all" ] && [ -n "$k_none" ] && [ "$k_all" -lt "$k_none" ]; then
  pass "copy_elim_fewer_kernels ($k_none -> $k_all)"
else fail copy_elim_fewer_kernels "kernels with all passes '$k_all', with none '$k_none'"; fi
expect report_lines 0 "pass copy_elim +nodes 43 -> (39|40), arena [0-9]+ -> [0-9]+ bytes: [34] copies aliased" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --print-memory --dump-after reorder
expect report_off 0 "pass copy_elim +off" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --passes reorder --verbose --dump-after reorder
expect dump_after_pass 0 "nodes=(39|40)" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --dump-after copy_elim
expect passes_unknown 2 "unknown pass 'fusion' \(all, none, or a comma list of: fold, share_stats, copy_elim, layout, fuse, reorder\)" \
  "$pock" compile "$D/models/cnn.json" --passes copy_elim,fusion -o x.pock
expect list_passes 0 "^copy_elim .*alias" "$pock" compile --list-passes
# (each bias add inlined into the relu after it: relu's gradient reads its result, not the sum)
expect fuse_cnn 0 "pass fuse +nodes 39 -> 30, .*: 4 elementwise nodes inlined into their reader, 0 into their norm.s or softmax.s result, 4 epilogues fused into their matmul or conv, 0 prologues fused into their matmul, 1 optimizer update fused into its weight gradient" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --verbose --dump-after reorder
expect dump_after_fuse 0 "= fused\(mean_grad0\+relu_grad0\)" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --dump-after fuse
# epilogues: each conv's bias add and relu; in the MLP's backward pass each data gradient
# with the ReLU gradient that reads it (run before the weight update that follows it)
expect fuse_conv_epilogue 0 "= fused\(conv2d\+add\+relu\)" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --dump-after fuse
expect fuse_backward_epilogue 0 "backward %[0-9]+, %[0-9]+ = fused\(matmul_grad0\+relu_grad0\)" \
  "$pock" compile "$D/models/mlp.json" --batch 4 --dump-after fuse
# SGD updates: each linear weight's, as the epilogue of the matmul making its gradient (dW
# takes no memory); a conv weight's stays a kernel of its own (fused, ResNet-18's ran slower)
expect fuse_update 0 "update +%[0-9]+, %[0-9]+, %[0-9]+ = fused\(matmul_grad1\+sgd_update\)" \
  "$pock" compile "$D/models/mlp.json" --batch 4 --dump-after fuse
expect fuse_conv_update_apart 0 "update +%[0-9]+, %[0-9]+ = sgd_update\(.*# update\(conv1\.weight\)" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --dump-after fuse
expect passes_twice 2 "'reorder' is listed twice" \
  "$pock" compile "$D/models/cnn.json" --passes reorder,reorder -o x.pock
expect disable_pass 0 "pass fuse +off" \
  "$pock" compile "$D/models/cnn.json" --batch 4 --disable-pass fuse --verbose --dump-after reorder
expect disable_pass_unknown 2 "disable-pass: unknown pass 'fusion' \(fold, share_stats, copy_elim, layout, fuse, reorder\)" \
  "$pock" compile "$D/models/cnn.json" --disable-pass fusion -o x.pock
[ -e x.pock ] && fail passes_error_wrote "x.pock exists"

if [ -z "$py" ]; then
  echo "(no Python with onnx, torch and numpy: the tiny example models are not run)"
  finish
  exit
fi
# The tiny example models with random data: images (CNNs), token ids (BERT with its
# attention mask, LLaMA with next-token labels).
"$py" - <<'PY' || fail data "random data"
import numpy as np
r = np.random.default_rng(0)
for name, side in (("cnn16", 16), ("cnn8", 8)):
    np.save(name + "_x.npy", r.standard_normal((40, 3, side, side)).astype(np.float32))
    np.save(name + "_y.npy", r.integers(0, 10, 40).astype(np.int64))
np.save("bert_ids.npy", r.integers(0, 1000, (40, 8)).astype(np.int64))
np.save("bert_mask.npy", np.ones((40, 8), np.float32))
np.save("bert_y.npy", r.integers(0, 2, 40).astype(np.int64))
np.save("llama_ids.npy", r.integers(0, 256, (40, 8)).astype(np.int64))
np.save("llama_y.npy", r.integers(0, 256, (40, 8)).astype(np.int64))
PY
for m in mobilenet_v2 resnet18 bert llama; do
  "$py" "$src/scripts/model_export.py" $m m --size tiny >/dev/null 2>&1 || fail "export_$m" "model_export.py"
done
echo '{"version": 1, "train": [{"norms": true}, {"biases": true}, {"params": "fc.*"}]}' >nbh.json
echo '{"version": 1, "train": [{"blocks": {"prefix": "layers.layer2", "last": 1}, "channels": 0.25}, {"params": "fc.*"}]}' >res_pe.json
sed 's/features\.17\./features.3./g; s/features\.18\./features.4./g' \
  "$src/examples/mobilenet_v2/specs/pockengine.json" >mb_pe.json
case_ mobilenet_v2_full m/mobilenet_v2.onnx "--data cnn16_x.npy:cnn16_y.npy"
case_ mobilenet_v2_pockengine m/mobilenet_v2.onnx "--data cnn16_x.npy:cnn16_y.npy" --sparse mb_pe.json
case_ resnet18_full m/resnet18.onnx "--data cnn8_x.npy:cnn8_y.npy"
# tails: each norm's ReLU (and a residual add with it) computed by the norm's kernel, whose
# result then is never stored (the ReLU's gradient reads the ReLU's result)
expect fuse_tail_resnet18 0 "pass fuse +nodes [0-9]+ -> [0-9]+, .*, [1-9][0-9]* into their norm's or softmax's result" \
  "$pock" compile m/resnet18.onnx --batch 4 --verbose --dump-after reorder
expect dump_after_fuse_tail 0 "= fused\(batch_norm\+relu\)" \
  "$pock" compile m/resnet18.onnx --batch 4 --dump-after fuse
# share_stats: each training-mode norm's running-stats update reads the forward's statistics,
# gamma's gradient dX's sums, beta's gradient is a view of them (the weights compared above)
expect share_stats_resnet18 0 "pass share_stats +nodes [0-9]+ -> [0-9]+, .*: [1-9][0-9]* running-stats updates read the forward's mean and variance, [1-9][0-9]* gamma gradients read dX's sums, [1-9][0-9]* beta gradients aliased" \
  "$pock" compile m/resnet18.onnx --batch 4 --verbose --dump-after reorder
case_ resnet18_partial m/resnet18.onnx "--data cnn8_x.npy:cnn8_y.npy" --sparse res_pe.json
case_ resnet18_norms_biases m/resnet18.onnx "--data cnn8_x.npy:cnn8_y.npy" --sparse nbh.json
# NHWC chains (the layout pass forced). MobileNetV2's projection norms' biases have no
# gradient in exact arithmetic (a 1x1 conv and a batch-statistics norm follow each, which
# cancel any per-channel shift): their values, and the next norms' running means, are
# rounding noise of ~1e-9 to 1e-8 that another summation order in the conv kernels moves,
# as with the fused SGD updates: same's floor of 0.01 (1e-7 absolute: an ulp of 1 in f32)
case_ mobilenet_v2_nhwc m/mobilenet_v2.onnx "--data cnn16_x.npy:cnn16_y.npy" --layout nhwc
case_ resnet18_nhwc m/resnet18.onnx "--data cnn8_x.npy:cnn8_y.npy" --layout nhwc
case_ resnet18_partial_nhwc m/resnet18.onnx "--data cnn8_x.npy:cnn8_y.npy" --sparse res_pe.json \
  --layout nhwc
case_ bert_full m/bert.onnx "--data bert_ids.npy,bert_mask.npy:bert_y.npy"
case_ bert_last2 m/bert.onnx "--data bert_ids.npy,bert_mask.npy:bert_y.npy" \
  --sparse "$src/examples/minilm/specs/last2.json"
case_ llama_full m/llama.onnx "--data llama_ids.npy:llama_y.npy"
expect fuse_llama 0 "pass fuse +nodes [0-9]+ -> [0-9]+, .*: [1-9][0-9]* elementwise nodes inlined" \
  "$pock" compile m/llama.onnx --batch 4 --verbose --dump-after reorder
case_ llama_pockengine m/llama.onnx "--data llama_ids.npy:llama_y.npy" \
  --sparse "$src/examples/llama/specs/pockengine.json"
# prologues: in an inference artifact no gradient reads a forward result again, so the
# bias add + reshape + transpose before attention's Q·Kᵀ, GELU before ff2, the rotary
# embedding before Q·Kᵀ become prologues of the matmul that packs them: the same scores
# as without passes
for m in bert llama; do
  d="bert_ids.npy,bert_mask.npy:bert_y.npy"
  [ $m = llama ] && d="llama_ids.npy:llama_y.npy"
  ok=1
  for p in all none; do
    "$pock" compile m/$m.onnx --batch 4 --inference --passes $p --verbose -o "pro_$m.$p.pock" \
      >"pro_$m.$p.log" 2>&1 &&
      "$rt" run "pro_$m.$p.pock" --data $d --scores >"pro_$m.$p.txt" 2>>"pro_$m.$p.log" || ok=0
  done
  n=$(sed -n 's/.*, \([0-9]*\) prologues\{0,1\} fused.*/\1/p' "pro_$m.all.log")
  if [ $ok = 1 ] && [ "${n:-0}" -gt 0 ] && "$py" -c 'import sys, numpy as np
a, b = np.loadtxt(sys.argv[1]), np.loadtxt(sys.argv[2])
err = np.max(np.abs(a[:, 1:] - b[:, 1:])) / np.max(np.abs(b[:, 1:]))
assert a.shape == b.shape and err <= 1e-5, (a.shape, b.shape, err)' "pro_$m.all.txt" "pro_$m.none.txt" \
    >pro_diff.txt 2>&1; then
    pass "fuse_prologue_$m ($n prologues, scores within 1e-5)"
  else fail "fuse_prologue_$m" "prologues '$n': $(tail -c 300 "pro_$m.all.log") $(tail -c 300 pro_diff.txt)"; fi
done

# fold: head-only schemes (no gradient flows through the frozen layers; "bn_mode": "auto",
# so frozen batch norms use their running stats) fold every batch norm into its conv and
# make the frozen weights' arithmetic once, at load: the same weights after 10 steps, fewer
# kernel calls per step (pock-rt info's train plan), a load plan; weights replaced at run
# time (--weights) fold again at load, as weights compiled into the artifact do.
echo '{"version": 1, "train": [{"last_layers": 1}]}' >head.json
mkdir -p auto
for m in mobilenet_v2 resnet18; do
  cp m/$m.onnx auto/ && sed 's/{/{"bn_mode": "auto", /' m/$m.training.json >auto/$m.training.json
done
case_ mobilenet_v2_head auto/mobilenet_v2.onnx "--data cnn16_x.npy:cnn16_y.npy" --sparse head.json
case_ resnet18_head auto/resnet18.onnx "--data cnn8_x.npy:cnn8_y.npy" --sparse head.json
calls() { "$rt" info "$1" 2>/dev/null | sed -n "s/^kernel calls *train \([0-9]*\).*/\1/p"; }
loads() { "$rt" info "$1" 2>/dev/null | sed -n "s/.*, load \([0-9]*\) (load:.*/\1/p"; }
# (a folded norm leaves an elementwise shift that fuses with the activation or residual add
# after it, where the norm's own kernel could not: the drop is fold with fuse)
for m in mobilenet_v2 resnet18; do
  "$pock" compile auto/$m.onnx --batch 4 --sparse head.json --passes copy_elim,fuse,reorder \
    -o "${m}_nofold.pock" >"${m}_nofold.log" 2>&1 ||
    fail "fold_compile_$m" "$(tail -c 300 "${m}_nofold.log")"
  a=$(calls "${m}_head.none.pock") b=$(calls "${m}_nofold.pock") c=$(calls "${m}_head.all.pock")
  l=$(loads "${m}_head.all.pock")
  if [ -n "$b" ] && [ -n "$c" ] && [ -n "$l" ] && [ "$c" -lt "$b" ]; then
    pass "fold_calls_$m (kernel calls/step: none $a, all but fold $b, all $c; $l at load)"
  else fail "fold_calls_$m" "kernel calls/step: all but fold '$b', all '$c', load '$l'"; fi
done
expect dump_after_fold 0 "= fused\(batch_norm_fold_weight\)" \
  "$pock" compile auto/resnet18.onnx --batch 4 --sparse head.json --dump-after fold
expect list_passes_fold 0 "^fold .*load" "$pock" compile --list-passes
W="--data cnn8_x.npy:cnn8_y.npy --epochs 1 --max-steps 10 --no-shuffle"
if "$rt" train resnet18_head.all.pock $W --weights resnet18_full.all.pkw --save fold_rt.pkw \
     >fold_w.log 2>&1 &&
   "$pock" compile auto/resnet18.onnx --batch 4 --sparse head.json --weights resnet18_full.all.pkw \
     -o fold_cw.pock >>fold_w.log 2>&1 &&
   "$rt" train fold_cw.pock $W --save fold_cw.pkw >>fold_w.log 2>&1; then
  same fold_runtime_weights fold_rt.pkw fold_cw.pkw
else fail fold_runtime_weights "$(tail -c 400 fold_w.log)"; fi
# inference artifacts: every batch norm uses its running stats, so every one folds; the
# scores of `pock-rt run` (from the artifact's weights, and from others: --weights) agree
# with an artifact compiled without passes
ok=1
for p in all none; do
  "$pock" compile m/resnet18.onnx --batch 4 --inference --passes $p -o "inf.$p.pock" \
    >inf.log 2>&1 || ok=0
  for w in own other; do
    "$rt" run "inf.$p.pock" --data cnn8_x.npy:cnn8_y.npy --scores \
      $([ $w = other ] && echo --weights resnet18_full.all.pkw) >"inf.$p.$w.txt" 2>>inf.log || ok=0
  done
done
l=$(loads inf.all.pock)
if [ $ok = 1 ] && [ -n "$l" ] && "$py" -c 'import sys, numpy as np
for w in ("own", "other"):
    a, b = np.loadtxt("inf.all.%s.txt" % w), np.loadtxt("inf.none.%s.txt" % w)
    err = np.max(np.abs(a[:, 1:] - b[:, 1:])) / np.max(np.abs(b[:, 1:]))
    assert a.shape == b.shape and err <= 1e-5, (w, a.shape, b.shape, err)' >inf_diff.txt 2>&1; then
  pass "fold_inference ($l nodes at load, scores within 1e-5)"
else fail fold_inference "load '$l': $(tail -c 300 inf.log) $(tail -c 300 inf_diff.txt)"; fi
finish
