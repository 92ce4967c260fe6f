#!/usr/bin/env bash
# test_sign_cli.sh — `pock keygen`, `pock sign`, `pock verify` end to end on a compiled MLP,
# and `pock train`/`pock eval` (libpockrt's pkrt_model_open) with a trusted key from
# POCK_TRUSTED_KEY: signed loads, unsigned/wrong key/tampered are refused; exit codes 0
# success, 1 error, 2 usage. Usage: test_sign_cli.sh POCK SOURCE_DIR
set -u
. "$(dirname "$0")/cli_test_lib.sh"
pock=$1
src=$2
model=$src/tests/data/graphs/mlp_small.json
unset POCK_TRUSTED_KEY
# flip FILE OFFSET: xor one byte with 0x01, in place.
flip() {
  local b
  b=$(od -An -tu1 -j "$2" -N1 "$1" | tr -d ' ')
  printf "$(printf '\\%03o' $((b ^ 1)))" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none
}
size() { wc -c <"$1" | tr -d ' '; }

if [ -e /etc/pock/trusted.pub ] || [ -L /etc/pock/trusted.pub ]; then
  echo "SKIP: /etc/pock/trusted.pub exists on this machine"; exit 77
fi
awk 'BEGIN { srand(5); print "a,b,c,d,label";
  for (i = 0; i < 32; i++) { a = int(rand() * 17); b = int(rand() * 17); c = int(rand() * 17);
    d = int(rand() * 17); print a "," b "," c "," d "," (a + b > c + d ? 1 : 0) } }' >"$tmp/train.csv"
train() { "$pock" train "$@" --data "$tmp/train.csv" --epochs 1 --scale 0.0625; }

expect compile 0 'wrote' "$pock" compile "$model" --batch 8 -o "$tmp/m.pock"

# ---- keygen
expect keygen 0 '^wrote .*k\.key \(secret\) and .*k\.pub; key id [0-9a-f]{16}$' "$pock" keygen -o "$tmp/k"
kid=$(sed -E 's/.*key id //' "$tmp/out")
[ "$(stat -c %a "$tmp/k.key")" = 600 ] && pass key_mode_0600 || fail key_mode_0600 "$(stat -c %a "$tmp/k.key")"
grep -Eq '^pock-ed25519-public [A-Za-z0-9+/]{43}=$' "$tmp/k.pub" && pass pub_format || fail pub_format "$(cat "$tmp/k.pub")"
grep -Eq '^pock-ed25519-secret [A-Za-z0-9+/]{43}=$' "$tmp/k.key" && pass key_format || fail key_format "(not shown)"
cp "$tmp/k.key" "$tmp/k.key.orig"
expect keygen_no_replace 1 'exists; not replacing' "$pock" keygen -o "$tmp/k"
cmp -s "$tmp/k.key" "$tmp/k.key.orig" && pass keygen_kept_key || fail keygen_kept_key "k.key changed"
expect keygen_two 0 'key id' "$pock" keygen -o "$tmp/k2"
kid2=$(sed -E 's/.*key id //' "$tmp/out")
expect keygen_usage 2 '-o NAME is required' "$pock" keygen
expect keygen_bad_option 2 "unknown option '--bogus'" "$pock" keygen --bogus x
expect keygen_help 0 'usage: pock keygen' "$pock" keygen --help

# ---- sign
expect sign_to_file 0 "signed .*s\.pock with key $kid" "$pock" sign "$tmp/m.pock" --key "$tmp/k.key" -o "$tmp/s.pock"
[ "$(size "$tmp/s.pock")" -eq $(($(size "$tmp/m.pock") + 128)) ] && cmp -s -n "$(size "$tmp/m.pock")" "$tmp/m.pock" "$tmp/s.pock" &&
  pass sections_do_not_move || fail sections_do_not_move "$(size "$tmp/m.pock") -> $(size "$tmp/s.pock")"
cp "$tmp/m.pock" "$tmp/inplace.pock"
expect sign_in_place 0 "signed .*inplace\.pock with key $kid" "$pock" sign "$tmp/inplace.pock" --key "$tmp/k.key"
cmp -s "$tmp/inplace.pock" "$tmp/s.pock" && pass sign_deterministic || fail sign_deterministic "in place differs from -o"
expect sign_no_key 2 '--key NAME.key is required' "$pock" sign "$tmp/m.pock"
expect sign_no_model 2 'which artifact' "$pock" sign --key "$tmp/k.key"
expect sign_missing_key 1 'nope\.key: No such file' "$pock" sign "$tmp/m.pock" --key "$tmp/nope.key" -o "$tmp/x.pock"
expect sign_public_key 1 'is a public key' "$pock" sign "$tmp/m.pock" --key "$tmp/k.pub" -o "$tmp/x.pock"
expect sign_missing_model 1 'nope\.pock: No such file' "$pock" sign "$tmp/nope.pock" --key "$tmp/k.key"
[ ! -e "$tmp/x.pock" ] && pass failed_sign_writes_nothing || fail failed_sign_writes_nothing "x.pock exists"

