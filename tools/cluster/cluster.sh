#!/usr/bin/env bash
# A cluster of hosts on one machine, for tests and for trying jobgraph on
# several hosts: each host is a set of Linux namespaces with its own host
# name (UTS), its own node-local tmpfs (mount) and its own network stack,
# joined to the others by a veth pair into a bridge in the root namespace.
# The shared directory (any path outside the tmpfs) is visible to all.
# Open MPI starts ranks across the hosts through tools/cluster/rsh, an rsh
# agent that enters a host's namespaces. Run as root. Everything it makes
# stays on this machine, and `down` removes it.
#
#   cluster.sh up N         make hosts <prefix>1..<prefix>N
#   cluster.sh exec HOST CMD...   run CMD on HOST (in the current directory)
#   cluster.sh mpirun HOSTS ARGS...   mpirun on the first of HOSTS (a comma
#                           list), ranks on all of them, over TCP
#   cluster.sh kill HOST    a lost machine: SIGKILL every process of HOST and
#                           wipe its tmpfs (the host stays, empty, as a spare)
#   cluster.sh hosts        the hosts, one a line: name address pid
#   cluster.sh down         remove every host, the bridge and the state
#
# Settings (environment):
#   JG_CLUSTER_STATE   state directory (default /run/jgcluster); several
#                      clusters may run at once with different ones
#   JG_CLUSTER_PREFIX  host name prefix (default jg)
#   JG_CLUSTER_NET     the first three octets of the hosts' /24 (default
#                      10.77.0); the bridge takes .1, host i takes .(10+i)
#   JG_CLUSTER_LOCAL   where each host's tmpfs is mounted, the same path on
#                      every host (default $JG_CLUSTER_STATE/local)
set -euo pipefail

state="${JG_CLUSTER_STATE:-/run/jgcluster}"
# A cluster that is up keeps the settings it was made with.
if [[ -f "${state}/settings" && "${1:-}" != up ]]; then
  # shellcheck source=/dev/null
  source "${state}/settings"
fi
prefix="${prefix:-${JG_CLUSTER_PREFIX:-jg}}"
net="${net:-${JG_CLUSTER_NET:-10.77.0}}"
local_dir="${local_dir:-${JG_CLUSTER_LOCAL:-${state}/local}}"
here="$(cd "$(dirname "$0")" && pwd)"

