#!/usr/bin/env bash
# test_sparse_search_cli.sh — `pock sparse-search` on the digits MLP with one-epoch runs:
# a budget no scheme fits names the smallest possible (the head alone's BP memory, as
# `pock compile --print-memory` prints it); the chosen spec fits the budget by the same
# measure; a rerun with the cache trains nothing and chooses the same; bad options and
# files are refused; a model's normalizations are candidates (scale and shift together).
# With HTML=FILE in the environment the report is also written there.
# Usage: test_sparse_search_cli.sh POCK SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
d=$2/examples/digits
model=$d/models/mlp.json
data=(--data "$d/target_train.csv" --val "$d/target_val.csv" --scale 0.0625)
fast=(--epochs 1 --verify 2 --no-timing --cache "$tmp/c.json")
bp_of() { # the bp_total `pock compile --print-memory` prints for spec $1
  "$pock" compile "$model" --sparse "$1" --print-memory --dump-after memplan 2>/dev/null |
    awk '$1 == "bp_total" { print $2; exit }'
}

head_bp=$(bp_of "$d/specs/mlp_head.json")
expect no_fit 1 "no scheme fits --budget-memory 1000 bytes: the smallest possible is $head_bp bytes" \
  "$pock" sparse-search "$model" "${data[@]}" "${fast[@]}" --budget-memory 1000 -o "$tmp/s.json"
[ ! -e "$tmp/s.json" ] && pass no_fit_no_spec || fail no_fit_no_spec "a spec was written"

budget=$(($(bp_of "$d/specs/mlp_full.json") / 3))
expect search 0 'wrote .*s\.json \([1-9][0-9]* fine-tunes run' "$pock" sparse-search "$model" \
  "${data[@]}" "${fast[@]}" --budget-memory "$budget" -o "$tmp/s.json" --report "$tmp/r.txt" \
  --html "${HTML:-$tmp/r.html}"
chosen=$(grep '^chosen' "$tmp/out")
bp=$(bp_of "$tmp/s.json")
[ -n "$bp" ] && [ "$bp" -le "$budget" ] && pass spec_fits || fail spec_fits "bp '$bp' > budget $budget"
grep -q "^chosen" "$tmp/r.txt" && pass report_file || fail report_file "no chosen line"

expect rerun_cached 0 'wrote .*\(0 fine-tunes run, [1-9][0-9]* from the cache' "$pock" sparse-search \
  "$model" "${data[@]}" "${fast[@]}" --budget-memory "$budget" -o "$tmp/s2.json"
[ "$(grep '^chosen' "$tmp/out")" = "$chosen" ] && cmp -s "$tmp/s.json" "$tmp/s2.json" &&
  pass rerun_same || fail rerun_same "$(grep '^chosen' "$tmp/out") vs $chosen"

# the evolutionary search (forced: every space above 1 scheme) from the same cache trains
# only the verifications, and finds what the exhaustive search found
expect evolutionary 0 'evolutionary search over [0-9]+ schemes' "$pock" sparse-search "$model" \
  "${data[@]}" "${fast[@]}" --budget-memory "$budget" --exact-max 1 -o "$tmp/s3.json"
[ "$(grep '^chosen' "$tmp/out")" = "$chosen" ] && pass evolutionary_same_choice ||
  fail evolutionary_same_choice "$(grep '^chosen' "$tmp/out") vs $chosen"
grep -q 'wrote .*(0 fine-tunes run, [1-9][0-9]* from the cache' "$tmp/out" &&
  pass evolutionary_uses_cache || fail evolutionary_uses_cache "$(grep wrote "$tmp/out")"
# norms: normnet (a layer norm, an RMS norm, a group norm, then the head) reads the digits'
# 64 features; each norm is one candidate, and a spec that trains one lists its params
norms=$2/tests/fixtures/train/graphs/normnet.json
expect norm_candidates 0 'ln\.weight ln\.bias +norm' "$pock" sparse-search "$norms" "${data[@]}" \
  --epochs 1 --verify 3 --no-timing --cache "$tmp/n.json" --budget-memory 100000000 -o "$tmp/n.spec"
grep -Eq '^ +rms\.weight +norm ' "$tmp/out" && grep -Eq '^ +gn\.weight gn\.bias +norm ' "$tmp/out" &&
  grep -q '3 candidates' "$tmp/out" && pass norm_candidates_all || fail norm_candidates_all "$(grep -E 'norm |candidates' "$tmp/out")"
python3 - "$tmp/n.spec" "$tmp/out" <<'PY' && pass norm_spec || fail norm_spec "$(cat "$tmp/n.spec")"
import json, re, sys
spec = json.load(open(sys.argv[1]))
chosen = re.search(r"^chosen \(\*\): (.*) —", open(sys.argv[2]).read(), re.M).group(1).split()
params = [p for r in spec["train"] for p in ([r["params"]] if isinstance(r["params"], str) else r["params"])]
assert sorted(params) == sorted(["fc.weight", "fc.bias"] + chosen), (params, chosen)
PY
expect no_val 2 'required' "$pock" sparse-search "$model" --data "$d/target_train.csv" \
  --budget-memory 1000 -o "$tmp/x.json"
expect bad_budget 2 'budget-memory needs an integer' "$pock" sparse-search "$model" "${data[@]}" \
  --budget-memory -5 -o "$tmp/x.json"
echo 'not json' >"$tmp/bad.json"
expect bad_cache 1 'bad.json: not a sparse-search cache' "$pock" sparse-search "$model" \
  "${data[@]}" --epochs 1 --no-timing --cache "$tmp/bad.json" --budget-memory "$budget" -o "$tmp/x.json"
grep -q 'not json' "$tmp/bad.json" && pass bad_cache_kept || fail bad_cache_kept "overwritten"
expect out_is_input 1 'target_val.csv' "$pock" sparse-search "$model" "${data[@]}" "${fast[@]}" \
  --budget-memory "$budget" -o "$d/target_val.csv"
finish
