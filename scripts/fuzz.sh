#!/usr/bin/env bash
# fuzz.sh — builds the libFuzzer targets (fuzz/, clang with ASan+UBSan) and runs one of
# them, or all of them one after another, on a scratch copy of its corpus
# (fuzz/corpus/TARGET), so the committed corpus is untouched; crashes are kept in
# $FUZZ_BUILD_DIR/crashes/TARGET.
#
#   scripts/fuzz.sh TARGET [SECONDS] [--merge]   TARGET: artifact graph sparse pkw csv npy
#                                                jsonl onnx remote (fuzz/targets.cmake), or all
#   scripts/fuzz.sh SECONDS [--merge]            the artifact target (the old form)
#
# SECONDS (default 60) is the whole run: with `all`, each target gets an equal share (less
# a second each for libFuzzer's start-up).
# --merge: afterwards, minimize the committed corpus plus what this run found into
# fuzz/corpus/TARGET (libFuzzer -merge=1: the smallest set with the same coverage); files
# named regress-* (regression inputs of fixed bugs) are always kept.
# Environment: FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (build jobs, default 2),
# FUZZ_SKIP_BUILD=1 (use the targets already built: two runs at once share one build),
# FUZZ_LOG_DIR (keep a copy of each target's libFuzzer log there).
# Exit status: libFuzzer's (0 clean, non-zero on a crash); 2 usage; 77 when clang's
# libFuzzer is not installed (scripts/install-deps.sh installs it).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
all_targets="artifact graph sparse pkw csv npy jsonl onnx remote"
usage() { echo "usage: scripts/fuzz.sh TARGET|all [SECONDS] [--merge] (TARGET: $all_targets)" >&2; exit 2; }
target= secs=60 merge=0
for a in "$@"; do
  case $a in
    --merge) merge=1 ;;
    all) target=all ;;
    ''|*[!0-9]*)
      case " $all_targets " in *" $a "*) target=$a ;; *) usage ;; esac ;;
    *) secs=$a ;;
  esac
done
[ -n "$target" ] || target=artifact
targets=$target
[ "$target" = all ] && targets=$all_targets
build=${FUZZ_BUILD_DIR:-$root/build-fuzz}

probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n) { return 0; }' >"$probe/p.c"
if ! command -v clang >/dev/null || ! clang -fsanitize=fuzzer,address,undefined "$probe/p.c" \
    -o "$probe/p" 2>"$probe/err"; then
  echo "SKIP fuzz: clang with libFuzzer is not available ($(head -1 "$probe/err" 2>/dev/null))"
  exit 77
fi

exes=
for t in $targets; do exes="$exes fuzz_$t"; done
if [ "${FUZZ_SKIP_BUILD:-0}" != 1 ]; then
  cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER=clang -DPOCK_FUZZ=ON -DPOCK_WITH_CUDA=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  # shellcheck disable=SC2086
  cmake --build "$build" --target $exes -j"${FUZZ_JOBS:-2}" >"$build/fuzz-build.log" 2>&1 ||
    { tail -20 "$build/fuzz-build.log"; exit 1; }
fi

n=0
for t in $targets; do n=$((n + 1)); done
# libFuzzer overruns -max_total_time by up to a second (start-up, the seed corpus): leave
# it that second per target, so `all 60` stays within 60 s.
share=$((secs / n))
[ "$n" -gt 1 ] && share=$(((secs - n) / n))
[ "$share" -ge 1 ] || share=1
status=0
for t in $targets; do
  work="$probe/corpus-$t"
  mkdir -p "$work" "$build/crashes/$t"
  cp "$root/fuzz/corpus/$t"/* "$work"/ 2>/dev/null || true
  # -timeout: one input taking seconds is a bug (the readers are linear); -rss_limit_mb: so
  # is a hostile size turning into a huge allocation. Artifacts are large inputs.
  opts=(-max_total_time="$share" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
        -artifact_prefix="$build/crashes/$t/")
  [ "$t" = artifact ] && opts+=(-max_len=65536)
  [ -f "$root/fuzz/$t.dict" ] && opts+=(-dict="$root/fuzz/$t.dict")
  rc=0
  "$build/fuzz/fuzz_$t" "${opts[@]}" "$work" >"$build/fuzz-$t.log" 2>&1 || rc=$?
  [ -n "${FUZZ_LOG_DIR:-}" ] && mkdir -p "$FUZZ_LOG_DIR" && cp "$build/fuzz-$t.log" "$FUZZ_LOG_DIR/"
  # The seed count, the first and last status lines (libFuzzer's final stats) and any report.
  echo "== fuzz_$t (${share}s)"
  grep -E '^INFO: seed corpus|^#[0-9]+[[:space:]]+(INITED|DONE)|^Done [0-9]+ runs|^stat::|ERROR|SUMMARY|^==' \
    "$build/fuzz-$t.log" || true
  if [ "$rc" -ne 0 ]; then
    echo "FAIL fuzz_$t: libFuzzer exited $rc; inputs in $build/crashes/$t"
    status=$rc
    continue
  fi
  if [ "$merge" = 1 ]; then
    merged="$probe/merged-$t"
    mkdir "$merged"
    "$build/fuzz/fuzz_$t" -merge=1 ${opts[@]:5} "$merged" "$root/fuzz/corpus/$t" "$work" \
      >"$build/merge-$t.log" 2>&1
    # regress-* files are regression inputs: kept whatever their coverage.
    find "$root/fuzz/corpus/$t" -type f ! -name 'regress-*' -delete
    cp "$merged"/* "$root/fuzz/corpus/$t/"
    echo "fuzz: corpus $t merged: $(ls "$root/fuzz/corpus/$t" | wc -l) files, $(du -sh "$root/fuzz/corpus/$t" | cut -f1)"
  fi
  echo "PASS fuzz_$t: clean after ${share}s"
done
exit "$status"
