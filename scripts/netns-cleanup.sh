#!/usr/bin/env bash
# Removes network namespaces left behind by protocol's network emulation
# (src/backends/native/launch/network_emulation.h) when their owner died without tearing down
# (SIGKILL, crash, power cut of the runner but not of the host).
#
#   scripts/netns-cleanup.sh            # remove leftovers of dead owners
#   scripts/netns-cleanup.sh --dry-run  # only print what would be removed
#   scripts/netns-cleanup.sh --all      # remove every protocol-* namespace (no run may be active)
#
# Namespaces are named protocol-<pid>-<seq>-<node> (and ...-sw for the
# switch); /run/protocol-netem/protocol-<pid>-<seq> holds "<pid> <start time>".
# An owner is alive when <pid> exists and, where a marker exists, started at
# the recorded time (so a reused pid does not protect leftovers). The same rule
# as RemoveStaleNetworks() in C++. Deleting a namespace removes its veth links,
# bridge and tc qdiscs; nothing outside the namespaces is ever touched.
set -uo pipefail

NETNS_DIR=${NETNS_DIR:-/run/netns}
MARKER_DIR=${MARKER_DIR:-/run/protocol-netem}
mode=stale
case ${1:-} in
  "") ;;
  --dry-run) mode=dry ;;
  --all) mode=all ;;
  -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
  *) echo "netns-cleanup: unknown option '$1' (--dry-run, --all)" >&2; exit 2 ;;
esac
[[ $mode == dry || $(id -u) -eq 0 ]] || { echo "netns-cleanup: deleting namespaces needs root" >&2; exit 1; }

start_time() {  # field 22 of /proc/<pid>/stat; empty when there is no such process
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
  stat=${stat##*) }
  # shellcheck disable=SC2086
  set -- $stat
  echo "${20}"
}

owner_alive() {  # $1 = prefix protocol-<pid>-<seq>
  local pid=${1#protocol-}; pid=${pid%%-*}
  kill -0 "$pid" 2>/dev/null || [[ -d /proc/$pid ]] || return 1
  local marker=$MARKER_DIR/$1
  [[ -f $marker ]] || return 0
  local recorded
  recorded=$(awk '{print $2}' "$marker")
  [[ $recorded == "$(start_time "$pid")" ]]
}

declare -A prefixes=()
shopt -s nullglob
for path in "$NETNS_DIR"/protocol-* "$MARKER_DIR"/protocol-*; do
  name=${path##*/}
  [[ $name =~ ^(protocol-[0-9]+-[0-9]+)(-.+)?$ ]] || continue
  prefixes[${BASH_REMATCH[1]}]=1
done

removed=0 failed=0
for prefix in "${!prefixes[@]}"; do
  if [[ $mode != all ]] && owner_alive "$prefix"; then continue; fi
  for path in "$NETNS_DIR/$prefix"-*; do
    ns=${path##*/}
    if [[ $mode == dry ]]; then echo "would remove $ns"; continue; fi
    if ip netns delete "$ns"; then echo "removed $ns"; removed=$((removed + 1)); else failed=$((failed + 1)); fi
  done
  [[ $mode == dry ]] || rm -f "$MARKER_DIR/$prefix"
done
[[ $mode == dry ]] || echo "netns-cleanup: removed $removed namespace(s), $failed failed" >&2
((failed == 0))
