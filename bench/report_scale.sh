#!/bin/sh
# `protocol report` at nightly scale (a benchmark: prints figures, asserts
# nothing). Makes databases of N runs with build/protocol_report_db (copies of
# one real run of TEMPLATE_DB, e.g. results/protocol.db after
# scripts/quickstart.sh, or in a second `build/protocol run
# bench/report-template.yaml --db template.db`; every run but the last has
# one failed case), then
# times, REPEAT times each, with /usr/bin/time -v:
#   protocol report --db DB --out R.md                 every stored run
#   protocol report --db DB --run latest --out R.md    the newest run
#   protocol report --db DB --out R.html               every stored run, with the history charts
# and the same three through build/protocol_report_time (the report library
# alone, without the command line). `protocol` loads no libtorch (that is
# protocol-native's, for run/validate); its start-up is timed as `protocol
# --help`. Prints per command the wall time and peak RSS of each repetition
# and the size of the report.
#
#   bench/report_scale.sh results/protocol.db              # 2000 and 10000 runs
#   bench/report_scale.sh results/protocol.db 2000         # 2000 runs only
#
# Environment: PROTOCOL (default build/protocol), REPORT_DB (default
# build/protocol_report_db), REPORT_TIME (default build/protocol_report_time;
# skipped when missing), REPEAT (default 3), OUT (default a new temp dir: the
# databases and reports; a database already there is reused).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
protocol=${PROTOCOL:-$root/build/protocol}
report_db=${REPORT_DB:-$root/build/protocol_report_db}
report_time=${REPORT_TIME:-$root/build/protocol_report_time}
repeat=${REPEAT:-3}
out=${OUT:-$(mktemp -d)}
[ $# -ge 1 ] || { echo "usage: $0 TEMPLATE_DB [RUNS...]" >&2; exit 2; }
template=$1
shift
[ $# -ge 1 ] || set -- 2000 10000

# time_it LABEL REPORT_FILE COMMAND...: REPEAT runs, "wall s / peak RSS MiB" each.
time_it() {
  label=$1 file=$2
  shift 2
  line=""
  i=0
  while [ "$i" -lt "$repeat" ]; do
    /usr/bin/time -v "$@" 2>"$out/time.txt" >/dev/null
    wall=$(sed -n 's/^.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$out/time.txt" |
           awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')
    rss=$(sed -n 's/^.*Maximum resident set size (kbytes): //p' "$out/time.txt" | awk '{ printf "%.0f", $1 / 1024 }')
    line="$line  ${wall} s / ${rss} MiB"
    i=$((i + 1))
  done
  size=""
  [ -z "$file" ] || size="   (report: $(wc -c <"$file" | tr -d ' ') bytes)"
  printf '%-40s %s%s\n' "$label" "$line" "$size"
}

echo "protocol: $protocol   out: $out   load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
time_it "protocol --help (start-up alone)" "" "$protocol" --help
for runs in "$@"; do
  db=$out/report-$runs.db
  [ -f "$db" ] || "$report_db" --from "$template" --runs "$runs" --out "$db" >/dev/null
  echo "== $runs runs ($(du -mL "$db" | cut -f1) MiB database)"
  time_it "report (md, every run)" "$out/all-$runs.md" "$protocol" report --db "$db" --out "$out/all-$runs.md"
  time_it "report --run latest (md)" "$out/latest-$runs.md" \
    "$protocol" report --db "$db" --run latest --out "$out/latest-$runs.md"
  time_it "report (html, every run)" "$out/all-$runs.html" "$protocol" report --db "$db" --out "$out/all-$runs.html"
  [ -x "$report_time" ] || continue
  time_it "  report library alone: md, every run" "" "$report_time" --db "$db" --out "$out/t.md"
  time_it "  report library alone: --run latest (md)" "" "$report_time" --db "$db" --run latest --out "$out/t.md"
  time_it "  report library alone: html, every run" "" "$report_time" --db "$db" --format html --out "$out/t.html"
done
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
