#!/usr/bin/env bash
# test_compile_cli.sh — `pock compile`, `pock train`, `pock eval` (and `pock tune MODEL`)
# end to end on a tiny MLP: the artifact trains (loss falls, accuracy rises), weights and
# metrics are written, every --dump-after stage prints its structure, a tuning database
# feeds compile, Ctrl-C saves and exits 0; bad inputs exit 1 with a message naming the
# problem, usage errors exit 2. Usage: test_compile_cli.sh POCK SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
src=$2
model=$src/tests/data/graphs/mlp_small.json

# Two classes, separable: label 1 when x0 + x1 > x2 + x3. Integer features 0..16 (scaled).
awk 'BEGIN { srand(5); print "a,b,c,d,label";
  for (i = 0; i < 96; i++) { a = int(rand() * 17); b = int(rand() * 17); c = int(rand() * 17);
    d = int(rand() * 17); print a "," b "," c "," d "," (a + b > c + d ? 1 : 0) } }' >"$tmp/train.csv"
rows=$(($(wc -l <"$tmp/train.csv") - 1))

# ---- compile
expect compile_writes_artifact 0 'wrote .*m\.pock' "$pock" compile "$model" --batch 8 --optimizer sgd \
  --lr 0.05 --momentum 0.9 -o "$tmp/m.pock"
[ -s "$tmp/m.pock" ] && pass artifact_exists || fail artifact_exists "no file"
expect compile_print_memory 0 'arena.*[0-9]+.*[0-9]+' "$pock" compile "$model" --batch 8 --print-memory \
  -o "$tmp/m2.pock"
grep -q 'naive' "$tmp/out" && pass print_memory_naive || fail print_memory_naive "$(head -5 "$tmp/out")"
declare -A want=([load]='fc1\.weight' [sparse]='train' [train]='update\(fc2\.weight\)' [memplan]='arena'
  [tasks]='^k0 ' [schedule]='"version":1' [codegen]='pkrt_module' [artifact]='"plans"')
for stage in load sparse train memplan tasks schedule codegen artifact; do
  expect "dump_after_$stage" 0 "${want[$stage]}" "$pock" compile "$model" --batch 8 --dump-after "$stage"
done
"$pock" compile "$model" --batch 8 --dump-after artifact 2>/dev/null | python3 -c 'import json,sys; json.load(sys.stdin)' 2>/dev/null &&
  pass dump_artifact_is_json || fail dump_artifact_is_json "not JSON"
printf '{"version": 1, "train": [{"params": "fc2.*"}]}\n' >"$tmp/head.json"
expect compile_sparse_head 0 'wrote' "$pock" compile "$model" --batch 8 --sparse "$tmp/head.json" -o "$tmp/h.pock"
"$pock" compile "$model" --batch 8 --sparse "$tmp/head.json" --dump-after train >"$tmp/g" 2>&1
! grep -q 'update(fc1' "$tmp/g" && grep -q 'update(fc2.weight)' "$tmp/g" && pass sparse_prunes_updates ||
  fail sparse_prunes_updates "$(grep update "$tmp/g")"

# ---- train and eval
expect eval_initial 0 "^loss [0-9.]+ accuracy [0-9.]+ rows $rows\$" "$pock" eval "$tmp/m.pock" --data "$tmp/train.csv" --scale 0.0625
loss0=$(awk '{print $2}' "$tmp/out")
expect train_runs 0 'trained [0-9]+ steps, ms/step' "$pock" train "$tmp/m.pock" --data "$tmp/train.csv" \
  --val "$tmp/train.csv" --epochs 60 --lr 0.1 --scale 0.0625 --save "$tmp/w.pkw" --metrics "$tmp/m.jsonl" --seed 3
grep -Eq '^epoch 60/60 loss [0-9.]+ acc [0-9.]+ val_loss [0-9.]+ val_acc [0-9.]+ ms/step [0-9.]+' "$tmp/out" &&
  pass train_epoch_lines || fail train_epoch_lines "$(grep epoch "$tmp/out" | tail -1)"
