#!/usr/bin/env bash
# The main job on the embedded default: set-up, run plans/quickstart.yaml into
# results/protocol.db, then render results/report.md and results/report.html
# from that run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
protocol=${BUILD_DIR:-build}/protocol
status=0
"$protocol" run plans/quickstart.yaml --db results/protocol.db || status=$?
if ((status > 1)); then exit "$status"; fi   # bad plan or internal error: nothing to report
report=("$protocol" report --db results/protocol.db --run latest)
"${report[@]}" --out results/report.md
"${report[@]}" --out results/report.html
echo "quickstart: results/protocol.db, results/report.md, results/report.html"
exit "$status"
