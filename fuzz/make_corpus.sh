#!/usr/bin/env bash
# make_corpus.sh — writes the seed inputs of fuzz_artifact into fuzz/corpus/artifact from artifacts
# `pock compile` makes now: for each model, its bare manifest (the target wraps it) and,
# for the small ones, a whole container with a 64-byte stub kernel object. Run it once
# when the manifest format changes, then scripts/fuzz.sh artifact SECONDS --merge.
#
#   fuzz/make_corpus.sh BUILD_DIR      (a normal build with pock and pk_artifact_tool)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
build=$(cd "$1" && pwd)
pock="$build/cli/pock" tool="$build/tests/pk_artifact_tool"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export POCK_CACHE_DIR="$tmp/cache"
mkdir -p "$here/corpus/artifact"
digits="$root/examples/digits"
tiny="$root/tests/fixtures/artifacts/fixture_mlp.json"
# name | model | compile options | whole container too?
while IFS='|' read -r name model opts whole; do
  [ -z "$name" ] && continue
  # shellcheck disable=SC2086
  "$pock" compile "$model" -o "$tmp/$name.pock" $opts >/dev/null
  "$tool" extract "$tmp/$name.pock" manifest "$tmp/$name.pretty"
  # Compact JSON: fewer bytes for the fuzzer to mutate through.
  python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1])), separators=(",", ":")), end="")' \
    "$tmp/$name.pretty" >"$tmp/$name.json"
  cp "$tmp/$name.json" "$here/corpus/artifact/seed-$name-manifest"
  if [ "$whole" = yes ]; then
    "$tool" extract "$tmp/$name.pock" weights "$tmp/$name.w"
    printf '\177ELF' >"$tmp/stub"
    head -c 60 /dev/zero >>"$tmp/stub"
    "$tool" pack "$here/corpus/artifact/seed-$name-container" manifest="$tmp/$name.json" \
      kernels="$tmp/stub" weights="$tmp/$name.w"
  fi
done <<LIST
tiny_sgd|$tiny|--batch 4|yes
tiny_adam|$tiny|--batch 4 --optimizer adam|yes
tiny_infer|$tiny|--batch 2 --inference|yes
mlp_partial25|$digits/models/mlp.json|--batch 8 --sparse $digits/specs/mlp_partial25_bias_head.json|no
cnn_partial25|$digits/models/cnn.json|--batch 8 --sparse $digits/specs/cnn_partial25_head_localbias.json|no
cnn_bias_head|$digits/models/cnn.json|--batch 8 --sparse $digits/specs/cnn_bias_head.json --optimizer adamw|no
LIST
# A signed container too, so the fuzzer reaches the signature trailer's parser.
"$pock" keygen -o "$tmp/fuzzkey" >/dev/null
cp "$here/corpus/artifact/seed-tiny_infer-container" "$here/corpus/artifact/seed-tiny_infer-signed"
"$pock" sign "$here/corpus/artifact/seed-tiny_infer-signed" --key "$tmp/fuzzkey.key" >/dev/null
ls -la "$here/corpus/artifact"
