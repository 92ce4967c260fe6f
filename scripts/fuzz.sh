#!/usr/bin/env bash
# fuzz.sh — builds the libFuzzer target for the artifact loader (fuzz/, clang with
# ASan+UBSan) and runs it for SECONDS (default 60) on a scratch copy of fuzz/corpus, so
# the committed corpus is untouched; crashes are kept in $FUZZ_BUILD_DIR/crashes.
#
#   scripts/fuzz.sh [SECONDS] [--merge]
#
# --merge: afterwards, minimize the committed corpus plus what this run found into
# fuzz/corpus (libFuzzer -merge=1: the smallest set with the same coverage); files named
# regress-* (hand-written regression inputs) are always kept.
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (build jobs, default 2).
# Exit status: libFuzzer's (0 clean, non-zero on a crash); 77 when clang's libFuzzer is
# not installed (scripts/install-deps.sh installs it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=60 merge=0
for a in "$@"; do
  case $a in
    --merge) merge=1 ;;
    ''|*[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS] [--merge]" >&2; exit 2 ;;
    *) secs=$a ;;
  esac
done
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$probe/p.c"
if ! command -v clang >/dev/null || ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" \
    -o "$probe/p" 2>"$probe/err"; then
  echo "SKIP fuzz: clang with libFuzzer is not available ($(head -1 "$probe/err" 2>/dev/null))"
  exit 77
fi

cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DPOCK_FUZZ=ON -DPOCK_WITH_CUDA=OFF \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" --target fuzz_artifact -j"${FUZZ_JOBS:-2}" >"$build/fuzz-build.log" 2>&1 ||
  { tail -20 "$build/fuzz-build.log"; exit 1; }

work="$probe/corpus"
mkdir -p "$work" "$build/crashes"
cp "$root"/fuzz/corpus/* "$work"/ 2>/dev/null || true
# -timeout: one input taking seconds is a bug (the checks are linear); -rss_limit_mb: so
# is a hostile size turning into a huge allocation.
rc=0
"$build/fuzz/fuzz_artifact" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
  -max_len=65536 -dict="$root/fuzz/artifact.dict" -print_final_stats=1 \
  -artifact_prefix="$build/crashes/" "$work" >"$build/fuzz.log" 2>&1 || rc=$?
# The seed count, the last status line (libFuzzer's final stats) and any report.
grep -E '^INFO: seed corpus|^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::|ERROR|SUMMARY|^==' "$build/fuzz.log" || true
if [ "$rc" -ne 0 ]; then
  echo "FAIL fuzz_artifact: libFuzzer exited $rc; inputs in $build/crashes"
  exit "$rc"
fi
if [ "$merge" = 1 ]; then
  merged="$probe/merged"
  mkdir "$merged"
  "$build/fuzz/fuzz_artifact" -merge=1 -max_len=65536 "$merged" "$root/fuzz/corpus" "$work" \
    >"$build/merge.log" 2>&1
  # regress-* files are hand-written regression inputs: kept whatever their coverage.
  find "$root/fuzz/corpus" -type f ! -name 'regress-*' -delete
  cp "$merged"/* "$root/fuzz/corpus/"
  echo "fuzz: corpus merged: $(ls "$root/fuzz/corpus" | wc -l) files, $(du -sh "$root/fuzz/corpus" | cut -f1)"
fi
echo "PASS fuzz_artifact: clean after ${secs}s"
