#!/bin/sh
# What the FSDP baseline's prefetch hides (a benchmark: prints figures, asserts
# nothing). Runs bench/overlap.yaml — 2 nodes x 1 rank in two network
# namespaces joined by a tc-shaped link — once per link rate, each time with
# prefetch on and off, into a fresh database, then prints per rate:
#
#   compute C   prefetch off: step time minus the time waiting for collectives
#               (mean of the ranks' step_work_seconds_mean)
#   comm M      prefetch off: the time waiting for collectives per step (mean
#               over ranks of comm_exposed_seconds: every collective waited at once)
#   T off, T on the mean step time after warm-up (rank 0's step_seconds_mean)
#   hidden      T off − T on: the time prefetch took off a step
#   of min(C,M) hidden / min(C, M): the share of the most that overlap can hide
#               (a step can never be shorter than max(C, M))
#   exposed on / in flight on / hidden share: prefetch on, per step, the
#               ranks' means and comm_hidden_share
#
#   sudo bench/overlap.sh                      # rates 10gbit 1200mbit 600mbit 300mbit 150mbit (~2 min idle)
#   RATES="300mbit" sudo bench/overlap.sh      # other rates (tc units, docs/plan-format.md)
#
# Needs root (network namespaces). Environment: PROTOCOL (default
# build/protocol), OUT (default a new temp dir: the database and the case
# logs), RATES. Measure on an idle machine: the report of the run says whether
# other processes took the CPU (contention).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
protocol=${PROTOCOL:-$root/build/protocol}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
db=$out/overlap.db
rates=${RATES:-"10gbit 1200mbit 600mbit 300mbit 150mbit"}
status=0
for rate in $rates; do
  "$protocol" run "$root/bench/overlap.yaml" --db "$db" --logs "$out/logs" \
    --set "cluster.emulate.bandwidth=$rate" --set "cluster.network=$rate" "$@" >"$out/run-$rate.txt" 2>&1 || status=$?
  tail -n 2 "$out/run-$rate.txt"
done
echo "database: $db   logs: $out/logs   load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
sqlite3 -header -column "$db" <<'SQL'
WITH c AS (
  SELECT cases.id AS row, cases.run_id, cases.case_id, cases.network AS rate FROM cases WHERE cases.status = 'ok'),
f AS (
  SELECT c.run_id, c.rate, c.case_id,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'step_seconds_mean' AND m.rank IS NULL) AS step,
    (SELECT avg(value) FROM measurements m WHERE m.case_row = c.row AND m.name = 'step_work_seconds_mean' AND m.rank IS NOT NULL) AS work,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'comm_exposed_seconds' AND m.rank IS NULL) AS exposed,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'comm_in_flight_seconds' AND m.rank IS NULL) AS in_flight,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'comm_hidden_share' AND m.rank IS NULL) AS hidden_share,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'contention' AND m.rank IS NULL) AS contention
  FROM c),
p AS (
  SELECT off.run_id, off.rate, off.work AS C, off.exposed AS M, off.step AS t_off, onn.step AS t_on,
         onn.exposed AS exposed_on, onn.in_flight AS in_flight_on, onn.hidden_share AS share_on,
         max(off.contention, onn.contention) AS contention
  FROM f off JOIN f onn ON onn.run_id = off.run_id AND onn.case_id = 'o.on'
  WHERE off.case_id = 'o.off')
SELECT rate, printf('%.3f', C) AS "compute C s", printf('%.3f', M) AS "comm M s",
       printf('%.3f', t_off) AS "T off s", printf('%.3f', t_on) AS "T on s",
       printf('%.3f', t_off - t_on) AS "hidden s",
       printf('%.0f%%', 100.0 * (t_off - t_on) / min(C, M)) AS "of min(C,M)",
       printf('%.3f', exposed_on) AS "exposed on s", printf('%.3f', in_flight_on) AS "in flight on s",
       printf('%.0f%%', 100.0 * share_on) AS "hidden share on",
       printf('%.2f', contention) AS "contention"
FROM p ORDER BY run_id;
SQL
exit $status
