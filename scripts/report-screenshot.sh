#!/usr/bin/env bash
# report-screenshot.sh — renders a Pock HTML report in headless Chromium (Debian's
# chromium package) and checks what a user would see: a non-blank screenshot, and one
# rendered chart (<svg>) per task row, or exactly CHARTS charts when that is given (the
# sparse-search report has one). Exits 77 (ctest's skip code) with "SKIP ..." where
# chromium or python3 is absent. Usage: report-screenshot.sh REPORT.html [PNG] [CHARTS]
set -u
html=$1
png=${2:-$(mktemp --suffix=.png)}
want_charts=${3:-}
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then echo "SKIP report screenshot: chromium is not installed"; exit 77; fi
if ! command -v python3 >/dev/null; then echo "SKIP report screenshot: python3 is not installed"; exit 77; fi
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=900,1400)
timeout 120 "$browser" "${flags[@]}" --screenshot="$png" "file://$(realpath "$html")" >/dev/null 2>&1
dom=$(timeout 120 "$browser" "${flags[@]}" --dump-dom "file://$(realpath "$html")" 2>/dev/null)
python3 - "$png" <<'PY' || exit 1
# Decodes the PNG (zlib + filters, no PIL) and counts distinct colours: a blank page has one.
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        bpp = {2: 3, 6: 4}[ctype]
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw = zlib.decompress(idat)
stride, prev, colours = w * bpp, bytearray(w * bpp), set()
for row in range(h):
    f, line = raw[row * (stride + 1)], bytearray(raw[row * (stride + 1) + 1:(row + 1) * (stride + 1)])
    for i in range(stride):
        a = line[i - bpp] if i >= bpp else 0
        b, c = prev[i], prev[i - bpp] if i >= bpp else 0
        p = a + b - c
        pred = [0, a, b, (a + b) // 2, a if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c) else (b if abs(p - b) <= abs(p - c) else c)][f]
        line[i] = (line[i] + pred) & 0xFF
    for i in range(0, stride, bpp * 7):
        colours.add(bytes(line[i:i + 3]))
    prev = line
print(f"screenshot {w}x{h}, {len(colours)} distinct colours sampled")
assert len(colours) > 8, "the screenshot is blank"
PY
rows=$(grep -o '<tr class="task"' <<<"$dom" | wc -l)
charts=$(grep -o '<svg class="chart"' <<<"$dom" | wc -l)
echo "rendered: $rows task rows, $charts charts"
if [ -n "$want_charts" ]; then
  if [ "$charts" -ne "$want_charts" ]; then echo "FAIL: expected $want_charts charts"; exit 1; fi
elif [ "$rows" -lt 1 ] || [ "$rows" -ne "$charts" ]; then echo "FAIL: expected one chart per task row"; exit 1; fi
echo "PASS report screenshot ($png)"
