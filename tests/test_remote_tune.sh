#!/usr/bin/env bash
# test_remote_tune.sh — remote tuning end to end on loopback (issue 19, docs/remote-tuning.md):
# an x86-64 pock-rt-serve and an AArch64 one under qemu-aarch64 (cross-built as
# test_aarch64_qemu builds its binaries: scripts/build-aarch64.sh, into BINARY_DIR/aarch64),
# both driven by one `pock tune --remote A --remote B`; the records land under two
# fingerprints (arch x86_64 and aarch64, informative fields naming the server). A wrong key
# is refused and writes nothing; candidates that crash or hang on the server (its test hook
# POCK_SERVE_FAULT_EVERY) are recorded as such and the tune goes on; a server killed mid-run
# ends its part with an error naming it while the other server's part finishes; each
# database passes SQLite's integrity check with no half or "not measured" record. Timings under qemu mean nothing: none is
# printed. Skipped (77) where qemu-aarch64, the cross compiler or the :arm64 libraries are
# missing (scripts/build-aarch64.sh --deps-only installs them).
#   test_remote_tune.sh POCK POCK_RT_SERVE SOURCE_DIR BINARY_DIR
pock=$(realpath "$1") serve=$(realpath "$2") src=$(realpath "$3") bin=$(realpath "$4")

. "$(dirname "$0")/aarch64_test_lib.sh" # skip (77) without qemu/cross tools; $dev
expect aarch64_serve_build 0 "" env BUILD_DIR="$dev" BUILD_TARGETS=pock-rt-serve \
  nice "$src/scripts/build-aarch64.sh" --no-install

cd "$tmp"
"$pock" keygen -o fleet >/dev/null && "$pock" keygen -o other >/dev/null || { fail keygen "pock keygen"; finish; exit; }
cat >mm.te <<'EOF'
A = placeholder((32, 32), f32)
B = placeholder((32, 32), f32)
k = reduce_axis(32)
C = compute((32, 32), (i, j) => sum(A[i, k] * B[k, j], k))
EOF

pids=()
trap 'for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; wait "$p" 2>/dev/null; done; rm -rf "$tmp"' EXIT
# start NAME CMD...: a server on a free port; its port in $port (from "listening on A:P")
start() {
  local name=$1
  shift
  "$@" --port 0 --trusted-key fleet.pub >"$name.out" 2>"$name.err" &
  pids+=($!)
  spid=$!
  port=
  for _ in $(seq 100); do
    port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$name.out")
    [ -n "$port" ] && return 0
    sleep 0.1
  done
  fail "start_$name" "no 'listening on' line: $(cat "$name.err")"
  return 1
}
# sql DB QUERY: one value per line (python's sqlite3: no sqlite3 command needed)
sql() { python3 -c 'import sqlite3,sys; [print("|".join(map(str,r))) for r in sqlite3.connect(sys.argv[1]).execute(sys.argv[2])]' "$@"; }

start x86 "$serve" && px=$port
start a64 qemu-aarch64 "$dev/cli/pock-rt-serve" && pa=$port
tune() { "$pock" tune mm.te --key fleet.key --cc aarch64=aarch64-linux-gnu-gcc --min-ms 1 \
           --tune-batch 3 --confirm 0 "$@"; }

# one host, two servers at once
expect two_servers_at_once 0 "done: .*records" tune --db t.db --trials 6 --remote 127.0.0.1:$px \
  --remote 127.0.0.1:$pa
grep -E "^remote " "$tmp/out" # (no timing: under qemu they mean nothing)
[ "$(grep -c "^done: " "$tmp/out")" = 2 ] && pass both_finished || fail both_finished "$(head -c 600 "$tmp/out")"
keys=$(sql t.db "select json_extract(must_match,'$.arch'), json_extract(informative,'$.remote') from targets order by 1")
if [ "$keys" = "aarch64|127.0.0.1:$pa
x86_64|127.0.0.1:$px" ]; then pass fingerprints_by_device; else fail fingerprints_by_device "$keys"; fi
emu=$(sql t.db "select json_extract(must_match,'$.arch'), json_extract(informative,'$.emulated') from targets order by 1")
if [ "$emu" = "aarch64|1
x86_64|None" ] && grep -q "remote 127.0.0.1:$pa: runs under an emulator" "$tmp/out"; then
  pass qemu_marked_emulated; else fail qemu_marked_emulated "$emu"; fi
per=$(sql t.db "select json_extract(t.must_match,'$.arch'), count(*) from records r join targets t on r.target_key = t.key where r.status = 'ok' group by 1 order by 1")
echo "ok records per device: $(echo $per)"
if echo "$per" | grep -q '^aarch64|[1-9]' && echo "$per" | grep -q '^x86_64|[1-9]'; then
  pass records_on_both; else fail records_on_both "$per"; fi

# a wrong key: refused at INFO, nothing written
before=$(sql t.db "select count(*) from records")
expect wrong_key_refused 1 "remote 127.0.0.1:$px: the server refused the request: the signature does not verify" \
  "$pock" tune mm.te --db t.db --key other.key --remote 127.0.0.1:$px --trials 2
[ "$(sql t.db "select count(*) from records")" = "$before" ] && pass wrong_key_writes_nothing ||
  fail wrong_key_writes_nothing "records changed"

# candidates that crash or hang on the server (its test hook: every 3rd crashes, the 6th
# hangs): recorded as such, and the tune goes on to the end
start faulty env POCK_SERVE_FAULT_EVERY=3 "$serve" && pf=$port
expect crash_and_hang_recorded 0 "done: 9 new records" tune --db f.db --trials 9 --timeout 2 \
  --remote 127.0.0.1:$pf
st=$(sql f.db "select status, count(*) from records group by 1 order by 1")
echo "statuses: $(echo $st)"
if echo "$st" | grep -q '^crash|' && echo "$st" | grep -q '^timeout|' && echo "$st" | grep -q '^ok|'; then
  pass crash_hang_ok_statuses; else fail crash_hang_ok_statuses "$st"; fi

# a server killed mid-run: its part ends naming it, the other's goes on
start victim "$serve" && pv=$port
tune --db k.db --trials 60 --tune-batch 2 --min-ms 20 --remote 127.0.0.1:$pv \
  --remote 127.0.0.1:$pa >kill.out 2>&1 &
tpid=$!
for _ in $(seq 300); do
  n=$(sql k.db "select count(*) from records where measure_settings like '%127.0.0.1:$pv%'" 2>/dev/null)
  [ "${n:-0}" -ge 2 ] && break
  sleep 0.1
done
kill -9 "$spid"
wait "$spid" 2>/dev/null
wait "$tpid"
rc=$?
if [ "$rc" = 1 ] && grep -q "remote 127.0.0.1:$pv: the server is gone" kill.out &&
   grep -q -- "--remote 127.0.0.1:$pv ended with exit status 1" kill.out; then
  pass killed_server_named; else fail killed_server_named "exit $rc: $(head -c 600 kill.out)"; fi
grep -q "^done: " kill.out && pass other_server_finished || fail other_server_finished "$(head -c 600 kill.out)"
for db in t.db f.db k.db; do
  ic=$(sql $db "pragma integrity_check")
  half=$(sql $db "select count(*) from records where status is null or measure_settings is null or error like 'not measured%'")
  [ "$ic" = ok ] && [ "$half" = 0 ] && pass "consistent_$db" || fail "consistent_$db" "integrity '$ic', half or unmeasured records $half"
done
finish
