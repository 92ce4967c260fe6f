#!/bin/sh
# test_pock_rt.sh — `pock-rt` end to end: what it links, exit codes and messages, info,
# train / eval / run on the digits models, checkpoints and resume from the command line
# (bit-identical), refusals of foreign, damaged and misused checkpoints, and Ctrl-C.
# usage: test_pock_rt.sh POCK_RT POCK SOURCE_DIR
set -u
RT=$1
POCK=$2
SRC=$3
D=$SRC/examples/digits
T=$(mktemp -d /tmp/pk_pockrt_XXXXXX)
trap 'rm -rf "$T"' EXIT
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
show() { sed 's/^/    /' "$T/out" | head -n 15; }
# expect CODE WHAT CMD...: runs CMD (output in $T/out) and checks its exit status.
expect() {
  code=$1 what=$2
  shift 2
  "$@" >"$T/out" 2>&1
  rc=$?
  if [ "$rc" -eq "$code" ]; then pass "$what (exit $rc)"; else fail "$what: exit $rc, want $code"; show; fi
}
# has TEXT WHAT: the last command's output holds TEXT (a grep pattern).
has() {
  if grep -q -- "$1" "$T/out"; then pass "$2"; else fail "$2: output lacks '$1'"; show; fi
}
same() { # same FILE1 FILE2 WHAT
  if cmp -s "$1" "$2"; then pass "$3"; else fail "$3: $1 and $2 differ"; fi
}
S="--scale 0.0625"
unset POCK_TRUSTED_KEY # the unsigned artifacts below must load

for m in cnn mlp; do
  "$POCK" compile "$D/models/$m.json" --batch 32 -o "$T/$m.pock" >"$T/out" 2>&1 ||
    { echo "FAIL pock compile $m"; show; exit 1; }
done
"$POCK" compile "$D/models/mlp.json" --batch 16 --inference -o "$T/inf.pock" >"$T/out" 2>&1 ||
  { echo "FAIL pock compile --inference"; show; exit 1; }

# ---- what pock-rt needs at run time: no libpockrt.so, nothing of the compiler ----
if command -v readelf >/dev/null 2>&1; then
  bad=$(readelf -d "$RT" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' |
    grep -v -E '^(libc|libm|libdl|libpthread|libffi|libcjson|libsodium|ld-linux[-a-z0-9_]*)\.so' |
    grep -v -E '^lib(asan|ubsan|lsan)\.so' || true) # sanitizer runtimes in POCK_SANITIZE builds
  if [ -z "$bad" ]; then pass "pock-rt needs only libc, libm, libdl, libffi, cJSON, libsodium"
  else fail "pock-rt needs $bad"; fi
else
  echo "SKIP DT_NEEDED check: readelf not found"
fi

# ---- usage errors: exit 2 ----
expect 2 "no command" "$RT"
expect 2 "unknown command" "$RT" frobnicate
expect 2 "train without --epochs" "$RT" train "$T/cnn.pock" --data x.csv
expect 2 "train --epochs 0" "$RT" train "$T/cnn.pock" --data x.csv --epochs 0
expect 2 "eval takes no --epochs" "$RT" eval "$T/cnn.pock" --data x.csv --epochs 1
has "unknown option '--epochs'" "eval names the option"
expect 2 "--checkpoint-every without --checkpoint" "$RT" train "$T/cnn.pock" --data x --epochs 1 --checkpoint-every 5
expect 2 "--weights with --resume" "$RT" train "$T/cnn.pock" --data x --epochs 1 --weights w --resume c
expect 2 "two artifacts" "$RT" eval "$T/cnn.pock" "$T/mlp.pock" --data x
expect 2 "info without an artifact" "$RT" info
expect 2 "run --scores takes no value, --max-steps is train-only" "$RT" run "$T/cnn.pock" --data x --max-steps 3
expect 0 "--help" "$RT" --help
has "train MODEL.pock --data FILE --epochs N" "--help lists the commands"
expect 0 "train --help" "$RT" train --help
has "--resume C.ckpt" "train --help describes --resume"
expect 0 "--version" "$RT" --version
has "^pock-rt [0-9]" "--version prints the version"

# ---- errors: exit 1 with a message naming the thing ----
expect 1 "missing artifact" "$RT" info "$T/none.pock"
has "none.pock" "the message names the file"
printf 'junk' >"$T/junk.pock"
expect 1 "not an artifact" "$RT" eval "$T/junk.pock" --data "$D/target_val.csv"
has "bad magic" "the message says why"
expect 1 "missing data" "$RT" train "$T/cnn.pock" --data "$T/none.csv" --epochs 1
has "none.csv" "the message names the data file"
expect 1 "an inference artifact cannot train" "$RT" train "$T/inf.pock" --data "$D/target_val.csv" $S --epochs 1
has "inference" "the message says it is an inference artifact"