die() { echo "cluster.sh: $*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || die "needs root (namespaces, a bridge, mounts)"

# The bridge's name: at most 15 bytes, one per state directory.
bridge_name() {
  if [[ -f "${state}/bridge" ]]; then cat "${state}/bridge"; return; fi
  echo "jgbr$(printf '%s' "${state}" | cksum | cut -c1-6)"
}

host_pid() {
  local host=$1
  # A host is named or given by its address.
  local line
  line=$(awk -v h="${host}" '$1 == h || $2 == h' "${state}/hosts" 2>/dev/null | head -n 1)
  [[ -n "${line}" ]] || die "no host '${host}' in ${state}/hosts (hosts: $(cut -d' ' -f1 "${state}/hosts" 2>/dev/null | tr '\n' ' '))"
  local pid
  pid=$(awk '{print $3}' <<<"${line}")
  kill -0 "${pid}" 2>/dev/null || die "host '${host}' is down (its namespace holder ${pid} is gone)"
  echo "${pid}"
}

# Every process whose network namespace is the host's.
host_processes() {
  local holder=$1
  local ns
  ns=$(readlink "/proc/${holder}/ns/net")
  for p in /proc/[0-9]*; do
    [[ "$(readlink "${p}/ns/net" 2>/dev/null)" == "${ns}" ]] && echo "${p#/proc/}"
  done
}

in_host() {
  local pid=$1
  shift
  nsenter -t "${pid}" -u -m -n -- "$@"
}

cmd_up() {
  local n=${1:?"usage: cluster.sh up N"}
  [[ "${n}" =~ ^[0-9]+$ && ${n} -ge 1 && ${n} -le 200 ]] || die "N must be 1..200, not '${n}'"
  [[ ! -e "${state}/hosts" ]] || die "a cluster is up in ${state}: run 'cluster.sh down' first"
  mkdir -p "${state}" "${local_dir}"
  printf 'prefix=%q\nnet=%q\nlocal_dir=%q\n' "${prefix}" "${net}" "${local_dir}" \
    >"${state}/settings"
  local bridge
  bridge=$(bridge_name)
  echo "${bridge}" >"${state}/bridge"
  ip link add "${bridge}" type bridge
  ip addr add "${net}.1/24" dev "${bridge}"
  ip link set "${bridge}" up
  # /etc/hosts of every host: this machine's, plus the cluster.
  { cat /etc/hosts; for i in $(seq 1 "${n}"); do echo "${net}.$((10 + i)) ${prefix}${i}"; done; } \
    >"${state}/etc_hosts"
  : >"${state}/hosts.tmp"
  for i in $(seq 1 "${n}"); do
    local name="${prefix}${i}" addr="${net}.$((10 + i))"
    # The holder keeps the namespaces alive; its mounts are private.
    setsid unshare --uts --mount --net --propagation private --fork \
      sleep infinity </dev/null >/dev/null 2>&1 &
    local unshare_pid=$!
    local pid=""
    for _ in $(seq 1 100); do
      pid=$(pgrep -P "${unshare_pid}" sleep || true)
      [[ -n "${pid}" ]] && break
      sleep 0.05
    done
    [[ -n "${pid}" ]] || die "host ${name}: its namespaces did not start"
    in_host "${pid}" hostname "${name}"
    in_host "${pid}" mount -t tmpfs -o size=4g,mode=0755 "jgcluster-${name}" "${local_dir}"
    in_host "${pid}" mount --bind "${state}/etc_hosts" /etc/hosts
    local veth="${bridge:0:8}v${i}"
    ip link add "${veth}" type veth peer name eth0 netns "${pid}"
    ip link set "${veth}" master "${bridge}" up
    in_host "${pid}" ip link set lo up
    in_host "${pid}" ip addr add "${addr}/24" dev eth0
    in_host "${pid}" ip link set eth0 up
    echo "${name} ${addr} ${pid}" >>"${state}/hosts.tmp"
  done
  mv "${state}/hosts.tmp" "${state}/hosts"
  cat "${state}/hosts"
}

cmd_exec() {
  local host=${1:?"usage: cluster.sh exec HOST CMD..."}
  shift
  local pid
  pid=$(host_pid "${host}")
  exec nsenter -t "${pid}" -u -m -n --wd="${PWD}" -- "$@"
}

cmd_mpirun() {
  local hosts=${1:?"usage: cluster.sh mpirun HOST1,HOST2,... ARGS..."}
  shift
  local first=${hosts%%,*}
  # TCP between hosts, on the cluster's network only; the rsh agent enters
  # the other hosts.
  cmd_exec "${first}" mpirun --allow-run-as-root \
    --mca plm_rsh_agent "${here}/rsh" --mca plm_rsh_no_tree_spawn 1 \
    --mca oob_tcp_if_include "${net}.0/24" \
    --mca btl self,tcp --mca btl_tcp_if_include "${net}.0/24" \
    --host "${hosts}" "$@"
}

cmd_kill() {
  local host=${1:?"usage: cluster.sh kill HOST"}
  local pid
  pid=$(host_pid "${host}")
  local victims
  victims=$(host_processes "${pid}" | grep -vx "${pid}" || true)
  if [[ -n "${victims}" ]]; then kill -KILL ${victims} 2>/dev/null || true; fi
  # Wipe the node-local disk: a new, empty tmpfs.
  in_host "${pid}" umount -l "${local_dir}"
  in_host "${pid}" mount -t tmpfs -o size=4g,mode=0755 "jgcluster-${host}" "${local_dir}"
  echo "killed $(wc -w <<<"${victims}") processes of ${host}; its ${local_dir} is empty"
}

cmd_down() {
  [[ -d "${state}" ]] || return 0
  if [[ -f "${state}/hosts" || -f "${state}/hosts.tmp" ]]; then
    while read -r name addr pid; do
      [[ -n "${pid}" ]] || continue
      if kill -0 "${pid}" 2>/dev/null; then
        local victims
        victims=$(host_processes "${pid}" || true)
        # The holder's parent (unshare) goes with it.
        if [[ -n "${victims}" ]]; then kill -KILL ${victims} 2>/dev/null || true; fi
      fi
    done < <(cat "${state}/hosts" "${state}/hosts.tmp" 2>/dev/null)
  fi
  local bridge
  bridge=$(bridge_name)
  ip link del "${bridge}" 2>/dev/null || true
  rm -rf "${state}"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  exec) shift; cmd_exec "$@" ;;
  mpirun) shift; cmd_mpirun "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  hosts) cat "${state}/hosts" ;;
  down) cmd_down ;;
  *) die "usage: cluster.sh up N | exec HOST CMD... | mpirun HOSTS ARGS... | kill HOST | hosts | down" ;;
esac
