# cli_test_lib.sh — sourced by the shell tests in tests/ (bash): a scratch directory $tmp
# removed on exit, PASS/FAIL lines with counters, `expect`, and `finish`.
#
#   . "$(dirname "$0")/cli_test_lib.sh"
#   expect NAME CODE PATTERN [--] CMD ARGS...   CMD's exit status is CODE and its
#                                              stdout+stderr (kept in $tmp/out) match the
#                                              grep -E PATTERN; a sanitizer report fails
#   pass NAME / fail NAME WHY                  for checks of one's own
#   finish                                     the summary line; exit status 0 or 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
passes=0
pass() { echo "PASS $1"; passes=$((passes + 1)); }
fail() { echo "FAIL $1: $2"; fails=$((fails + 1)); }
expect() {
  local name=$1 code=$2 pattern=$3
  shift 3
  [ "${1-}" = -- ] && shift
  "$@" >"$tmp/out" 2>&1
  local rc=$?
  # (a sanitizer report fails the check even when the exit status happens to match)
  if [ "$rc" -eq "$code" ] && grep -Eq -- "$pattern" "$tmp/out" && ! grep -q 'Sanitizer' "$tmp/out"; then
    pass "$name"
  else
    fail "$name" "exit $rc (want $code): $(head -c 400 "$tmp/out")"
  fi
}
finish() {
  echo "$passes passed, $fails failed"
  [ "$fails" -eq 0 ]
}