first=$(grep -m1 '^epoch 1/' "$tmp/out" | awk '{print $4}')
last=$(grep '^epoch 60/' "$tmp/out" | awk '{print $4}')
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' && pass train_loss_falls || fail train_loss_falls "$first -> $last"
[ -s "$tmp/w.pkw" ] && pass train_saves_weights || fail train_saves_weights "no weights file"
[ "$(wc -l <"$tmp/m.jsonl" 2>/dev/null)" = 60 ] && pass train_metrics_lines || fail train_metrics_lines "$(wc -l <"$tmp/m.jsonl")"
expect eval_trained 0 "^loss [0-9.]+ accuracy [0-9.]+ rows $rows\$" "$pock" eval "$tmp/m.pock" --data "$tmp/train.csv" \
  --scale 0.0625 --weights "$tmp/w.pkw"
read -r _ loss1 _ acc1 _ <"$tmp/out"
awk -v a="$loss0" -v b="$loss1" -v acc="$acc1" 'BEGIN { exit !(b < a && acc >= 0.8) }' && pass trained_is_better ||
  fail trained_is_better "loss $loss0 -> $loss1, accuracy $acc1"
# --weights compiles trained weights in; --reinit keeps the model's own values for a glob.
expect compile_with_weights 0 'wrote' "$pock" compile "$model" --batch 8 --weights "$tmp/w.pkw" -o "$tmp/wi.pock"
expect eval_compiled_weights 0 "^loss $loss1 accuracy $acc1 " "$pock" eval "$tmp/wi.pock" --data "$tmp/train.csv" --scale 0.0625
expect compile_reinit 0 'wrote' "$pock" compile "$model" --batch 8 --weights "$tmp/w.pkw" --reinit 'fc2.*' -o "$tmp/re.pock"
"$pock" eval "$tmp/re.pock" --data "$tmp/train.csv" --scale 0.0625 >"$tmp/re.out" 2>&1
read -r _ loss2 _ <"$tmp/re.out"
[ -n "$loss2" ] && [ "$loss2" != "$loss1" ] && [ "$loss2" != "$loss0" ] && pass reinit_keeps_head ||
  fail reinit_keeps_head "loss $loss2 (initial $loss0, trained $loss1)"
# Ctrl-C: the loop stops after a step, saves, exits 0.
awk 'BEGIN { srand(9); for (i = 0; i < 4000; i++) print int(rand()*17) "," int(rand()*17) "," int(rand()*17) "," int(rand()*17) "," i % 2 }' >"$tmp/big.csv"
"$pock" train "$tmp/m.pock" --data "$tmp/big.csv" --epochs 100000 --save "$tmp/int.pkw" >"$tmp/int.out" 2>&1 &
pid=$!
sleep 1.5
kill -INT "$pid"
wait "$pid"
rc=$?
[ "$rc" -eq 0 ] && grep -q 'interrupted' "$tmp/int.out" && [ -s "$tmp/int.pkw" ] && pass sigint_saves ||
  fail sigint_saves "exit $rc: $(tail -2 "$tmp/int.out")"

# ---- tune a model, then compile with its database
expect tune_model 0 'distinct kernels' "$pock" tune "$model" --batch 8 --db "$tmp/t.db" --trials 1 --min-ms 1 --timeout 20
expect compile_with_db 0 'kernels \([1-9][0-9]* tuned\)' "$pock" compile "$model" --batch 8 --db "$tmp/t.db" -o "$tmp/t.pock"
expect tuned_artifact_trains 0 'trained' "$pock" train "$tmp/t.pock" --data "$tmp/train.csv" --epochs 1 --scale 0.0625

# ---- inference artifacts
expect compile_inference 0 'wrote' "$pock" compile "$model" --batch 8 --inference -o "$tmp/i.pock"
expect train_refuses_inference 1 'inference' "$pock" train "$tmp/i.pock" --data "$tmp/train.csv" --epochs 1

