#!/usr/bin/env bash
# test_print_memory.sh — `pock compile --print-memory` prints the kernels' workspace and the
# backward-pass memory, and its figures equal numbers worked out here (below).
# Usage: test_print_memory.sh POCK SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
model=$2/tests/data/graphs/mlp_small.json

expect compile_print_memory 0 'bp memory' "$pock" compile "$model" --batch 8 --print-memory \
  --dump-after artifact
# The printed figures against numbers worked out here. Workspace: the largest of the
# kernels' workspaces, which the manifest (printed by --dump-after artifact) lists one by
# one; it was 0 before the driver passed them to the plan. BP memory of mlp_small (4-3-2,
# f32) at batch 8 with AdamW, by hand: saved activations h1 (8x3: relu's gradient and
# fc2's weight gradient read it), fc2.out (8x2) and cross_entropy's stages row max M
# and row sum S (8 each) and count C (1), which the loss gradient reads = 96+64+32+32+4;
# gradients of fc2.out, fc2.mm (8x2), fc2.bias (2), fc2.weight (2x3), h1, fc1.out, fc1.mm
# (8x3), fc1.bias (3), fc1.weight (3x4) = 4*(16+16+2+6+24+24+24+3+12); optimizer state m
# and v of every param = 2*4*(12+3+6+2). Copy elimination (docs/passes.md, on by default)
# aliases the gradients of fc2.mm and fc1.mm (each the bias add's dY): no storage of their
# own, so those two count only with --passes none.
mem_line() { awk -v k="$1" '$1 == k { print $2; exit }' "$tmp/out"; }
ws_max=$(grep -Eo '"workspace":[[:space:]]*[0-9]+' "$tmp/out" | grep -Eo '[0-9]+$' | sort -n | tail -1)
ws=$(mem_line workspace)
[ -n "$ws" ] && [ "$ws" = "$ws_max" ] && [ "$ws" -gt 0 ] && pass print_memory_workspace ||
  fail print_memory_workspace "printed '$ws', kernels' largest '$ws_max'"
want_bp="$((96 + 64 + 32 + 32 + 4)) $((4 * (16 + 2 + 6 + 24 + 24 + 3 + 12))) $((2 * 4 * (12 + 3 + 6 + 2)))"
got_bp="$(mem_line saved_activations) $(mem_line gradients) $(mem_line optimizer_state)"
[ "$got_bp" = "$want_bp" ] && pass print_memory_bp || fail print_memory_bp "got '$got_bp', want '$want_bp'"
a=($want_bp)
[ "$(mem_line bp_total)" = "$((a[0] + a[1] + a[2]))" ] && pass print_memory_bp_total ||
  fail print_memory_bp_total "$(grep bp_total "$tmp/out")"
grads_none=$("$pock" compile "$model" --batch 8 --print-memory --passes none --dump-after memplan 2>&1 |
  awk '$1 == "gradients" { print $2; exit }')
[ "$grads_none" = "$((4 * (16 + 16 + 2 + 6 + 24 + 24 + 24 + 3 + 12)))" ] && pass print_memory_bp_no_passes ||
  fail print_memory_bp_no_passes "gradients with --passes none: '$grads_none'"
sum=0
for r in arena params state io workspace; do sum=$((sum + $(mem_line $r))); done
[ "$(mem_line total)" = "$sum" ] && pass print_memory_total || fail print_memory_total "total $(mem_line total), sum $sum"
# Before the kernels are scheduled the workspace is unknown, and the table says so.
expect print_memory_early 0 'workspace: the kernels are not scheduled yet' "$pock" compile "$model" \
  --batch 8 --print-memory --dump-after memplan
finish
