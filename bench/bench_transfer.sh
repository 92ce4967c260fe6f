#!/usr/bin/env bash
# bench_transfer.sh — transfer between shapes: on tasks never tuned before, does evo with a
# database of OTHER shapes' records (pk_tune_transfer: the cost model learns from them, the
# first batch holds the nearest shapes' best configs) reach 95% of its own from-scratch
# 300-trial best within 100 trials? For each seed: the donor tasks are tuned into one
# database (evo, DONOR_TRIALS each); then each target task is tuned from scratch (an empty
# database, SCRATCH_TRIALS) and with transfer (a copy of the donors' database,
# TRANSFER_TRIALS); the two bests, and as a control the from-scratch best within
# TRANSFER_TRIALS (what transfer adds over the preset and evo alone), are re-timed side by
# side in one process (bench/search_retime.c). A bench, not a test: it prints a table and never fails on a timing.
#
# Usage: [SEEDS="1 2 3"] [DONOR_TRIALS=100] [SCRATCH_TRIALS=300] [TRANSFER_TRIALS=100]
#        [MIN_MS=10] [BUILD_TIMEOUT=5] [RETIME_ROUNDS=15] [RETIME_STAT=best]
#        bench/bench_transfer.sh BUILD_DIR OUT_DIR DONOR.te... -- TARGET.te...
# (RETIME_STAT and the rest as bench/bench_search.sh. A database whose tuning finished
# (DB.done) is not tuned again: rerunning only re-times.) The tasks of docs/performance.md's
# run: donors bench/search_tasks/*.te bench/transfer_tasks/donors/*.te, targets
# bench/transfer_tasks/*.te.
set -euo pipefail
build=$1; out=$2; shift 2
donors=(); targets=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do donors+=("$1"); shift; done
[ $# -gt 0 ] && shift
targets=("$@")
if [ ${#donors[@]} -eq 0 ] || [ ${#targets[@]} -eq 0 ]; then
  echo "usage: bench_transfer.sh BUILD_DIR OUT_DIR DONOR.te... -- TARGET.te..." >&2; exit 2
fi
case ${RETIME_STAT:-best} in best|median) ;; *) echo "bench_transfer.sh: RETIME_STAT must be best or median, not '$RETIME_STAT'" >&2; exit 2;; esac
seeds=${SEEDS:-"1 2 3"}
nd=${DONOR_TRIALS:-100}; ns=${SCRATCH_TRIALS:-300}; nt=${TRANSFER_TRIALS:-100}
pock=$build/cli/pock
retime=$build/bench/search_retime
mkdir -p "$out"
tune() { # DB TE TRIALS SEED LOG [options]
  local db=$1 te=$2 n=$3 s=$4 log=$5; shift 5
  $pock tune "$te" --db "$db" --tuner evo --trials "$n" --seed "$s" --confirm 0 --timeout 5 \
    --build-timeout "${BUILD_TIMEOUT:-5}" --min-ms "${MIN_MS:-10}" "$@" >>"$log" 2>&1
}
echo "Re-timed GFLOP/s: the ${RETIME_STAT:-best} of ${RETIME_ROUNDS:-15} interleaved rounds per kernel." > "$out/table.md"
printf "\n| task | seed | scratch@%s | transfer@%s | transfer / scratch | scratch@%s (control) | transfer reached 95%% at trial | scratch reached 95%% at trial |\n|---|---|---|---|---|---|---|---|\n" "$ns" "$nt" "$nt" >> "$out/table.md"
for s in $seeds; do
  donor=$out/donors.$s.db
  if [ ! -f "$donor.done" ]; then
    rm -f "$donor" "$out/donors.$s.log"
    for te in "${donors[@]}"; do tune "$donor" "$te" "$nd" "$s" "$out/donors.$s.log"; done
    touch "$donor.done"
  fi
  for te in "${targets[@]}"; do
    name=$(basename "$te" .te)
    sc=$out/$name.scratch.$s.db; tr=$out/$name.transfer.$s.db
    [ -f "$sc.done" ] || { rm -f "$sc" "$out/$name.scratch.$s.log"; tune "$sc" "$te" "$ns" "$s" "$out/$name.scratch.$s.log" --no-transfer; touch "$sc.done"; }
    [ -f "$tr.done" ] || { rm -f "$tr" "$out/$name.transfer.$s.log"; cp "$donor" "$tr"; tune "$tr" "$te" "$nt" "$s" "$out/$name.transfer.$s.log"; touch "$tr.done"; }
    $retime --rounds "${RETIME_ROUNDS:-15}" "$te" "$sc:$ns" "$tr:$nt" "$sc:$nt" > "$out/$name.$s.retime"
    $pock db history "$sc" --te "$te" > "$out/$name.scratch.$s.history" 2>/dev/null || true
    $pock db history "$tr" --te "$te" > "$out/$name.transfer.$s.history" 2>/dev/null || true
    python3 - "$out/$name.$s.retime" "$out/$name.transfer.$s.history" "$out/$name.scratch.$s.history" \
      "$name" "$s" "${RETIME_STAT:-best}" >> "$out/table.md" <<'PY'
import sys, re
field = {"best": "max", "median": "gflops"}[sys.argv[6]]
scratch, transfer, control = [float(re.search(field + r"=([0-9.]+)", l).group(1)) for l in open(sys.argv[1])]
def reached(path):  # the first trial whose (tuner-measured) best reaches 95% of scratch's re-timed best
    best = 0.0
    for line in open(path):
        c = line.split()
        if len(c) < 7 or not c[0].isdigit() or c[3] != "ok" or c[4] != "schedule": continue
        best = max(best, float(c[6]))
        if best >= 0.95 * scratch: return c[0]
    return "—"
ratio = transfer / scratch if scratch else 0
print(f"| {sys.argv[4]} | {sys.argv[5]} | {scratch:.1f} | {transfer:.1f} | {100*ratio:.1f}% | {control:.1f} | {reached(sys.argv[2])} | {reached(sys.argv[3])} |")
PY
  done
done
# Per task, the mean over its seeds, and the verdict the issue asks for: transfer@100 >= 95%
# of scratch@300.
python3 - "$out/table.md" "$ns" "$nt" >> "$out/table.md" <<'PY'
import sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 8 and c[1].isdigit():
        rows[c[0]].append((float(c[2]), float(c[3]), float(c[5])))
ns, nt = sys.argv[2], sys.argv[3]
print()
print(f"| task | seeds | mean scratch@{ns} | mean transfer@{nt} | transfer / scratch | mean scratch@{nt} (control) | verdict |")
print("|---|---|---|---|---|---|---|")
for task, v in rows.items():
    n = len(v)
    sc, tr, co = (sum(x[i] for x in v) / n for i in range(3))
    verdict = "transfer reaches 95%" if tr >= 0.95 * sc else "transfer short of 95%"
    print(f"| {task} | {n} | {sc:.1f} | {tr:.1f} | {100 * tr / sc:.1f}% | {co:.1f} ({100 * co / sc:.1f}%) | {verdict} |")
PY
cat "$out/table.md"