# ---- errors name the problem (exit 1)
expect missing_model 1 'nope\.json' "$pock" compile "$tmp/nope.json" -o "$tmp/x.pock"
echo '{"format": "pock-graph", "version": 1, ' >"$tmp/bad.json"
expect bad_model_json 1 'bad\.json' "$pock" compile "$tmp/bad.json" -o "$tmp/x.pock"
printf '{"version": 1, "train": [{"params": "nothing.*"}]}\n' >"$tmp/nomatch.json"
expect spec_matches_nothing 1 'nothing' "$pock" compile "$model" --sparse "$tmp/nomatch.json" -o "$tmp/x.pock"
printf '{"version": 1, "train": [{"colour": 3}]}\n' >"$tmp/badkey.json"
expect spec_unknown_key 1 'colour' "$pock" compile "$model" --sparse "$tmp/badkey.json" -o "$tmp/x.pock"
expect missing_weights 1 'none\.pkw' "$pock" compile "$model" --weights "$tmp/none.pkw" -o "$tmp/x.pock"
expect train_missing_artifact 1 'absent\.pock' "$pock" train "$tmp/absent.pock" --data "$tmp/train.csv" --epochs 1
echo "not an artifact" >"$tmp/junk.pock"
expect train_junk_artifact 1 'junk\.pock' "$pock" train "$tmp/junk.pock" --data "$tmp/train.csv" --epochs 1
printf '1,2,3,4,0\n1,2,3,0\n' >"$tmp/ragged.csv"
expect data_ragged 1 'ragged\.csv' "$pock" eval "$tmp/m.pock" --data "$tmp/ragged.csv"
printf '1,2,3,4,7\n' >"$tmp/label.csv"
expect data_label_range 1 'label' "$pock" eval "$tmp/m.pock" --data "$tmp/label.csv"
expect data_missing 1 'gone\.csv' "$pock" eval "$tmp/m.pock" --data "$tmp/gone.csv"

# ---- parallel builds: 2 compilers into a fresh cache give an artifact that trains to the
# same weights as one compiler's (the artifacts differ only where the cache path shows)
for j in 1 2; do
  POCK_CACHE_DIR=$tmp/cache$j "$pock" compile "$model" --batch 8 -j $j -o "$tmp/j$j.pock" \
    >/dev/null 2>&1 && "$pock" train "$tmp/j$j.pock" --data "$tmp/train.csv" --epochs 2 \
    --no-shuffle --save "$tmp/j$j.pkw" >/dev/null 2>&1 || fail "jobs_$j" "compile or train"
done
n1=$(ls "$tmp/cache1"/*.o 2>/dev/null | wc -l) n2=$(ls "$tmp/cache2"/*.o 2>/dev/null | wc -l)
if cmp -s "$tmp/j1.pkw" "$tmp/j2.pkw" && [ "$n1" -gt 1 ] && [ "$n1" -eq "$n2" ]; then
  pass "jobs_2_same_weights ($n2 kernel objects)"
else fail jobs_2_same_weights "weights differ, or objects $n1 vs $n2"; fi

# ---- usage (exit 2) and help (exit 0)
expect compile_no_args 2 'MODEL' "$pock" compile
expect compile_no_output 2 '-o' "$pock" compile "$model"
expect compile_bad_stage 2 'bogus' "$pock" compile "$model" --dump-after bogus
expect compile_bad_option 2 'frobnicate' "$pock" compile "$model" --frobnicate -o "$tmp/x.pock"
expect compile_bad_jobs 2 '--jobs needs an integer in 1\.\.64' "$pock" compile "$model" --jobs 0 -o "$tmp/x.pock"
expect compile_bad_batch 2 'batch' "$pock" compile "$model" --batch 0 -o "$tmp/x.pock"
expect compile_bad_optimizer 2 'rmsprop' "$pock" compile "$model" --optimizer rmsprop -o "$tmp/x.pock"
expect compile_reinit_alone 2 'reinit' "$pock" compile "$model" --reinit 'fc2.*' -o "$tmp/x.pock"
expect train_no_epochs 2 'epochs' "$pock" train "$tmp/m.pock" --data "$tmp/train.csv"
expect train_no_data 2 'data' "$pock" train "$tmp/m.pock" --epochs 1
expect eval_train_option 2 'epochs' "$pock" eval "$tmp/m.pock" --data "$tmp/train.csv" --epochs 3
for c in compile train eval tune; do expect "help_$c" 0 'usage: pock' "$pock" $c --help; done
expect main_help_lists_compile 0 'compile MODEL' "$pock" --help

finish
