#!/usr/bin/env bash
# test_bad_values.sh — findings 9 and 11 at the command line: data an f32 model cannot
# hold (a CSV 1e39, an .npy f8 1e300, --scale 1e39) is refused naming file, row and column;
# a loss that becomes non-finite stops training with exit 1 and writes no weights; a .pkw
# with no tensors and an empty TE file are refused. Usage: test_bad_values.sh POCK SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
src=$2

# The 4-3-2 f32 MLP of test_compile_cli.sh and a separable data set for it.
awk 'BEGIN { srand(5); print "a,b,c,d,label";
  for (i = 0; i < 48; i++) { a = int(rand() * 17); b = int(rand() * 17); c = int(rand() * 17);
    d = int(rand() * 17); print a "," b "," c "," d "," (a + b > c + d ? 1 : 0) } }' >"$tmp/ok.csv"
expect compile 0 'wrote' "$pock" compile "$src/tests/data/graphs/mlp_small.json" --batch 8 -o "$tmp/m.pock"

# ---- finding 9: values that do not fit f32 were stored as inf and trained to NaN
printf 'a,b,c,d,label\n1,2,3,4,0\n5,1e39,7,8,1\n' >"$tmp/big.csv"
expect csv_1e39 1 'big\.csv:3: column 2: 1e\+39 does not fit the model.s f32' \
  "$pock" train "$tmp/m.pock" --data "$tmp/big.csv" --epochs 1 --save "$tmp/w1.pkw"
[ ! -e "$tmp/w1.pkw" ] && pass csv_1e39_no_weights || fail csv_1e39_no_weights "weights written"
expect scale_1e39 1 'ok\.csv:2: column 1: [0-9]+ \(scaled\) does not fit the model.s f32' \
  "$pock" train "$tmp/m.pock" --data "$tmp/ok.csv" --scale 1e39 --epochs 1
expect eval_1e39 1 'big\.csv:3: column 2' "$pock" eval "$tmp/m.pock" --data "$tmp/big.csv"
# X (2, 4) f8 with 1e300 as row 2's first feature; Y (2,) i4. Headers padded to 128 bytes.
npy_head() { printf '\223NUMPY\001\000\166\000%-117s\n' "{'descr': '$1', 'fortran_order': False, 'shape': $2, }"; }
one='\000\000\000\000\000\000\360\077' zero='\000\000\000\000\000\000\000\000'
{ npy_head '<f8' '(2, 4)'; printf "$one$one$one$one"'\234\165\000\210\074\344\067\176'"$zero$zero$zero"; } >"$tmp/x.npy"
{ npy_head '<i4' '(2,)'; printf '\000\000\000\000\001\000\000\000'; } >"$tmp/y.npy"
expect npy_1e300 1 'x\.npy: row 2, feature 1: 1e\+300 does not fit the model.s f32' \
  "$pock" train "$tmp/m.pock" --data "$tmp/x.npy:$tmp/y.npy" --epochs 1
# A learning rate that blows the weights up: the loss turns inf/NaN within a few steps.
expect nonfinite_loss 1 'the loss is -?(nan|inf).*training stopped, weights not saved' \
  "$pock" train "$tmp/m.pock" --data "$tmp/ok.csv" --epochs 5 --lr 1e30 --save "$tmp/w2.pkw"
[ ! -e "$tmp/w2.pkw" ] && pass nonfinite_loss_no_weights || fail nonfinite_loss_no_weights "weights written"

# ---- finding 11: a weights file with no tensors, an empty TE file
printf 'PKW1\000\000\000\000' >"$tmp/empty.pkw"
expect pkw_no_tensors 1 'empty\.pkw: holds no tensors' \
  "$pock" eval "$tmp/m.pock" --data "$tmp/ok.csv" --weights "$tmp/empty.pkw"
: >"$tmp/empty.te"
expect te_empty 1 'empty\.te: empty program' "$pock" te check "$tmp/empty.te"
printf '# only a comment\n\n' >"$tmp/comment.te"
expect te_comment_only 1 'comment\.te: empty program' "$pock" te check "$tmp/comment.te"

finish
