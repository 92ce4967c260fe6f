#!/usr/bin/env bash
# test_tune_cli.sh — `pock tune` and `pock report` end to end on a small matmul: records
# land in the database, --resume never re-measures and stops at --trials in total, kill -9
# in the middle of tuning keeps every committed record, two tuners on one database lose
# nothing, every report format is produced, and a model's --time-budget holds (loading
# included) with a predicted step time. Usage: test_tune_cli.sh POCK SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
src=$2
te=$src/tests/data/matmul_small.te
records() { "$pock" db export "$1" 2>/dev/null | wc -l; }
fast=(--min-ms 2 --timeout 20 --batch 4 --seed 7)

db=$tmp/t.db
if "$pock" tune "$te" --db "$db" --trials 8 "${fast[@]}" >"$tmp/out1" 2>&1; then
  n=$(records "$db")
  if [ "$n" -eq 8 ]; then pass tune_records; else fail tune_records "expected 8 records, got $n"; fi
else
  fail tune_runs "$(tail -5 "$tmp/out1")"
fi
grep -q 'best .* GFLOP/s' "$tmp/out1" && pass tune_reports_best || fail tune_reports_best "$(tail -3 "$tmp/out1")"

# --resume goes on to 12 in total: 4 new records, none measured twice.
"$pock" tune "$te" --db "$db" --trials 12 --resume "${fast[@]}" >"$tmp/out2" 2>&1
n=$(records "$db")
[ "$n" -eq 12 ] && pass resume_to_total || fail resume_to_total "expected 12 records, got $n: $(tail -3 "$tmp/out2")"
"$pock" tune "$te" --db "$db" --trials 12 --resume "${fast[@]}" >"$tmp/out3" 2>&1
n=$(records "$db")
[ "$n" -eq 12 ] && grep -q '0 new records' "$tmp/out3" && pass resume_nothing_left ||
  fail resume_nothing_left "expected no new records, got $n: $(tail -2 "$tmp/out3")"

# kill -9 halfway: every committed record stays; --resume does not re-measure them.
kdb=$tmp/k.db
"$pock" tune "$te" --db "$kdb" --trials 40 "${fast[@]}" >"$tmp/out4" 2>&1 &
pid=$!
for _ in $(seq 1 600); do
  [ -f "$kdb" ] && [ "$(records "$kdb")" -ge 6 ] && break
  sleep 0.1
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
pkill -9 -P "$pid" 2>/dev/null
before=$(records "$kdb")
if [ "$before" -ge 6 ] && [ "$before" -lt 40 ]; then pass kill9_keeps_records; else fail kill9_keeps_records "records after kill: $before"; fi
"$pock" tune "$te" --db "$kdb" --trials 40 --resume "${fast[@]}" >"$tmp/out5" 2>&1
after=$(records "$kdb")
new=$(grep -o '[0-9]* new records' "$tmp/out5" | grep -o '^[0-9]*')
[ "$after" -eq 40 ] && [ "${new:-x}" -eq $((40 - before)) ] && pass kill9_resume_no_remeasure ||
  fail kill9_resume_no_remeasure "before $before after $after new ${new:-?}: $(tail -2 "$tmp/out5")"

# Two tuners on one database at once lose nothing.
cdb=$tmp/c.db
"$pock" tune "$te" --db "$cdb" --trials 10 --min-ms 2 --batch 4 --seed 1 >"$tmp/c1" 2>&1 &
p1=$!
"$pock" tune "$te" --db "$cdb" --trials 10 --min-ms 2 --batch 4 --seed 2 >"$tmp/c2" 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
n1=$(grep -o '[0-9]* new records' "$tmp/c1" | grep -o '^[0-9]*')
n2=$(grep -o '[0-9]* new records' "$tmp/c2" | grep -o '^[0-9]*')
n=$(records "$cdb")
[ "$r1" -eq 0 ] && [ "$r2" -eq 0 ] && [ "$n" -eq $((n1 + n2)) ] && pass concurrent_tuners ||
  fail concurrent_tuners "exit $r1/$r2, records $n, reported ${n1:-?}+${n2:-?}"

# A model within --time-budget: the budget counts from the start and cuts the last batch
# short (the deadline is wall-clock, so the 6 s of slack are process exit, not speed);
# nothing cut off is recorded; the predicted step time is printed.
bdb=$tmp/budget.db
start=$(date +%s%N)
"$pock" tune "$src/examples/digits/models/mlp.json" --db "$bdb" --time-budget 4 --min-ms 2 >"$tmp/b1" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
[ "$rc" -eq 0 ] && [ "$ms" -lt 10000 ] && pass model_time_budget_holds ||
  fail model_time_budget_holds "exit $rc after $ms ms for a 4 s budget: $(tail -3 "$tmp/b1")"
grep -q '^predicted step [0-9.]* -> [0-9.]* ms' "$tmp/b1" && pass model_predicted_step ||
  fail model_predicted_step "$(tail -2 "$tmp/b1")"
! "$pock" db export "$bdb" 2>/dev/null | grep -q 'not measured' && pass budget_cut_not_recorded ||
  fail budget_cut_not_recorded "a record says 'not measured'"
# The model's step from the database: per kernel share, untuned vs tuned, step before/after
# (a matmul row: plain, or fused with its epilogue or SGD update by the fuse pass).
mlp=$src/examples/digits/models/mlp.json
"$pock" report --db "$bdb" --model "$mlp" >"$tmp/m.txt" 2>&1 &&
  grep -q '^model .*: [0-9]* kernels; step [0-9.]* ms untuned -> [0-9.]* ms tuned' "$tmp/m.txt" &&
  grep -Eq '^(fused\()?matmul' "$tmp/m.txt" && pass report_model_text || fail report_model_text "$(head -3 "$tmp/m.txt")"
"$pock" report --db "$bdb" --model "$mlp" --format html -o "$tmp/m.html" &&
  grep -q '<table id="kernels">' "$tmp/m.html" && ! grep -q 'http' "$tmp/m.html" &&
  pass report_model_html || fail report_model_html "no kernel table or an external URL"
"$pock" report --db "$bdb" --model "$mlp" --format csv >/dev/null 2>&1; [ $? -eq 2 ] &&
  pass report_model_format_usage || fail report_model_format_usage "exit code"

for f in text csv json html; do
  if "$pock" report --db "$db" --format $f -o "$tmp/r.$f" && [ -s "$tmp/r.$f" ]; then pass "report_$f"; else fail "report_$f" "no output"; fi
done
grep -q '<svg class="chart"' "$tmp/r.html" && ! grep -q 'http' "$tmp/r.html" && pass report_html_self_contained ||
  fail report_html_self_contained "no chart or an external URL"
"$pock" report --db "$tmp/none.db" >/dev/null 2>&1; [ $? -eq 1 ] && pass report_missing_db || fail report_missing_db "exit code"
"$pock" tune "$te" >/dev/null 2>&1; [ $? -eq 2 ] && pass tune_usage || fail tune_usage "exit code"
printf 'A = placeholder((4,), f32)\nB = compute((4,), (i) => A[i + 1])\n' >"$tmp/bad.te"
"$pock" tune "$tmp/bad.te" --db "$tmp/b.db" >/dev/null 2>&1; [ $? -eq 1 ] && pass tune_bad_te || fail tune_bad_te "exit code"

finish
