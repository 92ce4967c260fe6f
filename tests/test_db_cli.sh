#!/usr/bin/env bash
# test_db_cli.sh — `pock db` end to end: outputs of best/history/stats, export → import →
# identical export, export --top, merge twice → identical, and exit codes (0 ok, 1 error, 2 usage) with
# clear messages. Usage: test_db_cli.sh POCK TUNEDB_FIXTURE SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
fixture=$2
src=$3
unset POCK_FAKE_FINGERPRINT

here=$src/examples/te/matmul_512.te
elsewhere=$src/examples/te/softmax.te
db=$tmp/tune.db
if ! "$fixture" "$db" "$here" "$elsewhere"; then
  echo "FAIL fixture: could not write $db"
  exit 1
fi

# ---- reading
expect stats 0 '2 workload/target pairs' -- "$pock" db stats "$db"
expect stats_failures 0 'crash=1 timeout=1 wrong=1' -- "$pock" db stats "$db"
expect stats_winner 0 'matmul.* generated +-?$|matmul.*generated +crash' -- "$pock" db stats "$db"
expect best_all 0 'exact +schedule' -- "$pock" db best "$db"
expect best_here 0 '^[0-9a-f]{12} +matmul_512x128[x0-9]*_f32 +c +[0-9a-f]{12} +exact +schedule .* 2 +' \
  -- "$pock" db best "$db" --te "$here" --target c
expect best_generic 0 'generic +schedule' -- "$pock" db best "$db" --te "$elsewhere" --target c
wl=$("$pock" db best "$db" --te "$here" --target c | awk 'NR == 2 { print $1 }')
expect best_prefix 0 'matmul_512x128[x0-9]*_f32' -- "$pock" db best "$db" --workload "$wl"
expect history 0 '^ +6 .* wrong ' -- "$pock" db history "$db" --te "$here"
lines=$("$pock" db history "$db" --workload "$wl" | awk 'NR > 1 { print $1 }' | tr '\n' ' ')
if [ "$lines" = "1 2 3 4 5 6 " ]; then pass history_order; else fail history_order "trials: $lines"; fi
expect history_target 0 'ok' -- "$pock" db history "$db" --te "$here" --target c
POCK_FAKE_FINGERPRINT='{"isa":["nothing"]}' expect history_other_device 1 'no records' -- \
  "$pock" db history "$db" --te "$here" --target c
expect best_none 1 'no successful record' -- "$pock" db best "$db" --te "$src/examples/te/int_index.te"

# ---- export, import, merge
"$pock" db export "$db" >"$tmp/a.jsonl" || fail export "exit $?"
if [ "$(wc -l <"$tmp/a.jsonl")" -eq 8 ] && head -1 "$tmp/a.jsonl" | grep -q '"jsonl_version":1'; then
  pass export_lines
else
  fail export_lines "$(head -c 200 "$tmp/a.jsonl")"
fi
expect import 0 '8 new records \(of 8\), 1 new runs, 2 new targets, 2 new workloads' -- "$pock" db import "$tmp/b.db" "$tmp/a.jsonl"
"$pock" db export "$tmp/b.db" >"$tmp/b.jsonl"
if cmp -s "$tmp/a.jsonl" "$tmp/b.jsonl"; then pass export_import_export; else fail export_import_export "exports differ"; fi
expect import_again 0 '0 new records \(of 8\)' -- "$pock" db import "$tmp/b.db" "$tmp/a.jsonl"
expect import_stdin 0 '0 new records \(of 8\)' -- "$pock" db import "$tmp/b.db" - <"$tmp/a.jsonl"
expect merge 0 'tune.db: 8 new records \(of 8\)' -- "$pock" db merge "$tmp/m.db" "$db"
expect merge_again 0 'tune.db: 0 new records \(of 8\), 0 new runs' -- "$pock" db merge "$tmp/m.db" "$db" "$tmp/b.db"
"$pock" db export "$tmp/m.db" >"$tmp/m.jsonl"
if cmp -s "$tmp/a.jsonl" "$tmp/m.jsonl"; then pass merge_export; else fail merge_export "exports differ"; fi

