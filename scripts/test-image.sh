#!/usr/bin/env bash
# Checks an image made by scripts/build-image.sh, inside the image, on this
# machine's CPU (no GPU needed):
#
#   scripts/test-image.sh results/image/protocol-<revision>.tar
#
#   1. load      podman load (docker load where docker's engine answers instead)
#   2. version   `protocol --version` names CUDA 12.4, NCCL and the NF4 kernel, cuDNN off
#   3. validate  `protocol validate plans/llama70b.yaml` (the plans the image holds)
#   4. quick     the quick start on the CPU, its report written
#   5. ssh       a two-node tiny fsdp case, node n1 reached through the image's
#                own sshd (entrypoint `sshd`) on localhost by the `ssh` launcher
#   6. kill      the runner of a longer two-node case killed with SIGKILL: no
#                rank process is left in the container
# Prints one line per check, with its time; exit 0 when all passed, 1 when one
# failed, 77 when neither podman nor a docker engine is here (a skip, not a pass).
set -euo pipefail
cd "$(dirname "$0")/.."
case ${1:-} in -h|--help|'') sed -n '2,18p' "$0"; [[ -n ${1:-} ]]; exit $? ;; esac
archive=$1
[[ -f $archive ]] || { echo "test-image: $archive: no such file" >&2; exit 2; }

say() { echo "test-image: $*"; }
fail() { say "FAILED: $*"; exit 1; }
if command -v podman >/dev/null; then
  engine=podman
  # Without CAP_SYS_RESOURCE and with cgroups in hybrid mode (as in some CI
  # sandboxes) podman's default runtime cannot start: runc and explicit limits.
  run_flags=(--runtime runc --ulimit "nofile=$(ulimit -Sn):$(ulimit -Hn)" --ulimit nproc=4096:4096)
elif command -v docker >/dev/null && docker info >/dev/null 2>&1; then
  engine=docker
  run_flags=()
else
  say "SKIPPED: neither podman nor a docker engine is here"
  exit 77
fi
work=$(mktemp -d /tmp/protocol-image-test.XXXXXX)
container=protocol-image-test-$$
cleanup() { $engine rm -f "$container" >/dev/null 2>&1 || true; rm -rf "$work"; }
trap cleanup EXIT
lap() { echo "at ${SECONDS} s"; }

# ---- 1. load -------------------------------------------------------------------
loaded=$($engine load -i "$archive" 2>&1) || fail "load: $loaded"
image=$(sed -n 's/^Loaded image[^:]*: *//p' <<<"$loaded" | tail -1)
[[ -n $image ]] || fail "load: no image name in: $loaded"
say "load: $image ($(lap))"
run() { $engine run --rm "${run_flags[@]}" --network host -v "$work:/work" "$image" "$@"; }

# ---- 2. version ----------------------------------------------------------------
version=$(run --version)
for want in "CUDA 12.4" "NCCL 2." "NF4 kernel sm_90" "cuDNN off"; do
  grep -qF "$want" <<<"$version" || fail "version: '$want' not in: $version"
done
say "version: $version ($(lap))"

# ---- 3. validate ---------------------------------------------------------------
run validate /usr/local/share/protocol/plans/llama70b.yaml >"$work/validate.log" 2>&1 ||
  { tail -5 "$work/validate.log"; fail "validate plans/llama70b.yaml"; }
say "validate: $(grep -m1 ': ok' "$work/validate.log") ($(lap))"

# ---- 4. the quick start --------------------------------------------------------
run run /usr/local/share/protocol/plans/quickstart.yaml --db quick.db --logs logs >"$work/quick.log" 2>&1 ||
  { tail -15 "$work/quick.log"; fail "quick start run"; }
run report --db quick.db --out report.md >>"$work/quick.log" 2>&1 || { tail -5 "$work/quick.log"; fail "report"; }
grep -q '|' "$work/report.md" || fail "the report has no table"
say "quick start: $(grep -c . "$work/report.md") report lines, $(grep -o '[0-9]* ok' "$work/quick.log" | tail -1 || true) ($(lap))"

