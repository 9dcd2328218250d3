#!/usr/bin/env bash
# Starts a one-node Slurm on localhost (munged + slurmctld + slurmd) for the
# tests and for local rehearsals. Idempotent: a second run finds the daemons up
# and only waits for the node. Never touches /etc/slurm: the configuration,
# state, logs and pid files live under $PROTOCOL_SLURM_DIR.
#
#   scripts/slurm-local.sh          # install if missing (root), start, wait for idle
#   scripts/slurm-local.sh stop     # stop the daemons this script started
#
# On success the last line of stdout is `SLURM_CONF=<path>`: export it before
# srun/sinfo. On failure it exits non-zero and the last line of stderr says why
# (the tests print that line as the reason they are skipped).
#
# Environment:
#   PROTOCOL_SLURM_DIR      state directory (default /var/tmp/protocol-slurm)
#   PROTOCOL_SLURM_CPUS     CPUs the node offers (default 2)
#   PROTOCOL_SLURM_WAIT     seconds to wait for the node to become idle (default 30)
#   PROTOCOL_SLURM_INSTALL  0: never install packages, only report them missing
set -uo pipefail

DIR=${PROTOCOL_SLURM_DIR:-/var/tmp/protocol-slurm}
CPUS=${PROTOCOL_SLURM_CPUS:-2}
WAIT=${PROTOCOL_SLURM_WAIT:-30}
INSTALL=${PROTOCOL_SLURM_INSTALL:-1}
CONF=$DIR/slurm.conf
source "$(dirname "$0")/packages.sh"
PACKAGES=("${SLURM_PACKAGES[@]}")

fail() { echo "slurm-local: $*" >&2; exit 1; }
# Runs a command with a deadline so that no step can hang the caller.
bounded() { local s=$1; shift; timeout --kill-after=5 "$s" "$@"; }

# Alive also when it belongs to another user (kill -0 then fails with EPERM).
pid_alive() { local p; p=$(cat "$1" 2>/dev/null) && [[ -n $p && -d /proc/$p ]]; }

# Stops the daemons named (default: all three) that this script started.
stop() {
  local names=("$@")
  ((${#names[@]})) || names=(slurmd slurmctld munged)
  local pids=()
  for f in "${names[@]}"; do
    if pid_alive "$DIR/run/$f.pid"; then
      pids+=("$(cat "$DIR/run/$f.pid")")
      kill "${pids[-1]}" 2>/dev/null || true
    fi
  done
  # Bounded wait, so that a restart does not find the ports still taken.
  for _ in $(seq 50); do
    local alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
  done
  echo "slurm-local: stopped ${names[*]}" >&2
}
if [[ ${1:-} == stop ]]; then stop; exit 0; fi

# ---- 1. packages -------------------------------------------------------------
missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  [[ $INSTALL == 0 ]] && fail "missing Debian packages: ${missing[*]} (PROTOCOL_SLURM_INSTALL=0)"
  if [[ $(id -u) -eq 0 ]]; then sudo=()
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo=(sudo)
  else fail "missing Debian packages: ${missing[*]}; install them as root: apt-get install -y --no-install-recommends ${missing[*]}"
  fi
  echo "slurm-local: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  bounded 300 "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$DIR.apt.log" 2>&1 ||
    { bounded 120 "${sudo[@]}" apt-get update -qq >/dev/null 2>&1 &&
      bounded 300 "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$DIR.apt.log" 2>&1; } ||
    fail "apt-get install ${missing[*]} failed (see $DIR.apt.log): $(tail -n 1 "$DIR.apt.log" 2>/dev/null)"
fi
# Starting daemons needs root; finding ours already running does not.
need_root() {
  [[ $(id -u) -eq 0 ]] || fail "starting $1 needs root (this script runs the daemons as root with a private configuration)"
}

mkdir -p "$DIR"/{run,log,ctld,spool,munge} 2>/dev/null || need_root "the Slurm daemons"

# ---- 2. configuration (rewritten only when it changes) -----------------------
HOST=$(hostname -s)
NEW_CONF=$(mktemp) || fail "mktemp failed"
cat >"$NEW_CONF" <<CONF
# Written by scripts/slurm-local.sh: one node on localhost, no cgroups.
ClusterName=protocol-local
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket.2
CryptoType=crypto/munge
SlurmctldPort=6917
SlurmdPort=6918
StateSaveLocation=$DIR/ctld
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS State=UNKNOWN
PartitionName=local Nodes=ALL Default=YES MaxTime=INFINITE State=UP
CONF
restart=0
if ! cmp -s "$NEW_CONF" "$CONF"; then
  need_root "slurmctld with a new configuration"
  mv "$NEW_CONF" "$CONF" && chmod 0644 "$CONF"
  restart=1
else
  rm -f "$NEW_CONF"
fi
export SLURM_CONF=$CONF

# ---- 3. munged ---------------------------------------------------------------
MUNGE_SOCKET=$DIR/munge/munge.socket.2
started=()
if ! pid_alive "$DIR/run/munged.pid"; then
  started+=(munged)
  need_root munged
  if [[ ! -s /etc/munge/munge.key ]]; then
    mkdir -p /etc/munge
    if command -v mungekey >/dev/null; then mungekey --create --keyfile=/etc/munge/munge.key >/dev/null 2>&1
    else dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none; fi
    chmod 0400 /etc/munge/munge.key
  fi
  # munged refuses to run as root without --force; root reads the key whoever owns it.
  bounded 10 munged --force --socket="$MUNGE_SOCKET" --pid-file="$DIR/run/munged.pid" \
    --log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munge.seed" --key-file=/etc/munge/munge.key \
    </dev/null >/dev/null 2>"$DIR/log/munged.start" ||
    fail "munged did not start: $(tail -n 1 "$DIR/log/munged.start")"
fi

# ---- 4. slurmctld + slurmd ---------------------------------------------------
if ((restart)); then stop slurmd slurmctld >/dev/null 2>&1; fi
if ! pid_alive "$DIR/run/slurmctld.pid"; then
  started+=(slurmctld)
  need_root slurmctld
  bounded 20 slurmctld -f "$CONF" </dev/null >/dev/null 2>"$DIR/log/slurmctld.start" ||
    fail "slurmctld did not start: $(tail -n 1 "$DIR/log/slurmctld.start") $(tail -n 1 "$DIR/log/slurmctld.log" 2>/dev/null)"
fi
if ! pid_alive "$DIR/run/slurmd.pid"; then
  started+=(slurmd)
  need_root slurmd
  bounded 20 slurmd -f "$CONF" -N "$HOST" </dev/null >/dev/null 2>"$DIR/log/slurmd.start" ||
    fail "slurmd did not start: $(tail -n 1 "$DIR/log/slurmd.start") $(tail -n 1 "$DIR/log/slurmd.log" 2>/dev/null)"
fi

((${#started[@]})) && echo "slurm-local: started ${started[*]}" >&2

# ---- 5. wait until the node is idle ------------------------------------------
deadline=$((SECONDS + WAIT))
state=""
while ((SECONDS < deadline)); do
  state=$(bounded 5 sinfo -h -N -n "$HOST" -o %t 2>/dev/null | head -n 1)
  case $state in
    idle|mix|alloc) echo "SLURM_CONF=$CONF"; exit 0 ;;
    down*|drain*) bounded 5 scontrol update nodename="$HOST" state=resume >/dev/null 2>&1 || true ;;
  esac
  sleep 0.5
done
fail "node $HOST not idle after ${WAIT}s (state '${state:-unknown}'); see $DIR/log/slurmctld.log and $DIR/log/slurmd.log"
