#!/usr/bin/env bash
# bench_search.sh — search efficiency: does `evo` reach 95% of the best config that 1000
# random trials find, within 300 trials? For each task and seed: random (1000 trials) and
# evo (300 trials) from empty databases; then the random best at 300 and at 1000 trials and
# the evo best at 300 are re-timed side by side in one process (bench/search_retime.c).
# A bench, not a test: it prints a table and never fails on a timing.
#
# Usage: [SEEDS="1 2 3"] [MIN_MS=50] [BUILD_TIMEOUT=20] [RETIME_ROUNDS=7] [RETIME_STAT=best]
#        bench/bench_search.sh BUILD_DIR OUT_DIR TASK.te...
# (MIN_MS: the tuners' repeat time per candidate; the final re-timing always uses 50 ms per
# round, RETIME_ROUNDS interleaved rounds per kernel. RETIME_STAT picks which round speaks
# for a kernel: "best", the fastest round (default), or "median". This VM drifts between a
# fast and a slow state for seconds at a time, and the slow state costs some kernels 40 %
# and others 20 % (docs/performance.md), so a median over rounds measures the machine's
# state as much as the kernel; the fastest round is each kernel's unperturbed speed.
# BUILD_TIMEOUT: a candidate whose compile takes longer is a failed trial, for both tuners.
# A database whose tuning finished (DB.done) is not tuned again: rerunning only re-times.)
# Seeds are the outer loop, so a run cut short still has whole seeds for every task.
# The tasks of docs/performance.md's runs are in bench/search_tasks/.
set -euo pipefail
build=$1; out=$2; shift 2
seeds=${SEEDS:-"1 2 3"}
pock=$build/cli/pock
retime=$build/bench/search_retime
case ${RETIME_STAT:-best} in best|median) ;; *) echo "bench_search.sh: RETIME_STAT must be best or median, not '$RETIME_STAT'" >&2; exit 2;; esac
mkdir -p "$out"
echo "Re-timed GFLOP/s: the ${RETIME_STAT:-best} of ${RETIME_ROUNDS:-7} interleaved rounds per kernel." > "$out/table.md"
printf "\n| task | seed | random@300 | random@1000 | evo@300 | evo/random@1000 | hard (r300 < 95%%) | evo reached 95%% at trial |\n|---|---|---|---|---|---|---|---|\n" >> "$out/table.md"
for s in $seeds; do
  for te in "$@"; do
    name=$(basename "$te" .te)
    r=$out/$name.random.$s.db; e=$out/$name.evo.$s.db
    [ -f "$r.done" ] || { rm -f "$r"; $pock tune "$te" --db "$r" --tuner random --trials 1000 --seed "$s" --timeout 5 --build-timeout "${BUILD_TIMEOUT:-20}" --min-ms "${MIN_MS:-50}" >"$out/$name.random.$s.log" 2>&1; touch "$r.done"; }
    [ -f "$e.done" ] || { rm -f "$e"; $pock tune "$te" --db "$e" --tuner evo --trials 300 --seed "$s" --timeout 5 --build-timeout "${BUILD_TIMEOUT:-20}" --min-ms "${MIN_MS:-50}" >"$out/$name.evo.$s.log" 2>&1; touch "$e.done"; }
    $retime --rounds "${RETIME_ROUNDS:-7}" "$te" "$r:300" "$r:1000" "$e:300" > "$out/$name.$s.retime"
    # the first evo trial whose (tuner-measured) best reaches 95% of random's re-timed best
    $pock db history "$e" --te "$te" > "$out/$name.evo.$s.history" 2>/dev/null || true
    python3 - "$out/$name.$s.retime" "$out/$name.evo.$s.history" "$name" "$s" "${RETIME_STAT:-best}" >> "$out/table.md" <<'PY'
import sys, re
field = {"best": "max", "median": "gflops"}[sys.argv[5]]
g = [float(re.search(field + r"=([0-9.]+)", l).group(1)) for l in open(sys.argv[1])]
r300, r1000, e300 = g
first = "—"
best = 0.0
for line in open(sys.argv[2]):
    c = line.split()
    if len(c) < 7 or not c[0].isdigit() or c[3] != "ok" or c[4] != "schedule": continue
    t, gf = int(c[0]), float(c[6])
    best = max(best, gf)
    if first == "—" and best >= 0.95 * r1000: first = str(t)
ratio = e300 / r1000 if r1000 else 0
print(f"| {sys.argv[3]} | {sys.argv[4]} | {r300:.1f} | {r1000:.1f} | {e300:.1f} | {100*ratio:.1f}% | {'yes' if r300 < 0.95*r1000 else 'no'} | {first} |")
PY
  done
done
# Per task, the mean over its seeds of the re-timed bests, and the verdict the issue asks
# for: evo@300 >= 95% of random@1000 on tasks that are hard for random (r300 < 95% r1000).
python3 - "$out/table.md" >> "$out/table.md" <<'PY'
import sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    c = [x.strip() for x in line.strip().strip("|").split("|")]
    if len(c) == 8 and c[1].isdigit():
        rows[c[0]].append((float(c[2]), float(c[3]), float(c[4])))
print()
print("| task | seeds | mean random@300 | mean random@1000 | mean evo@300 | evo@300 / random@1000 | hard for random | verdict |")
print("|---|---|---|---|---|---|---|---|")
for task, v in rows.items():
    n = len(v)
    r300, r1000, e300 = (sum(x[i] for x in v) / n for i in range(3))
    hard = r300 < 0.95 * r1000
    verdict = ("evo reaches 95%" if e300 >= 0.95 * r1000 else "evo short of 95%") if hard else "not hard: does not count"
    print(f"| {task} | {n} | {r300:.1f} | {r1000:.1f} | {e300:.1f} | {100 * e300 / r1000:.1f}% | {'yes' if hard else 'no'} | {verdict} |")
PY
cat "$out/table.md"
