#!/bin/sh
# Hybrid vs full sharding of the FSDP baseline (a benchmark: prints figures,
# asserts nothing). Runs bench/sharding.yaml — 2 nodes x 2 ranks in two
# network namespaces joined by a tc-shaped link; full precision and 4-bit —
# into a fresh database, then prints per case the bytes that crossed between
# the nodes in a training step (counted: bytes_between_nodes_per_step) beside
# what `protocol validate` says the formula gives (traffic.h), hybrid's bytes
# as a share of full sharding's, and the mean step time after warm-up.
#
#   sudo bench/sharding.sh                      # at 300mbit (~3 min on an idle 2-core machine)
#   RATE=100mbit sudo bench/sharding.sh
#
# Needs root (network namespaces). Environment: PROTOCOL (default
# build/protocol), OUT (default a new temp dir), RATE.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
protocol=${PROTOCOL:-$root/build/protocol}
out=${OUT:-$(mktemp -d)}
mkdir -p "$out"
db=$out/sharding.db
rate=${RATE:-300mbit}
status=0
"$protocol" run "$root/bench/sharding.yaml" --db "$db" --logs "$out/logs" \
  --set "cluster.emulate.bandwidth=$rate" --set "cluster.network=$rate" "$@" >"$out/run.txt" 2>&1 || status=$?
tail -n 2 "$out/run.txt"
echo "database: $db   logs: $out/logs   link: $rate   load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "formula (protocol validate, per step):"
"$protocol" validate "$root/bench/sharding.yaml" 2>&1 | grep "between nodes per step" || true
sqlite3 -header -column "$db" <<'SQL'
WITH last AS (SELECT max(id) AS id FROM runs),
c AS (SELECT cases.id AS row, case_id, stage, system, length_count AS steps FROM cases, last
      WHERE cases.run_id = last.id AND cases.status = 'ok'),
f AS (
  SELECT c.case_id, c.stage, c.system, c.steps,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'bytes_between_nodes_per_step' AND m.rank IS NULL) AS per_step,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'bytes_between_nodes' AND m.rank IS NULL) AS whole,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'step_seconds_mean' AND m.rank IS NULL) AS step,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'comm_exposed_seconds' AND m.rank IS NULL) AS exposed,
    (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'contention' AND m.rank IS NULL) AS contention
  FROM c)
SELECT f.case_id AS "case", f.system,
       printf('%.4f', f.per_step / 1e6) AS "between nodes MB/step",
       printf('%.2f', f.whole / 1e6) AS "whole case MB",
       printf('%.3f', f.per_step / (SELECT ref.per_step FROM f ref WHERE ref.stage = f.stage AND ref.system = 'fsdp'))
         AS "of full sharding's",
       printf('%.3f', f.step) AS "step s", printf('%.3f', f.exposed) AS "waiting s/step",
       printf('%.2f', f.contention) AS contention
FROM f ORDER BY f.stage, f.case_id;
SQL
echo "(per step: the training steps' bytes between nodes over the steps; whole case: with the held-out evaluation and the save)"
exit $status