# --top 1: per workload, target and kind the fastest OK record — a subset of the full export,
# every line OK, and it holds what `db best` names
"$pock" db export "$db" --top 1 >"$tmp/top.jsonl" || fail export_top "exit $?"
top_lines=$(wc -l <"$tmp/top.jsonl")
top_ok=$(grep -c '"status":"ok"' "$tmp/top.jsonl")
best_id=$("$pock" db best "$db" --workload "$wl" | awk 'NR == 2 { print $NF }')
if [ "$top_lines" -ge 2 ] && [ "$top_lines" -lt 8 ] && [ "$top_ok" -eq "$top_lines" ] &&
  [ -z "$(grep -vxFf "$tmp/a.jsonl" "$tmp/top.jsonl")" ] && grep -q "\"id\":\"$best_id" "$tmp/top.jsonl"; then
  pass export_top
else
  fail export_top "$top_lines lines, $top_ok ok, best $best_id"
fi
expect export_top_zero 2 '--top needs a count' -- "$pock" db export "$db" --top 0
expect export_top_other_verb 2 '--top goes with export' -- "$pock" db stats "$db" --top 3

{ head -1 "$tmp/a.jsonl"; echo '{"jsonl_version":1,"id":'; } >"$tmp/bad.jsonl"
expect import_malformed 1 'bad.jsonl:2: not valid JSON' -- "$pock" db import "$tmp/c.db" "$tmp/bad.jsonl"
expect import_nothing_half 0 '0 workload/target pairs' -- "$pock" db stats "$tmp/c.db"
expect import_missing 1 'cannot open' -- "$pock" db import "$tmp/c.db" "$tmp/none.jsonl"

# ---- errors and usage
expect missing_db 1 'none.db: cannot open tuning database' -- "$pock" db stats "$tmp/none.db"
[ -e "$tmp/none.db" ] && fail missing_db_created "a reader created the file" || pass missing_db_not_created
printf 'just some text, not SQLite at all\n%.0s' {1..100} >"$tmp/text.db"
expect text_db 1 'text.db: not a Pock tuning database' -- "$pock" db stats "$tmp/text.db"
expect merge_text 1 'text.db: not a Pock tuning database' -- "$pock" db merge "$tmp/m.db" "$tmp/text.db"
head -c 3000 "$db" >"$tmp/cut.db"
expect truncated 1 'cut.db' -- "$pock" db export "$tmp/cut.db"
expect unknown_workload 1 'no workload ffff' -- "$pock" db best "$db" --workload ffff
# a GPU target's fingerprint is its device's: without the CUDA driver, an error naming why
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  expect cuda_target 1 "cuda -arch=sm_90': .*this machine has none.*libcuda" -- \
    "$pock" db best "$db" --target 'cuda -arch=sm_90'
fi
expect bad_target 2 "unknown option '-O3'" -- "$pock" db best "$db" --target 'c -O3'
expect no_verb 2 'expected a verb' -- "$pock" db
expect bad_verb 2 "unknown verb 'frob'" -- "$pock" db frob x.db
expect no_db 2 'expected DB' -- "$pock" db stats
expect history_needs_workload 2 'expected --workload' -- "$pock" db history "$db"
expect both_selectors 2 'not both' -- "$pock" db best "$db" --workload ab --te "$here"
expect stats_no_target 2 'go with best and history' -- "$pock" db stats "$db" --target c
expect import_needs_file 2 'expected DB FILE' -- "$pock" db import "$db"
expect merge_needs_other 2 'expected DB OTHER' -- "$pock" db merge "$db"
expect unknown_option 2 "unknown option '--frob'" -- "$pock" db stats "$db" --frob
expect option_value 2 '--te needs a value' -- "$pock" db best "$db" --te
expect help_lists_db 0 'db merge DB OTHER' -- "$pock" --help

finish