# ---- info ----
expect 0 "info" "$RT" info "$T/cnn.pock"
for k in "^format  *container v1, manifest v1" "^model id  *[0-9a-f]\{64\}" "^pock version  *0\." \
  "^target  *c" "^fingerprint  *arch" "^mode  *train" "^dtype  *f32" "^batch  *32" \
  "^input  *(32, 1, 8, 8)" "^output  *(32, 10)" "^optimizer  *sgd" "^regions  *arena [0-9]" \
  "^parameters  *8 tensors" "^kernels  *[0-9]" "workload [0-9a-f]\{16\}  record default" \
  "^externs  *none" "^sections  *manifest [0-9]* kernels [0-9]* weights" "^signer  *unsigned" \
  "^this device  *ok"; do
  has "$k" "info shows '$k'"
done
expect 0 "info --extract-kernels" "$RT" info "$T/cnn.pock" --extract-kernels "$T/k.so"
if [ "$(head -c 4 "$T/k.so" | od -An -c | tr -d ' ')" = "177ELF" ]; then pass "the extracted kernel object is an ELF file"
else fail "the extracted kernel object is not an ELF file"; fi

# ---- train, eval, run ----
expect 0 "train" "$RT" train "$T/cnn.pock" --data "$D/target_train.csv" --val "$D/target_val.csv" $S \
  --epochs 3 --seed 3 --save "$T/a.pkw" --metrics "$T/a.jsonl"
has "^epoch 3/3 loss [0-9.]* acc [0-9.]* val_loss" "train prints one line per epoch"
has "^trained 45 steps" "train prints the step count"
has "^epoch 3/3 .* ms/step [0-9.]* median [0-9.]*$" "an epoch line ends with the mean and median step time"
has "^trained 45 steps, ms/step [0-9.]* median [0-9.]*, peak RSS [1-9][0-9]* kB$" \
  "the last line has the mean and median step time and the peak RSS"
if [ "$(grep -c '"ms_per_step": [0-9.]*, "lr": [0-9.e-]*, "ms_median": [0-9.]*, "peak_rss_kb": [1-9][0-9]*}$' \
  "$T/a.jsonl")" -eq 3 ]; then pass "every metrics line has ms_median and peak_rss_kb after lr"
else fail "metrics lines without ms_median or peak_rss_kb:"; sed 's/^/    /' "$T/a.jsonl"; fi
expect 0 "eval with the trained weights" "$RT" eval "$T/cnn.pock" --data "$D/target_test.csv" $S --weights "$T/a.pkw"
has "^loss [0-9.]* accuracy [0-9.]* rows 222$" "eval prints loss, accuracy, rows"
eval_acc=$(sed -n 's/.*accuracy \([0-9.]*\).*/\1/p' "$T/out")
expect 0 "run" "$RT" run "$T/cnn.pock" --data "$D/target_test.csv" $S --weights "$T/a.pkw"
cp "$T/out" "$T/pred"
if [ "$(grep -c '^[0-9]$' "$T/pred")" -eq 222 ] && [ "$(wc -l <"$T/pred")" -eq 222 ]; then
  pass "run prints one class per row"
else fail "run printed $(wc -l <"$T/pred") lines"; fi
run_acc=$(sed 's/.*,//' "$D/target_test.csv" | paste -d ' ' "$T/pred" - |
  awk '{ n++; if ($1 == $2) c++ } END { printf "%.4f", c / n }')
if [ "$run_acc" = "$eval_acc" ]; then pass "run's predictions give eval's accuracy ($run_acc)"
else fail "run's accuracy $run_acc differs from eval's $eval_acc"; fi
expect 0 "run --scores" "$RT" run "$T/cnn.pock" --data "$D/target_test.csv" $S --scores
if awk 'NF != 11 { bad = 1 } END { exit bad }' "$T/out"; then pass "--scores prints the class and 10 scores"
else fail "--scores lines do not have 11 fields"; show; fi
expect 0 "run an inference artifact (batch 16, padded last batch)" "$RT" run "$T/inf.pock" --data "$D/target_test.csv" $S
if [ "$(wc -l <"$T/out")" -eq 222 ]; then pass "inference artifact: 222 predictions"; else fail "inference artifact: $(wc -l <"$T/out") lines"; fi
expect 0 "eval an inference artifact" "$RT" eval "$T/inf.pock" --data "$D/target_test.csv" $S
has "^loss nan accuracy" "an inference artifact has no loss"

# ---- checkpoints and resume: the same run, stopped and resumed twice ----
TR="--data $D/target_train.csv --val $D/target_val.csv $S --epochs 3 --seed 3"
expect 0 "train stopped by --max-steps" "$RT" train "$T/cnn.pock" $TR --checkpoint "$T/c.ckpt" \
  --checkpoint-every 4 --max-steps 20 --metrics "$T/b.jsonl"
has "^stopped after 20 steps; checkpoint saved to" "a stopped run says where its checkpoint is"
expect 0 "resume, stop again" "$RT" train "$T/cnn.pock" $TR --resume "$T/c.ckpt" --checkpoint "$T/c.ckpt" \
  --max-steps 7 --metrics "$T/b.jsonl"
