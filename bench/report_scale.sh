#!/bin/sh
# `protocol report` at nightly scale (a benchmark: prints figures, asserts
# nothing). Makes databases of N runs with build/protocol_report_db (copies of
# one real run of TEMPLATE_DB, e.g. results/protocol.db after
# scripts/quickstart.sh; every run but the last has one failed case), then
# times, 3 times each, with /usr/bin/time -v:
#   protocol report --db DB --out R.md                 every stored run
#   protocol report --db DB --run latest --out R.md    the newest run
#   protocol report --db DB --out R.html               every stored run, with the history charts
# and prints, per command, the wall time and peak RSS of each of the 3 runs
# and the size of the report.
#
#   bench/report_scale.sh results/protocol.db              # 2000 and 10000 runs
#   bench/report_scale.sh results/protocol.db 2000         # 2000 runs only
#
# Environment: PROTOCOL (default build/protocol), REPORT_DB (default
# build/protocol_report_db), OUT (default a new temp dir: the databases and
# reports; a database already there is reused).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
protocol=${PROTOCOL:-$root/build/protocol}
report_db=${REPORT_DB:-$root/build/protocol_report_db}
out=${OUT:-$(mktemp -d)}
[ $# -ge 1 ] || { echo "usage: $0 TEMPLATE_DB [RUNS...]" >&2; exit 2; }
template=$1
shift
[ $# -ge 1 ] || set -- 2000 10000

# time_it LABEL REPORT_FILE ARGS...: 3 runs, "wall s / peak RSS MiB" each.
time_it() {
  label=$1 file=$2
  shift 2
  line=""
  for i in 1 2 3; do
    /usr/bin/time -v "$protocol" report "$@" --out "$file" 2>"$out/time.txt" >/dev/null
    wall=$(sed -n 's/^.*Elapsed (wall clock) time (h:mm:ss or m:ss): //p' "$out/time.txt" |
           awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.2f", s }')
    rss=$(sed -n 's/^.*Maximum resident set size (kbytes): //p' "$out/time.txt" | awk '{ printf "%.0f", $1 / 1024 }')
    line="$line  ${wall} s / ${rss} MiB"
  done
  printf '%-34s %s   (report: %s bytes)\n' "$label" "$line" "$(wc -c <"$file" | tr -d ' ')"
}

echo "protocol: $protocol   out: $out   load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
for runs in "$@"; do
  db=$out/report-$runs.db
  [ -f "$db" ] || "$report_db" --from "$template" --runs "$runs" --out "$db" >/dev/null
  echo "== $runs runs ($(du -m "$db" | cut -f1) MiB database)"
  time_it "report (md, every run)" "$out/all-$runs.md" --db "$db"
  time_it "report --run latest (md)" "$out/latest-$runs.md" --db "$db" --run latest
  time_it "report (html, every run)" "$out/all-$runs.html" --db "$db"
done
echo "load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
