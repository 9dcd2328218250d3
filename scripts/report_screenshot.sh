#!/usr/bin/env bash
# The picture of the quick start's HTML report in docs/report.md
# (docs/report-quickstart.png): its first 1280×800 screen in headless
# Chromium (Debian package chromium), the report rendered by `protocol report
# --run latest` from DB (default: tests/data/report/quickstart.db, the quick
# start's database that tests/cli/report_screen_test.cc measures). With
# ImageMagick's `convert` on the PATH the picture is reduced to 64 colours.
#
#   scripts/report_screenshot.sh [DB]    refresh it after a change of the layout
set -euo pipefail
cd "$(dirname "$0")/.."
protocol=${BUILD_DIR:-build}/protocol
db=${1:-tests/data/report/quickstart.db}
out=docs/report-quickstart.png
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
if [[ -z $chromium ]]; then
  echo "report_screenshot: no chromium on PATH (Debian package chromium)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$db" "$tmp/q.db"   # a copy: the report never writes, but the database stays as it was
"$protocol" report --db "$tmp/q.db" --run latest --out "$tmp/report.html"
"$chromium" --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$tmp/profile" \
  --hide-scrollbars --window-size=1280,800 --screenshot="$tmp/shot.png" "file://$tmp/report.html" \
  >/dev/null 2>&1
if convert -version 2>/dev/null | grep -q ImageMagick; then
  convert "$tmp/shot.png" -colors 64 "PNG8:$out"
else
  cp "$tmp/shot.png" "$out"
fi
echo "report_screenshot: $out"
