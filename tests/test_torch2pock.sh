#!/usr/bin/env bash
# test_torch2pock.sh — scripts/torch2pock.py's self-test: sample modules (Sequential ones, a
# residual forward traced by torch.fx) convert and agree with PyTorch through
# scripts/graph_torch.py; modules Pock cannot express are refused with one message.
# Needs torch (Debian's python3-torch); without it the test is skipped (exit 77).
# Usage: test_torch2pock.sh SOURCE_DIR
set -u
src=$1
if ! /usr/bin/python3 -c 'import torch' >/dev/null 2>&1; then
  echo "SKIP: torch is not installed for /usr/bin/python3 (apt install python3-torch)"
  exit 77
fi
out=$(/usr/bin/python3 "$src/scripts/torch2pock.py" --self-test 2>&1)
rc=$?
echo "$out"
if [ $rc -ne 0 ] || ! grep -q '^PASS' <<<"$out" || grep -q '^FAIL' <<<"$out"; then
  echo "FAIL: torch2pock self-test (rc $rc)"
  exit 1
fi
echo "PASS: torch2pock self-test"
