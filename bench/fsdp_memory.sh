#!/bin/sh
# FSDP memory per rank at W = 1, 2, 4 (a benchmark: prints figures, asserts
# nothing). Runs bench/fsdp-memory.yaml through the real `protocol run` (worker
# processes over Gloo) into a fresh database, then prints for every case each
# rank's peak RSS above its baseline (its RSS just before the model was built),
# the absolute peak, the largest rank's ratio to W = 1 of the same stage, and
# rank 0's mean step time after the warm-up step.
#
#   bench/fsdp_memory.sh                      # all 6 cases (~25 min on a shared 2-core machine)
#   bench/fsdp_memory.sh --only m.1,m.2,m.4   # extra arguments go to `protocol run`
#
# Environment: PROTOCOL (default build/protocol), OUT (default a new temp dir:
# the database and the case logs), OMP_NUM_THREADS (default 1 here: one
# intra-op thread per rank, the same for every W, and no OpenMP threads spinning
# for a core on a shared machine), MALLOC_MMAP_THRESHOLD_ (default 65536 here:
# every block of 64 KiB or more is mapped and returned when freed, so that a
# rank's RSS follows what it holds rather than what glibc keeps for reuse;
# docs/distributed.md).
set -eu
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
export MALLOC_MMAP_THRESHOLD_=${MALLOC_MMAP_THRESHOLD_:-65536}
root=$(cd "$(dirname "$0")/.." && pwd)
protocol=${PROTOCOL:-$root/build/protocol}
out=${OUT:-$(mktemp -d)}
db=$out/fsdp-memory.db
status=0
"$protocol" run "$root/bench/fsdp-memory.yaml" --db "$db" --logs "$out/logs" "$@" || status=$?
echo "database: $db   logs: $out/logs   OMP_NUM_THREADS=$OMP_NUM_THREADS   MALLOC_MMAP_THRESHOLD_=$MALLOC_MMAP_THRESHOLD_   load average now: $(cut -d' ' -f1-3 /proc/loadavg)"
sqlite3 -header -column "$db" <<'SQL'
WITH last AS (SELECT max(id) AS id FROM runs),
c AS (SELECT cases.id AS row, case_id, topology, stage FROM cases, last WHERE cases.run_id = last.id AND cases.status = 'ok'),
r AS (
  SELECT c.case_id, c.stage, c.topology, m.rank,
         m.value AS above,
         (SELECT value FROM measurements p WHERE p.case_row = c.row
            AND p.name = 'peak_host_rss_bytes' AND p.rank = m.rank) AS peak
  FROM c JOIN measurements m ON m.case_row = c.row
  WHERE m.name = 'peak_host_rss_above_baseline_bytes' AND m.rank IS NOT NULL)
SELECT case_id AS "case", topology, rank,
       printf('%.1f', above / 1048576.0) AS "peak above baseline MiB",
       printf('%.1f', peak / 1048576.0) AS "peak RSS MiB",
       printf('%.1f', (peak - above) / 1048576.0) AS "baseline MiB"
FROM r ORDER BY stage, case_id, rank;
SQL
sqlite3 -header -column "$db" <<'SQL'
WITH last AS (SELECT max(id) AS id FROM runs),
c AS (SELECT cases.id AS row, case_id, topology, stage FROM cases, last WHERE cases.run_id = last.id AND cases.status = 'ok'),
w AS (
  SELECT c.case_id, c.stage, c.topology,
         (SELECT value FROM measurements m WHERE m.case_row = c.row AND m.name = 'peak_host_rss_above_baseline_bytes' AND m.rank IS NULL) AS above,
         (SELECT avg(seconds) FROM step_samples s WHERE s.case_row = c.row AND s.step > 1) AS step_s
  FROM c)
SELECT w.case_id AS "case", w.topology,
       printf('%.1f', w.above / 1048576.0) AS "largest rank above baseline MiB",
       printf('%.3f', w.above / (SELECT one.above FROM w one WHERE one.stage = w.stage AND one.topology = 'n0:1x1')) AS "ratio to W=1",
       printf('%.2f', w.step_s) AS "step s (mean after warm-up)"
FROM w ORDER BY w.stage, w.case_id;
SQL
exit $status
