#!/usr/bin/env bash
# sparse_search_digits.sh — issue 22's acceptance run on the digits models: pretrain on
# digits 0-4 (as scripts/demo.sh), search a scheme with `pock sparse-search` under a
# budget of 1/3 of the full update's BP memory, then fine-tune the searched scheme and
# every hand-written scheme of examples/digits/specs/ the demo's way (30 epochs at each lr
# of LRS, the lr with the best target_val accuracy kept) and print test accuracy, BP
# memory and whether the scheme fits the budget, with the search's wall time.
#
#   scripts/sparse_search_digits.sh            # the CNN (a few minutes on 2 cores)
#   SS_MODEL=mlp scripts/sparse_search_digits.sh
#   SS_VERIFY_LRS=0.003,0.01,0.03,0.1 scripts/...   # the search's verification sweeps the lr too
#
# Everything goes to $BUILD_DIR/sparse-search-digits/ (default build/...).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
M=${SS_MODEL:-cnn}
LRS=${SS_LRS:-0.003 0.01 0.03 0.1}
SEARCH_LR=${SS_SEARCH_LR:-0.03}
EPOCHS=${SS_EPOCHS:-10}       # each contribution run
FT_EPOCHS=${SS_FT_EPOCHS:-30} # verification and the final fine-tunes
VERIFY_LRS=()
[ -n "${SS_VERIFY_LRS:-}" ] && VERIFY_LRS=(--verify-lrs "$SS_VERIFY_LRS")
DATA=examples/digits
OUT=$BUILD_DIR/sparse-search-digits
POCK=$BUILD_DIR/cli/pock
SCALE=0.0625
OPT=(--batch 32 --optimizer sgd --momentum 0.9 --weight-decay 1e-3)
case $M in
cnn) head='fc.*' ;;
mlp) head='fc3.*' ;;
*) echo "sparse_search_digits: unknown model '$M' (cnn, mlp)" >&2; exit 2 ;;
esac
[ -x "$POCK" ] || { echo "sparse_search_digits: $POCK is missing (build first)" >&2; exit 1; }
mkdir -p "$OUT"
model=$DATA/models/$M.json
field() { awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) v = $(i + 1)} END {print v}' "$1"; }
bp_of() { "$POCK" compile "$model" --sparse "$1" "${OPT[@]}" --print-memory --dump-after memplan \
  2>/dev/null | awk '$1 == "bp_total" { print $2; exit }'; }

if [ ! -f "$OUT/$M-pretrained.pkw" ]; then
  echo "== pretrain $M on digits 0-4 (60 epochs, lr 0.05)"
  "$POCK" compile "$model" "${OPT[@]}" -o "$OUT/$M-source.pock" >/dev/null
  "$POCK" train "$OUT/$M-source.pock" --data "$DATA/source_train.csv" --val "$DATA/source_val.csv" \
    --epochs 60 --lr 0.05 --scale $SCALE --seed 0 --save "$OUT/$M-pretrained.pkw" >"$OUT/$M-source.log"
fi
full=$(bp_of "$DATA/specs/${M}_full.json")
budget=$((full / 3))
echo "== sparse-search: budget $budget bytes (1/3 of the full update's $full)"
start=$(date +%s.%N)
"$POCK" sparse-search "$model" --weights "$OUT/$M-pretrained.pkw" --reinit "$head" \
  --data "$DATA/target_train.csv" --val "$DATA/target_val.csv" --scale $SCALE "${OPT[@]}" \
  --lr "$SEARCH_LR" --budget-memory "$budget" --epochs "$EPOCHS" --verify-epochs "$FT_EPOCHS" \
  "${VERIFY_LRS[@]}" --seed 0 --cache "$OUT/$M.cache.json" -o "$OUT/${M}_searched.json" --report "$OUT/$M-report.txt" \
  --html "$OUT/$M-report.html" >"$OUT/$M-search.log"
wall=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}')
grep '^chosen' "$OUT/$M-search.log"

printf '\n%-26s %6s %9s %10s %5s\n' "$M scheme" lr "test acc" "bp bytes" fits
for s in searched head bias_head last2 partial25_bias_head partial25_head_localbias full; do
  spec=$DATA/specs/${M}_$s.json
  [ "$s" = searched ] && spec=$OUT/${M}_searched.json
  "$POCK" compile "$model" --weights "$OUT/$M-pretrained.pkw" --reinit "$head" --sparse "$spec" \
    "${OPT[@]}" -o "$OUT/$M-$s.pock" >/dev/null
  best=-1 best_lr=
  for lr in $LRS; do
    "$POCK" train "$OUT/$M-$s.pock" --data "$DATA/target_train.csv" --val "$DATA/target_val.csv" \
      --epochs "$FT_EPOCHS" --lr "$lr" --scale $SCALE --seed 0 --save "$OUT/$M-$s-$lr.pkw" \
      >"$OUT/$M-$s-$lr.log"
    acc=$(field "$OUT/$M-$s-$lr.log" val_acc)
    if awk -v a="$acc" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$acc best_lr=$lr; fi
  done
  "$POCK" eval "$OUT/$M-$s.pock" --data "$DATA/target_test.csv" --weights "$OUT/$M-$s-$best_lr.pkw" \
    --scale $SCALE >"$OUT/$M-$s.eval.log"
  bp=$(bp_of "$spec")
  printf '%-26s %6s %9s %10s %5s\n' "$s" "$best_lr" "$(field "$OUT/$M-$s.eval.log" accuracy)" "$bp" \
    "$([ "$bp" -le "$budget" ] && echo yes || echo no)"
done
echo "search wall time ${wall} s (budget $budget bytes); report: $OUT/$M-report.txt, .html"