has "^resumed from .*: epoch 2, step 5 of the epoch, 20 steps taken" "resume says where it continues"
expect 0 "resume to the end" "$RT" train "$T/cnn.pock" $TR --resume "$T/c.ckpt" --checkpoint "$T/c.ckpt" \
  --metrics "$T/b.jsonl" --save "$T/b.pkw"
has "^trained 18 steps" "the last part trains the remaining steps"
same "$T/a.pkw" "$T/b.pkw" "resumed weights equal the uninterrupted run's, byte for byte"
# timings and memory differ between runs: everything else must not
untimed='s/"ms_per_step": [0-9.]*, //; s/, "ms_median": [0-9.]*//; s/, "peak_rss_kb": [0-9]*//'
sed "$untimed" "$T/a.jsonl" >"$T/a.cmp"
sed "$untimed" "$T/b.jsonl" >"$T/b.cmp"
same "$T/a.cmp" "$T/b.cmp" "resumed losses and accuracies (%.17g) equal the uninterrupted run's"
expect 1 "a checkpoint of another artifact" "$RT" train "$T/mlp.pock" $TR --resume "$T/c.ckpt"
has "belongs to another model" "the message says it is another model's"
expect 1 "resume on other data" "$RT" train "$T/cnn.pock" --data "$D/target_val.csv" $S --epochs 3 --resume "$T/c.ckpt"
has "other training data" "the message says the data differs"
cp "$T/c.ckpt" "$T/bad.ckpt"
old=$(od -An -tu1 -j 300 -N 1 "$T/bad.ckpt" | tr -d ' ')
printf "\\$(printf '%03o' $(((old + 1) % 256)))" | dd of="$T/bad.ckpt" bs=1 seek=300 conv=notrunc 2>/dev/null
expect 1 "a damaged checkpoint" "$RT" train "$T/cnn.pock" $TR --resume "$T/bad.ckpt"
has "checksum mismatch" "the message says the file is damaged"
head -c 100 "$T/c.ckpt" >"$T/bad.ckpt"
expect 1 "a truncated checkpoint" "$RT" train "$T/cnn.pock" $TR --resume "$T/bad.ckpt"
has "truncated" "the message says the file is truncated"

# ---- Ctrl-C: stops after the current step, saves weights and checkpoint, exit 0 ----
"$RT" train "$T/cnn.pock" --data "$D/target_train.csv" $S --epochs 100000 --checkpoint "$T/i.ckpt" \
  --save "$T/i.pkw" >"$T/int.out" 2>&1 &
pid=$!
n=0
while ! grep -q "^epoch 1/" "$T/int.out" 2>/dev/null && [ $n -lt 300 ]; do sleep 0.1; n=$((n + 1)); done
kill -INT $pid
wait $pid
rc=$?
mv "$T/int.out" "$T/out"
if [ $rc -eq 0 ]; then pass "SIGINT: exit 0"; else fail "SIGINT: exit $rc"; show; fi
has "^interrupted after [0-9]* steps; weights saved to .*; checkpoint saved to" "SIGINT saves weights and checkpoint"
expect 0 "resume after SIGINT" "$RT" train "$T/cnn.pock" --data "$D/target_train.csv" $S --epochs 100000 \
  --resume "$T/i.ckpt" --max-steps 1
has "^resumed from" "the interrupted run resumes"

# ---- signed artifacts: info names the signer; --trusted-key admits only its own ----
if "$POCK" keygen -o "$T/k1" >"$T/out" 2>&1 && "$POCK" keygen -o "$T/k2" >>"$T/out" 2>&1 &&
  "$POCK" sign "$T/mlp.pock" --key "$T/k1.key" -o "$T/signed.pock" >>"$T/out" 2>&1; then
  id1=$(sed -n 's/.*k1.pub; key id \([0-9a-f]*\).*/\1/p' "$T/out")
  expect 0 "info on a signed artifact" "$RT" info "$T/signed.pock" --trusted-key "$T/k1.pub"
  has "^signer  *key id $id1" "info names the signer's key id"
  has "^trust  *signed by the trusted key $id1" "info says the trusted key signed it"
  expect 0 "train a signed artifact with its key trusted" "$RT" train "$T/signed.pock" \
    --data "$D/target_val.csv" $S --epochs 1 --trusted-key "$T/k1.pub"
  expect 1 "another trusted key refuses it" "$RT" train "$T/signed.pock" --data "$D/target_val.csv" $S \
    --epochs 1 --trusted-key "$T/k2.pub"
  has "signed by key $id1" "the refusal names the signer"
  expect 1 "a trusted key refuses an unsigned artifact" env POCK_TRUSTED_KEY="$T/k1.pub" \
    "$RT" eval "$T/mlp.pock" --data "$D/target_val.csv" $S
  has "not signed" "the refusal says it is unsigned"
else
  fail "pock keygen / pock sign"; show
fi

# ---- no compiler on PATH ----
expect 0 "train with an empty PATH" env PATH=/nonexistent "$RT" train "$T/mlp.pock" --data "$D/target_val.csv" $S --epochs 1

echo "$([ $fails -eq 0 ] && echo PASS || echo FAIL) test_pock_rt ($fails failures)"
[ $fails -eq 0 ]
