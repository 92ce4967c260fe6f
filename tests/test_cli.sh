#!/usr/bin/env bash
# test_cli.sh — the `pock` command end to end: every example TE runs and matches the
# interpreter, --bench prints kernel and OpenBLAS GFLOP/s, and bad input gives a clear
# message with exit 1 (usage errors exit 2). Usage: test_cli.sh POCK SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
src=$2

expect version 0 '^pock [0-9]+\.[0-9]+\.[0-9]+' -- "$pock" --version
expect no_args 2 'usage' -- "$pock"
expect unknown_command 2 "unknown command 'frobnicate'" -- "$pock" frobnicate
expect te_no_file 2 'expected FILE' -- "$pock" te run
expect te_bad_seed 2 'seed' -- "$pock" te run x.te --seed abc
expect te_missing_file 1 'cannot|No such file' -- "$pock" te check "$tmp/none.te"

for f in "$src"/examples/te/*.te; do
  name=$(basename "$f" .te)
  expect "run_$name" 0 '^ok$' -- "$pock" te run "$f" --seed 3
  expect "check_$name" 0 '^# pock-te canonical v1' -- "$pock" te check "$f"
done
expect c_has_descriptor 0 'pkrt_module' -- "$pock" te c "$src/examples/te/matmul_512.te"
expect c_dump_lower 0 '^func k0' -- "$pock" te c "$src/examples/te/matmul_512.te" --dump-after lower
expect bench_matmul 0 'openblas cblas_sgemm' -- "$pock" te run "$src/examples/te/matmul_512.te" --bench
expect run_scheduled 0 'schedule: .*13 steps' -- "$pock" te run "$src/examples/te/matmul_512.te" \
  --schedule "$src/examples/schedules/matmul_512.json" --threads 2
expect c_scheduled 0 'parallel_for' -- "$pock" te c "$src/examples/te/matmul_512.te" \
  --schedule "$src/examples/schedules/matmul_512.json"
expect bad_threads 2 'threads' -- "$pock" te run x.te --threads 0
printf '{"version":1,"steps":[{"step":"split","stage":"t2","axis":"i9","factor":4}]}' >"$tmp/bad_axis.json"
expect schedule_illegal 1 "step 0 \\(split\\).*i9" -- "$pock" te run "$src/examples/te/matmul_512.te" --schedule "$tmp/bad_axis.json"
printf '{"version":1,"steps":[{"step":"split"' >"$tmp/trunc.json"
expect schedule_malformed 1 'schedule trace' -- "$pock" te run "$src/examples/te/matmul_512.te" --schedule "$tmp/trunc.json"
expect schedule_with_check 2 'schedule' -- "$pock" te check "$src/examples/te/matmul_512.te" --schedule "$tmp/trunc.json"

# Bad input: clear message naming the problem, exit 1, never a crash.
bad() { # bad NAME PATTERN TEXT
  printf '%s\n' "$3" >"$tmp/$1.te"
  expect "bad_$1" 1 "$2" -- "$pock" te run "$tmp/$1.te"
}
bad syntax ':2:[0-9]+' $'A = placeholder((4,), f32)\nB = compute((4,), (i) => A[i] +)'
bad unknown_tensor "unknown.*'Q'" $'A = placeholder((4,), f32)\nB = compute((4,), (i) => Q[i])'
bad out_of_bounds 'leave' $'A = placeholder((4,), f32)\nB = compute((4,), (i) => A[i + 1])'
bad arity 'ind' $'A = placeholder((4, 4), f32)\nB = compute((4,), (i) => A[i])'
bad unused_axis 'unused' $'A = placeholder((4,), f32)\nk = reduce_axis(4)\nB = compute((4,), (i) => A[i])'
bad dtype 'f64' $'A = placeholder((4,), f32)\nB = placeholder((4,), f64)\nC = compute((4,), (i) => A[i] + B[i])'
bad negative_shape 'shape|extent|positive' $'A = placeholder((-4,), f32)'
bad overflow_shape 'overflow' $'A = placeholder((4611686018427387904, 4), f32)'
printf '\x00\xff\x80garbage' >"$tmp/binary.te"
expect bad_binary 1 'error' -- "$pock" te check "$tmp/binary.te"

# A user's names never reach generated C (convention 11): only Pock-made identifiers.
printf 'secret_name = placeholder((4,), f32)\nother_name = compute((4,), (i) => secret_name[i] * 2.0)\n' >"$tmp/names.te"
if "$pock" te c "$tmp/names.te" | grep -q 'secret_name\|other_name'; then
  fail names_not_in_c "user names leaked into generated C"
else
  pass names_not_in_c
fi

finish