# ---- 5. two nodes through the image's sshd --------------------------------------
port=$((22000 + $$ % 1000))
mkdir -p "$work/.ssh"
chmod 700 "$work/.ssh"
ssh-keygen -q -t ed25519 -N '' -f "$work/.ssh/id_ed25519" -C protocol-runner
cp "$work/.ssh/id_ed25519.pub" "$work/.ssh/authorized_keys"
cat >"$work/.ssh/config" <<CONFIG
Host node-a node-b
  HostName 127.0.0.1
  Port $port
  User root
  IdentityFile /work/.ssh/id_ed25519
  StrictHostKeyChecking accept-new
  UserKnownHostsFile /work/.ssh/known_hosts
  LogLevel ERROR
CONFIG
chmod 600 "$work/.ssh/config" "$work/.ssh/authorized_keys"
$engine run -d --name "$container" "${run_flags[@]}" --network host -v "$work:/work" \
  -e PROTOCOL_SSHD_PORT=$port "$image" sshd >/dev/null
for _ in $(seq 50); do
  $engine exec "$container" sh -c "ss -ltn 2>/dev/null | grep -q ':$port '" && break
  sleep 0.2
done
two_nodes() {  # steps
  cat <<PLAN
protocol: 1
name: image-ssh
models: {tiny: {preset: tiny, path: /usr/local/share/protocol/data/quickstart, init: random}}
datasets: {corpus: {format: text, path: /usr/local/share/protocol/data/quickstart/corpus.txt}}
cluster:
  launcher: ssh
  network: here
  networks:
    here: {rate: 10gbit, env: {GLOO_SOCKET_IFNAME: lo}, addresses: {n0: 127.0.0.1, n1: 127.0.0.1}}
  nodes:
    - {name: n0, host: node-a, gpus: 0}
    - {name: n1, host: node-b, gpus: 0}
stages:
  - name: s
    cases:
      - {id: s.1, backend: fsdp, workload: pretrain, model: tiny, dataset: corpus, nodes: 2, steps: $1, timeout: 600,
         training: {batch_size: 2, seq_len: 16, device: cpu, threads: 1, collective_timeout: 60}}
PLAN
}
two_nodes 2 >"$work/ssh.yaml"
# The runner's ssh reads /root/.ssh/config, which is /work/.ssh/config (the shared volume, as on the rigs).
$engine exec "$container" protocol run ssh.yaml --db ssh.db --logs logs >"$work/ssh.log" 2>&1 ||
  { tail -15 "$work/ssh.log"; tail -20 "$work/logs/run-1/s.1.log" 2>/dev/null; fail "two nodes through sshd"; }
grep -q 'ssh' "$work/logs/run-1/s.1.log" 2>/dev/null || true
say "ssh: a 2-node fsdp case through the image's sshd on port $port: ok ($(lap))"

# ---- 6. a killed runner leaves no rank behind ----------------------------------
two_nodes 100000 >"$work/kill.yaml"
$engine exec "$container" sh -c 'protocol run kill.yaml --db kill.db --logs logs-kill >kill.log 2>&1 & echo $! >runner.pid' 
ranks=0
for _ in $(seq 150); do
  ranks=$($engine exec "$container" sh -c 'pgrep -fc "[p]rotocol-native worker"' || true)
  ((ranks >= 2)) && break
  sleep 0.2
done
((ranks >= 2)) || { cat "$work/kill.log"; fail "kill: the ranks never started (found $ranks)"; }
$engine exec "$container" sh -c 'kill -KILL $(cat runner.pid)'
left=$ranks
for i in $(seq 100); do
  left=$($engine exec "$container" sh -c 'pgrep -fc "[p]rotocol-native worker"' || true)
  ((left == 0)) && break
  sleep 0.2
done
((left == 0)) || { $engine exec "$container" ps -ef; fail "kill: $left rank process(es) still alive 20 s after the runner was killed"; }
say "kill: runner killed with $ranks ranks running; none left after $(awk "BEGIN {print $i * 0.2}") s ($(lap))"
say "ok"
