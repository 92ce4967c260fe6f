#!/usr/bin/env bash
# test_reliability_cli.sh — regression tests of the reliability findings that live in the
# compiler and the loader: a graph whose backward reads a tensor twice (the 7-node chain
# fc → tanh → mul(t, t) → tanh → mul(t, t) → fc, once a false "reads before it is
# produced"), a kernel object cut short inside a well-formed unsigned artifact (SIGBUS in
# dlopen), a tensor too large for the interpreter and the compiler out of memory (both
# aborted). Usage: test_reliability_cli.sh POCK POCK_RT ARTIFACT_TOOL
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
pockrt=$2
tool=$3

w() { # N values of a weight, deterministic and small
  python3 -c "import sys; n=int(sys.argv[1]); print(','.join('%.3f' % (((i * 37) % 17 - 8) / 40) for i in range(n)))" "$1"
}
cat >"$tmp/chain.json" <<JSON
{"format": "pock-graph", "version": 1,
 "inputs": [{"name": "x", "shape": ["N", 8]}],
 "params": [{"name": "fc1.weight", "shape": [8, 8], "init": [$(w 64)]},
            {"name": "fc2.weight", "shape": [4, 8], "init": [$(w 32)]}],
 "nodes": [
  {"name": "fc1", "op": "matmul", "inputs": ["x", "fc1.weight"], "output": "h", "attrs": {"trans_b": true}},
  {"name": "t0", "op": "tanh", "inputs": ["h"], "output": "t0.y"},
  {"name": "m0", "op": "mul", "inputs": ["t0.y", "t0.y"], "output": "m0.y"},
  {"name": "t1", "op": "tanh", "inputs": ["m0.y"], "output": "t1.y"},
  {"name": "m1", "op": "mul", "inputs": ["t1.y", "t1.y"], "output": "m1.y"},
  {"name": "fc2", "op": "matmul", "inputs": ["m1.y", "fc2.weight"], "output": "z", "attrs": {"trans_b": true}}],
 "output": "z"}
JSON
expect chain_full_update 0 'wrote .*chain.pock' -- "$pock" compile "$tmp/chain.json" --batch 4 -o "$tmp/chain.pock"
printf '0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,1\n0.8,0.7,0.6,0.5,0.4,0.3,0.2,0.1,2\n0,0,0,0,1,1,1,1,3\n1,0,1,0,1,0,1,0,0\n' >"$tmp/d.csv"
expect chain_trains 0 'loss' -- "$pock" train "$tmp/chain.pock" --data "$tmp/d.csv" --epochs 2

# A kernels section that is a valid ELF cut in half, in an unsigned artifact whose
# checksums are right: refused with a message by every command that loads it.
if [ -s "$tmp/chain.pock" ]; then
  "$tool" extract "$tmp/chain.pock" manifest "$tmp/m.json" &&
  "$tool" extract "$tmp/chain.pock" kernels "$tmp/k.so" &&
  "$tool" extract "$tmp/chain.pock" weights "$tmp/w.bin" &&
  head -c $(($(stat -c %s "$tmp/k.so") / 2)) "$tmp/k.so" >"$tmp/k_cut.so" &&
  "$tool" pack "$tmp/cut.pock" manifest="$tmp/m.json" kernels="$tmp/k_cut.so" weights="$tmp/w.bin" ||
    fail truncated_kernels "could not build the damaged artifact"
  expect truncated_kernels_rt_eval 1 'truncated' -- "$pockrt" eval "$tmp/cut.pock" --data "$tmp/d.csv"
  expect truncated_kernels_eval 1 'truncated' -- "$pock" eval "$tmp/cut.pock" --data "$tmp/d.csv"
  expect truncated_kernels_train 1 'truncated' -- "$pock" train "$tmp/cut.pock" --data "$tmp/d.csv" --epochs 1
fi

# (2^31 - 1)^2 elements: beyond the interpreter's storage, an error and exit 1.
cat >"$tmp/big.te" <<'TE'
A = placeholder((2147483647, 2147483647), f32)
B = compute((2147483647, 2147483647), (i, j) => A[i, j] * 2.0)
TE
expect te_run_huge 1 'more than .* of reference storage' -- "$pock" te run "$tmp/big.te"

# Out of memory in the compiler: one message and exit 1, not an assertion. The limit is
# found by search, since what the process needs to start differs between builds.
oom=""
for kb in 6000 8000 10000 14000 20000; do
  out=$(ulimit -v $kb; "$pock" compile "$tmp/chain.json" --batch 64 -o "$tmp/oom.pock" 2>&1)
  rc=$?
  case "$out" in *"out of memory"*) oom="$rc: $out"; break ;; esac
  case "$out" in *"internal error"*|*Abort*) oom="$rc: $out"; break ;; esac
done
case "$oom" in
  "1: pock: out of memory"*) pass compile_out_of_memory ;;
  "") echo "note: no address-space limit between 6 and 20 MB made compile run out of memory"
      pass compile_out_of_memory_not_reached ;;
  *) fail compile_out_of_memory "$oom" ;;
esac

finish
