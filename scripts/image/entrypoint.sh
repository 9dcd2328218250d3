#!/bin/sh
# The image's entrypoint (installed as /usr/local/bin/protocol-entrypoint).
#
#   docker run IMAGE ARGS...   is   protocol ARGS...    (docker run IMAGE run plans/x.yaml)
#   docker run -d IMAGE sshd   starts the ssh server through which the `ssh`
#                              launcher reaches this node's ranks, and stays up
#                              for `docker exec NAME protocol ...`
#
# sshd mode (docs/rigs.md):
#   port              PROTOCOL_SSHD_PORT, default 2222 (the host's own sshd keeps 22)
#   keys              key-only; the authorized keys are PROTOCOL_SSH_DIR/authorized_keys
#                     (default /work/.ssh, the shared work volume): the runner's key
#   host keys         made once in PROTOCOL_SSH_DIR/host/, so they outlive the container
#   MaxStartups       100: a node's ten-odd ranks connect within the same second
set -eu
if [ "${1:-}" != sshd ]; then
  exec protocol "$@"
fi
shift
port=${PROTOCOL_SSHD_PORT:-2222}
dir=${PROTOCOL_SSH_DIR:-/work/.ssh}
mkdir -p "$dir/host" /run/sshd
chmod 700 "$dir" "$dir/host"
[ -f "$dir/host/ssh_host_ed25519_key" ] || ssh-keygen -q -t ed25519 -N '' -f "$dir/host/ssh_host_ed25519_key"
if [ ! -s "$dir/authorized_keys" ]; then
  echo "protocol-entrypoint: $dir/authorized_keys is missing or empty: put the runner's public key there" \
       "(docs/rigs.md), then start the container again" >&2
  exit 2
fi
echo "protocol-entrypoint: sshd on port $port, keys from $dir/authorized_keys" >&2
exec /usr/sbin/sshd -D -e -f /etc/ssh/protocol_sshd_config -p "$port" \
  -h "$dir/host/ssh_host_ed25519_key" -o "AuthorizedKeysFile=$dir/authorized_keys" "$@"
