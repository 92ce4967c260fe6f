#!/bin/sh
# test_files_cli.sh — the file rules of `pock` and `pock-rt` end to end (issue 14): outputs
# never replace a FIFO, device, directory, dangling link or one of the command's inputs, and
# follow a symlink to its file (finding 2); no reader waits on a FIFO (4b); a configured
# trusted key that cannot be read refuses (8); a failed write to stdout or --metrics is an
# error (10); `pock train` is `pock-rt train` (checkpoints, resume, --trusted-key).
# Every command runs under `timeout`, so a reader that blocks fails instead of hanging.
# Nothing outside the scratch directory is written: /dev/null is never an output here.
# usage: test_files_cli.sh POCK POCK_RT SOURCE_DIR
set -u
P=$1
RT=$2
SRC=$3
D=$SRC/examples/digits
T=$(mktemp -d /tmp/pk_files_XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
fails=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
show() { sed 's/^/    /' "$T/out" | head -n 8; }
# expect CODE WHAT CMD...: runs CMD (stdout+stderr in $T/out, 30 s at most); checks the exit.
expect() {
  code=$1 what=$2
  shift 2
  timeout 30 "$@" >"$T/out" 2>&1 </dev/null
  rc=$?
  if [ "$rc" -eq "$code" ]; then pass "$what (exit $rc)"; else fail "$what: exit $rc, want $code"; show; fi
}
# full CODE WHAT CMD...: as expect, with stdout on /dev/full (stderr in $T/out).
full() {
  code=$1 what=$2
  shift 2
  timeout 30 "$@" >/dev/full 2>"$T/out" </dev/null
  rc=$?
  if [ "$rc" -eq "$code" ]; then pass "$what (exit $rc)"; else fail "$what: exit $rc, want $code"; show; fi
}
has() { # has TEXT WHAT: the last command's output holds TEXT (a grep -E pattern)
  if grep -qE -- "$1" "$T/out"; then pass "$2"; else fail "$2: output lacks '$1'"; show; fi
}
kind() { # kind PATH TEST WHAT: `test TEST PATH` holds (the path kept its kind)
  if test "$2" "$1"; then pass "$3"; else fail "$3: $1 is no longer test $2"; ls -la "$1"; fi
}
same() { # same FILE COPY WHAT: FILE is unchanged
  if cmp -s "$1" "$2"; then pass "$3"; else fail "$3: $1 changed"; fi
}
S="--scale 0.0625"
unset POCK_TRUSTED_KEY

cp "$D/models/mlp.json" "$T/m.json" && cp "$D/models/mlp.pkw" "$T/mlp.pkw"
cp "$D/target_val.csv" "$T/v.csv"
"$P" compile "$T/m.json" --batch 32 -o "$T/m.pock" >"$T/out" 2>&1 || { echo "FAIL compile"; show; exit 1; }
"$P" keygen -o "$T/k" >"$T/out" 2>&1 || { echo "FAIL keygen"; show; exit 1; }
for f in m.json m.pock v.csv k.key; do cp "$T/$f" "$T/$f.orig"; done
mkfifo "$T/fifo" && mkdir "$T/dir" && ln -s "$T/nowhere" "$T/dangling" || exit 1
head -n 3 "$SRC/tuning-logs/c-x86_64-avx2-znver3.jsonl" >"$T/three.jsonl"
"$P" db import "$T/t.db" "$T/three.jsonl" >"$T/out" 2>&1 || { echo "FAIL db"; show; exit 1; }
cp "$T/t.db" "$T/t.db.orig"

# ---- finding 2: what an output may be ----
expect 1 "compile -o FIFO refused" "$P" compile "$T/m.json" -o "$T/fifo"
has "fifo: is a FIFO" "the message names the FIFO"
kind "$T/fifo" -p "the FIFO is still a FIFO"
expect 1 "compile -o DIR refused" "$P" compile "$T/m.json" -o "$T/dir"
has "is a directory" "the message says directory"
expect 1 "compile -o dangling link refused" "$P" compile "$T/m.json" -o "$T/dangling"
has "dangling" "the message says dangling"
kind "$T/dangling" -L "the dangling link is kept"
if [ -e "$T/nowhere" ]; then fail "a file was made at the link's target"; else pass "nothing made at the target"; fi
# A device: a node of our own (as root) stands for /dev/null, so a broken build harms nothing.
if mknod "$T/null" c 1 3 2>/dev/null; then
  expect 1 "compile -o a device refused" "$P" compile "$T/m.json" -o "$T/null"
  has "character device" "the message says device"
  kind "$T/null" -c "the device is still a device"
  expect 1 "train --save a device refused" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --save "$T/null"
  kind "$T/null" -c "the device is still a device after train"
else
  echo "note: mknod not permitted; the device case is covered by test_rt_file's check of /dev/null"
fi
mkdir "$T/real" && echo old >"$T/real/a.pock" && ln -s real/a.pock "$T/link.pock"
expect 0 "compile -o a symlink writes its file" "$P" compile "$T/m.json" -o "$T/link.pock"
kind "$T/link.pock" -L "the link is still a link"
same "$T/m.pock" "$T/real/a.pock" "the link's file holds the artifact"
if ls "$T" "$T/real" | grep -q '\.tmp\.'; then fail "a temp file was left"; else pass "no temp file left"; fi
# Outputs that are inputs.
expect 1 "compile m.json -o m.json refused" "$P" compile "$T/m.json" -o "$T/m.json"
has "same file as the input" "the message says it is an input"
same "$T/m.json" "$T/m.json.orig" "the model is intact"
ln "$T/m.json" "$T/hard.json"
expect 1 "compile -o a hard link of the model refused" "$P" compile "$T/m.json" -o "$T/hard.json"
expect 1 "sign -o the secret key refused" "$P" sign "$T/m.pock" --key "$T/k.key" -o "$T/k.key"
same "$T/k.key" "$T/k.key.orig" "the secret key is intact"
expect 1 "train --save the artifact refused" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --save "$T/m.pock"
same "$T/m.pock" "$T/m.pock.orig" "the artifact is intact"
expect 1 "train --save the data refused" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --save "$T/v.csv"
expect 1 "train --metrics the data refused" "$RT" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --metrics "$T/v.csv"
same "$T/v.csv" "$T/v.csv.orig" "the data is intact"
expect 1 "train --checkpoint = --save refused" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --save "$T/x" --checkpoint "$T/x"
expect 1 "report -o the database refused" "$P" report --db "$T/t.db" -o "$T/t.db"
same "$T/t.db" "$T/t.db.orig" "the database is intact"
expect 1 "info --extract-kernels the artifact refused" "$RT" info "$T/m.pock" --extract-kernels "$T/m.pock"
same "$T/m.pock" "$T/m.pock.orig" "the artifact is intact after info"
# Documented in-place updates still work.
cp "$T/m.pock" "$T/s.pock"
expect 0 "sign in place" "$P" sign "$T/s.pock" --key "$T/k.key"
expect 0 "report -o a new file" "$P" report --db "$T/t.db" -o "$T/r.txt"

# ---- finding 4b: no reader waits on a FIFO ----
fifo_refused() { # fifo_refused WHAT CMD...: exit 1 at once, naming the FIFO
  expect 1 "$@"
  has "fifo.*FIFO" "$1: the message names the FIFO"
}
fifo_refused "compile reads a FIFO model" "$P" compile "$T/fifo" -o "$T/x.pock"
fifo_refused "compile --sparse FIFO" "$P" compile "$T/m.json" --sparse "$T/fifo" -o "$T/x.pock"
fifo_refused "compile --weights FIFO" "$P" compile "$T/m.json" --weights "$T/fifo" -o "$T/x.pock"
fifo_refused "te check FIFO" "$P" te check "$T/fifo"
fifo_refused "train a FIFO artifact" "$P" train "$T/fifo" --data "$T/v.csv" --epochs 1
fifo_refused "train --data FIFO" "$P" train "$T/m.pock" --data "$T/fifo" --epochs 1
fifo_refused "eval --weights FIFO" "$P" eval "$T/m.pock" --data "$T/v.csv" --weights "$T/fifo"
fifo_refused "train --resume FIFO" "$RT" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --resume "$T/fifo"
fifo_refused "sign --key FIFO" "$P" sign "$T/m.pock" --key "$T/fifo" -o "$T/x.pock"
fifo_refused "verify --trusted-key FIFO" "$P" verify "$T/s.pock" --trusted-key "$T/fifo"
fifo_refused "db import FIFO" "$P" db import "$T/t.db" "$T/fifo"
fifo_refused "pock-rt info FIFO" "$RT" info "$T/fifo"

# ---- finding 8: a configured key that cannot be read refuses ----
POCK_TRUSTED_KEY=$T/gone.pub expect 1 "an unreadable POCK_TRUSTED_KEY refuses" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1
has "trusted key" "the message names the trusted key"
POCK_TRUSTED_KEY=$T/dangling expect 1 "a dangling POCK_TRUSTED_KEY refuses" "$RT" eval "$T/m.pock" --data "$T/v.csv" $S

# ---- finding 10: a write that fails is an error ----
full 1 "eval > /dev/full" "$P" eval "$T/m.pock" --data "$T/v.csv" $S
has "standard output" "the message says standard output"
full 1 "pock-rt eval > /dev/full" "$RT" eval "$T/m.pock" --data "$T/v.csv" $S
full 1 "pock-rt info > /dev/full" "$RT" info "$T/m.pock"
full 1 "te c > /dev/full" "$P" te c "$SRC/examples/te/matmul_512.te"
full 1 "compile --dump-after > /dev/full" "$P" compile "$T/m.json" --dump-after load
full 1 "db stats > /dev/full" "$P" db stats "$T/t.db"
full 1 "db export > /dev/full" "$P" db export "$T/t.db"
full 1 "--help > /dev/full" "$P" --help
expect 1 "train --metrics /dev/full" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --metrics /dev/full --save "$T/f.pkw"
has "/dev/full: write: No space" "the message names the metrics file"
if [ -s "$T/f.pkw" ]; then pass "the weights were still saved"; else fail "no weights after a metrics error"; fi
# --metrics may be a pipe; one nobody reads is refused instead of waited on.
expect 1 "--metrics FIFO without a reader" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --metrics "$T/fifo"
has "no reader" "the message says no reader"
cat "$T/fifo" >"$T/metrics.out" &
sleep 0.2
expect 0 "--metrics into a pipe" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 2 --metrics "$T/fifo"
wait
if [ "$(grep -c '"epoch"' "$T/metrics.out")" -eq 2 ]; then pass "two epochs through the pipe"; else fail "pipe got: $(cat "$T/metrics.out")"; fi

# ---- pock train is pock-rt train ----
"$P" train --help | sed 's/pock train/X train/g' >"$T/h1"
"$RT" train --help | sed 's/pock-rt train/X train/g' >"$T/h2"
same "$T/h1" "$T/h2" "pock train --help is pock-rt train --help"
expect 0 "pock train --checkpoint, stopped by --max-steps" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 2 --checkpoint "$T/c.ckpt" --max-steps 5
has "checkpoint saved" "a checkpoint was saved"
expect 0 "pock train --resume C --checkpoint C (in place)" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 2 --resume "$T/c.ckpt" --checkpoint "$T/c.ckpt"
has "resumed from" "pock train resumed"
"$P" keygen -o "$T/other" >/dev/null 2>&1
expect 1 "pock train --trusted-key refuses an unsigned artifact" "$P" train "$T/m.pock" --data "$T/v.csv" $S --epochs 1 --trusted-key "$T/other.pub"
has "not signed" "the message says not signed"
expect 0 "pock eval --trusted-key accepts its signer" "$P" eval "$T/s.pock" --data "$T/v.csv" $S --trusted-key "$T/k.pub"

echo "test_files_cli: $fails failure(s)"
[ "$fails" -eq 0 ]