# ---- verify
expect verify_no_trust 0 "signed by key $kid; signature verifies" "$pock" verify "$tmp/s.pock"
expect verify_key 0 "signed by key $kid; trusted" "$pock" verify "$tmp/s.pock" --trusted-key "$tmp/k.pub"
expect verify_unsigned 1 'm\.pock: not signed' "$pock" verify "$tmp/m.pock"
expect verify_unsigned_key 1 'not signed; a trusted key is configured' "$pock" verify "$tmp/m.pock" --key "$tmp/k.pub"
expect verify_wrong_key 1 "signed by key $kid, but the trusted key is $kid2" "$pock" verify "$tmp/s.pock" --key "$tmp/k2.pub"
POCK_TRUSTED_KEY=$tmp/k2.pub expect verify_env_wrong 1 "POCK_TRUSTED_KEY=.*k2\.pub" "$pock" verify "$tmp/s.pock"
expect verify_key_text 0 'trusted \(--trusted-key\)' "$pock" verify "$tmp/s.pock" --key "$(cat "$tmp/k.pub")"
expect verify_missing_key 1 'trusted key \(--trusted-key\): .*nope\.pub: No such file' "$pock" verify "$tmp/s.pock" --trusted-key "$tmp/nope.pub"

# ---- the runtime with a trusted key (pock train / eval open through pkrt_model_open)
expect train_unsigned_default 0 'trained' train "$tmp/m.pock"
POCK_TRUSTED_KEY=$tmp/k.pub expect train_unsigned_refused 1 'm\.pock: not signed; a trusted key is configured \(POCK_TRUSTED_KEY=' train "$tmp/m.pock"
POCK_TRUSTED_KEY=$tmp/k.pub expect train_signed 0 'trained' train "$tmp/s.pock"
POCK_TRUSTED_KEY=$(cat "$tmp/k.pub") expect eval_signed_key_text 0 '^loss ' "$pock" eval "$tmp/s.pock" --data "$tmp/train.csv" --scale 0.0625
POCK_TRUSTED_KEY=$tmp/k2.pub expect train_wrong_key 1 "signed by key $kid, but the trusted key is $kid2" train "$tmp/s.pock"
POCK_TRUSTED_KEY=$tmp/nope.pub expect train_missing_trusted_key 1 'trusted key \(POCK_TRUSTED_KEY\).*nope\.pub' train "$tmp/s.pock"
# Tampered: a byte in the middle (a section: checksum), the trailer's signature.
cp "$tmp/s.pock" "$tmp/t1.pock"; flip "$tmp/t1.pock" $(($(size "$tmp/s.pock") / 2))
POCK_TRUSTED_KEY=$tmp/k.pub expect train_tampered_section 1 'checksum mismatch' train "$tmp/t1.pock"
cp "$tmp/s.pock" "$tmp/t2.pock"; flip "$tmp/t2.pock" $(($(size "$tmp/s.pock") - 20))
POCK_TRUSTED_KEY=$tmp/k.pub expect train_tampered_signature 1 'signature invalid' train "$tmp/t2.pock"
expect train_tampered_no_key 1 'signature invalid' train "$tmp/t2.pock"
# Stripping the signature makes an unsigned file: refused when a key is configured.
head -c "$(size "$tmp/m.pock")" "$tmp/s.pock" >"$tmp/stripped.pock"
POCK_TRUSTED_KEY=$tmp/k.pub expect train_stripped 1 'not signed' train "$tmp/stripped.pock"

# ---- re-sign with another key
expect resign 0 "with key $kid2" "$pock" sign "$tmp/s.pock" --key "$tmp/k2.key"
[ "$(size "$tmp/s.pock")" -eq $(($(size "$tmp/m.pock") + 128)) ] && pass resign_replaces || fail resign_replaces "size $(size "$tmp/s.pock")"
POCK_TRUSTED_KEY=$tmp/k2.pub expect train_resigned 0 'trained' train "$tmp/s.pock"
POCK_TRUSTED_KEY=$tmp/k.pub expect train_resigned_old_key 1 "signed by key $kid2" train "$tmp/s.pock"
expect resign_tampered_refused 1 'signature invalid' "$pock" sign "$tmp/t2.pock" --key "$tmp/k.key"

finish
