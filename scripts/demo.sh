#!/usr/bin/env bash
# demo.sh — the main job: sparse fine-tuning of the digits models (examples/digits/). For
# the CNN and the MLP: pretrain on digits 0-4, then fine-tune on digits 5-9 with six
# sparse-update schemes, pick each scheme's learning rate on the validation split, and
# print test accuracy, ms/step, the planned arena and the trained parameter count.
#
#   scripts/demo.sh                 # installs what is missing, builds, runs (~10 min, 2 cores)
#   DEMO_MODELS=mlp DEMO_LRS="0.03 0.1" DEMO_FT_EPOCHS=5 scripts/demo.sh   # a quick look
#
# Logs and artifacts go to $BUILD_DIR/demo/ (default build/demo/).
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${BUILD_DIR:-build}
MODELS=${DEMO_MODELS:-cnn mlp}
SCHEMES=${DEMO_SCHEMES:-head bias_head last2 partial25_bias_head partial25_head_localbias full}
LRS=${DEMO_LRS:-0.003 0.01 0.03 0.1}
PRE_EPOCHS=${DEMO_PRE_EPOCHS:-60}
PRE_LR=${DEMO_PRE_LR:-0.05}
FT_EPOCHS=${DEMO_FT_EPOCHS:-30}
JOBS=${DEMO_JOBS:-2}          # fine-tunes run side by side, one thread each
SEED=0
DATA=examples/digits
OUT=$BUILD_DIR/demo
# Pixels are 0..16 in the committed CSVs; the models see them in [0, 1].
SCALE=0.0625
# SGD with momentum 0.9 and weight decay 1e-3 for pretraining and fine-tuning alike, batch 32.
OPT=(--batch 32 --optimizer sgd --momentum 0.9 --weight-decay 1e-3)

if [ -z "${DEMO_NO_BUILD:-}" ]; then
  scripts/install-deps.sh
  BUILD_DIR=$BUILD_DIR scripts/build.sh
fi
POCK=$BUILD_DIR/cli/pock
[ -x "$POCK" ] || { echo "demo: $POCK is missing (build failed?)" >&2; exit 1; }
mkdir -p "$OUT"
RESULTS=$OUT/results.txt
: >"$RESULTS"
# Prints a line and keeps it in $RESULTS (the tables, for the README).
say() { printf "$@" | tee -a "$RESULTS"; }

# Runs a command with its output in a log; on failure shows the log's end and stops.
run() {
  local log=$1
  shift
  if ! "$@" >"$log" 2>&1; then
    echo "demo: failed: $*" >&2
    tail -n 20 "$log" >&2
    return 1
  fi
}

# The value after word $2 on the last line of $1 that has it ("val_acc 0.93" -> 0.93).
field() { awk -v k="$2" '{for (i = 1; i < NF; i++) if ($i == k) v = $(i + 1)} END {print v}' "$1"; }

# Trained elements: the params marked "train" after the sparse stage, partial channel
# slices counted as (numel / C) * S.
trained_params() {
  awk '/ param / && / train/ {
         s = $0; sub(/^[^(]*\(/, "", s); sub(/\).*$/, "", s); n = split(s, d, /, */)
         numel = 1; for (i = 1; i <= n; i++) if (d[i] != "") numel *= d[i]
         if (match($0, /channels=\[0,[0-9]+\)/)) {
           c = substr($0, RSTART + 12, RLENGTH - 13); numel = numel / d[2] * c
         }
         total += numel
       } END {printf "%d\n", total}' "$1"
}

finetune() { # model scheme lr
  local m=$1 s=$2 lr=$3 tag="$1-$2-$3"
  run "$OUT/$tag.train.log" "$POCK" train "$OUT/$m-$s.pock" --data "$DATA/target_train.csv" \
    --val "$DATA/target_val.csv" --epochs "$FT_EPOCHS" --lr "$lr" --scale "$SCALE" \
    --seed "$SEED" --threads 1 --save "$OUT/$tag.pkw"
}

start=$(date +%s)
for m in $MODELS; do
  case $m in
  cnn) head='fc.*' title=CNN ;;
  mlp) head='fc3.*' title=MLP ;;
  *) echo "demo: unknown model '$m' (cnn, mlp)" >&2; exit 2 ;;
  esac
  model=$DATA/models/$m.json

  echo "== $title: pretrain on digits 0-4 ($PRE_EPOCHS epochs, lr $PRE_LR, full update)"
  run "$OUT/$m-source.compile.log" "$POCK" compile "$model" "${OPT[@]}" -o "$OUT/$m-source.pock"
  run "$OUT/$m-source.train.log" "$POCK" train "$OUT/$m-source.pock" \
    --data "$DATA/source_train.csv" --val "$DATA/source_val.csv" --epochs "$PRE_EPOCHS" \
    --lr "$PRE_LR" --scale "$SCALE" --seed "$SEED" --threads 1 --save "$OUT/$m-pretrained.pkw"
  say '   source val acc %s, ms/step %s\n' "$(field "$OUT/$m-source.train.log" val_acc)" \
    "$(field "$OUT/$m-source.train.log" ms/step)"

  echo "== $title: fine-tune on digits 5-9, head '$head' re-initialized ($FT_EPOCHS epochs, lr in $LRS)"
  for s in $SCHEMES; do
    spec=$DATA/specs/${m}_$s.json
    run "$OUT/$m-$s.compile.log" "$POCK" compile "$model" --weights "$OUT/$m-pretrained.pkw" \
      --reinit "$head" --sparse "$spec" "${OPT[@]}" --print-memory -o "$OUT/$m-$s.pock"
    run "$OUT/$m-$s.sparse.log" "$POCK" compile "$model" --sparse "$spec" "${OPT[@]}" \
      --dump-after sparse
  done
  for s in $SCHEMES; do
    for lr in $LRS; do
      finetune "$m" "$s" "$lr" &
      while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n; done
    done
  done
  wait # any failed fine-tune has already printed its log

  say '\n%-26s %6s %9s %9s %14s %14s\n' "$title scheme" lr "test acc" ms/step \
    "arena bytes" "trained params"
  for s in $SCHEMES; do
    best_lr='' best=-1
    for lr in $LRS; do
      acc=$(field "$OUT/$m-$s-$lr.train.log" val_acc)
      if [ -z "$acc" ]; then
        echo "demo: no val_acc in $OUT/$m-$s-$lr.train.log" >&2
        exit 1
      fi
      if awk -v a="$acc" -v b="$best" 'BEGIN {exit !(a > b)}'; then best=$acc best_lr=$lr; fi
    done
    tag=$m-$s-$best_lr
    run "$OUT/$tag.eval.log" "$POCK" eval "$OUT/$m-$s.pock" --data "$DATA/target_test.csv" \
      --weights "$OUT/$tag.pkw" --scale "$SCALE"
    say '%-26s %6s %9s %9s %14s %14s\n' "$s" "$best_lr" \
      "$(field "$OUT/$tag.eval.log" accuracy)" "$(field "$OUT/$tag.train.log" ms/step)" \
      "$(awk '$1 == "arena" {print $2; exit}' "$OUT/$m-$s.compile.log")" \
      "$(trained_params "$OUT/$m-$s.sparse.log")"
  done
  echo
done
echo "demo: done in $(($(date +%s) - start)) s; tables in $RESULTS, logs beside it"
