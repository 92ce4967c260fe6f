#!/usr/bin/env bash
# test_labels_optim_cli.sh — integer labels with ignore_index and the optimizer features
# through `pock compile` and `pock-rt train`: gradient accumulation + global clipping +
# warmup trains, and a run stopped in the middle of an accumulation group resumes to
# bit-identical weights (the accumulators are optimizer state, in the checkpoint); CSV
# labels equal to ignore_index are accepted; bad flags are refused.
#   test_labels_optim_cli.sh POCK POCK_RT SOURCE_DIR
pock=$1 rt=$2 src=$3
. "$(dirname "$0")/cli_test_lib.sh"
fx=$src/tests/fixtures/train/optim
model=optim_accum2_clip_warmup_adamw
cp "$fx/$model.json" "$fx/$model.pkw" "$tmp/"
# 10 rows of 64 features and a label (last column); row 4 is ignored (-100)
awk 'BEGIN { for (r = 0; r < 10; r++) { line = ""; for (f = 0; f < 64; f++)
  line = line sprintf("%.3f,", ((r * 31 + f * 7) % 17) / 16.0);
  print line (r == 3 ? -100 : (r * 3) % 10) } }' >"$tmp/d.csv"

expect compile 0 'wrote' "$pock" compile "$tmp/$model.json" --batch 4 -o "$tmp/a.pock"
expect train_full 0 'trained 9 steps' "$rt" train "$tmp/a.pock" --data "$tmp/d.csv" \
  --epochs 3 --save "$tmp/full.pkw"
expect stop_mid_group 0 'stopped after 3 steps' "$rt" train "$tmp/a.pock" --data "$tmp/d.csv" \
  --epochs 3 --max-steps 3 --checkpoint "$tmp/c.ckpt"
expect resume 0 'trained 6 steps' "$rt" train "$tmp/a.pock" --data "$tmp/d.csv" --epochs 3 \
  --resume "$tmp/c.ckpt" --checkpoint "$tmp/c.ckpt" --save "$tmp/res.pkw"
if cmp -s "$tmp/full.pkw" "$tmp/res.pkw"; then pass resume_mid_group_identical
else fail resume_mid_group_identical "weights differ after resuming inside a group"; fi
expect warmup_past_cosine 1 'warmup_steps 5: must be in' "$rt" train "$tmp/a.pock" \
  --data "$tmp/d.csv" --epochs 1 --warmup-steps 5
expect warmup_zero 2 '--warmup-steps needs an integer' "$rt" train "$tmp/a.pock" \
  --data "$tmp/d.csv" --epochs 1 --warmup-steps 0
sed 's/,-100$/,-7/' "$tmp/d.csv" >"$tmp/bad.csv"
expect label_not_ignore_index 1 'label -7 is out of range' "$rt" train "$tmp/a.pock" \
  --data "$tmp/bad.csv" --epochs 1
expect accum_zero 2 '--accum-steps needs an integer' "$pock" compile "$tmp/$model.json" \
  --accum-steps 0 -o "$tmp/b.pock"
finish
