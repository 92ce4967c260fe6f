#!/usr/bin/env bash
# onnx_venv.sh — makes the reference venv of the ONNX tests and fixture scripts: onnx 1.16.2
# and onnxruntime 1.19.2 (the training build: it provides the `onnxruntime` module) on top
# of Debian's torch 1.13, which loads only under /usr/bin/python3, hence
# --system-site-packages. ORT 1.19 refuses the IR version of onnx >= 1.18: keep the pins.
#
#   scripts/onnx_venv.sh [DIR]      DIR default build-venv-onnx in the repository (scripts/test.sh
#                                   makes the same; an existing venv is reused)
#
# Then: DIR/bin/python scripts/export_onnx_fixtures.py (tests/fixtures/onnx-models).
# Exit status: 0 when DIR/bin/python imports onnx and onnxruntime (torch is needed only by
# the fixture scripts: its absence is reported, not an error); 1 otherwise.
set -euo pipefail
dir="${1:-$(cd "$(dirname "$0")/.." && pwd)/build-venv-onnx}"
if [ ! -x "$dir/bin/python" ]; then
  /usr/bin/python3 -m venv --system-site-packages "$dir"
fi
"$dir/bin/python" -m pip install --quiet onnx==1.16.2 onnxruntime-training-cpu==1.19.2
# onnx before torch: torch 1.13 imported first makes `import onnx` fail
"$dir/bin/python" -c 'import onnx, onnxruntime
try:
    import torch
    t = torch.__version__
except ImportError:
    t = "not installed (apt install python3-torch for the fixture scripts)"
print("onnx", onnx.__version__, "onnxruntime", onnxruntime.__version__, "torch", t)'
