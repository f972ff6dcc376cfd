#!/usr/bin/env bash
# An emulated cluster of N hosts on this one machine, for real multi-host Open MPI runs.
#
# Each host is a network namespace (its own eth0 with an address in 10.77.0.0/24, its own
# loopback) plus a UTS namespace (its own host name, so gethostname() differs per host). The
# hosts' eth0s are veth pairs whose other ends are ports of one bridge, in a namespace of its own
# (the "switch"). `--rate` shapes each host's link in both directions with tc tbf. mpirun runs in
# host 0's namespaces; Open MPI starts its daemons on the other hosts through this script's
# `agent` subcommand (plm_rsh_agent), which enters the named host's namespaces instead of ssh.
# See docs/multi-host-emulation.md. Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN).
#
# usage:
#   netns_cluster.sh up N [--rate RATE] [--slots S]  make N hosts; prints the cluster directory
#   netns_cluster.sh down DIR                  remove everything `up` made, by its record in DIR
#   netns_cluster.sh hosts DIR                 the host names, host 0 first, one per line
#   netns_cluster.sh exec DIR HOST CMD [ARG...]   run CMD in HOST's namespaces
#   netns_cluster.sh mpirun DIR [MPIRUN ARGS...]  mpirun in host 0 over every host, TCP between hosts
#   netns_cluster.sh kill-host DIR HOST        SIGKILL every process of HOST (a crashed node)
#   netns_cluster.sh link DIR HOST up|down     plug HOST's cable in (returning once it reaches the
#                                              others) or pull it out at the switch
#   netns_cluster.sh agent DIR HOST COMMAND-LINE  Open MPI's remote launcher (not for people)
#
# RATE is a tc rate, e.g. 1gbit or 100mbit; S is each host's slots in the hostfile (default 2).
# Names are unique per cluster (dlscale-XXXXXX-hostK, from the directory's random suffix), so
# clusters made by parallel runs never clash.
set -euo pipefail

self=$(realpath "${BASH_SOURCE[0]}")
repository=$(cd "$(dirname "$self")/../.." && pwd)
subnet_prefix=10.77.0  # the hosts are 10.77.0.1, .2, ...; no route leads out of the namespaces
subnet=$subnet_prefix.0/24

die() {
  echo "netns_cluster.sh: $*" >&2
  exit 2
}

# A cluster directory holds: `made` (one line per namespace or UTS file, in creation order),
# `hosts` (host names, host 0 first), `hostfile` (for mpirun) and `sessions` (Open MPI's).
require_cluster() {
  [[ -f $1/made ]] || die "'$1' is not a cluster directory made by 'netns_cluster.sh up'"
}

switch_namespace() { echo "$(basename "$1")-switch"; }

host_index() {
  local index
  index=$(grep -nxF -- "$2" "$1/hosts" | cut -d: -f1) || die "no host '$2' in the cluster $1"
  echo $((index - 1))
}

# SIGKILL every process in a network namespace, until none is left (a dying Open MPI daemon
# may still be starting children).
kill_namespace_processes() {
  local namespace=$1 pids
  for _ in $(seq 50); do
    pids=$(ip netns pids "$namespace" 2>/dev/null) || return 0
    [[ -n $pids ]] || return 0
    # shellcheck disable=SC2086  # one PID per word
    kill -KILL $pids 2>/dev/null || true
    sleep 0.1
  done
  die "processes in namespace $namespace survive SIGKILL: $(ip netns pids "$namespace" | xargs)"
}

# Returns once HOST reaches every other host of the cluster, or dies after 10 s. A cable plugged
# back in is not usable at once: the carrier reaches the host's end with a delay, and the
# neighbour entries that failed while it was out must be learned again. A TCP connection to a
# port nobody listens on answers "Connection refused" only when the other host is reachable.
wait_until_reachable() {
  local dir=$1 host=$2 index other answer tries
  index=$(host_index "$dir" "$host")
  ip -n "$host" neigh flush all
  for ((other = 0; other < $(wc -l <"$dir/hosts"); ++other)); do
    ((other == index)) && continue
    for ((tries = 0; ; ++tries)); do
      answer=$(ip netns exec "$host" timeout 1 bash -c \
        "exec 3<>/dev/tcp/$subnet_prefix.$((other + 1))/9" 2>&1) || true
      [[ $answer == *"Connection refused"* ]] && break
      ((tries < 100)) || die "host $host does not reach $subnet_prefix.$((other + 1)) in 10 s"
      sleep 0.1
    done
  done
}

tear_down() {
  local dir=$1 kind name
  # Processes first (every namespace), so none holds a namespace alive after its deletion.
  while read -r kind name; do
    [[ $kind == netns ]] && kill_namespace_processes "$name"
  done <"$dir/made"
  # Then the namespaces and UTS files, newest first. Deleting a namespace destroys its veth
  # end, its peer, the bridge and any tc qdisc on them.
  tac "$dir/made" | while read -r kind name; do
    case $kind in
      netns) if [[ -e /run/netns/$name ]]; then ip netns delete "$name"; fi ;;
      uts) if mountpoint -q "$name"; then umount "$name"; fi && rm -f "$name" ;;
    esac
  done
  rm -rf "$dir/sessions"
  rm -f "$dir/made" "$dir/hosts" "$dir/hostfile"
  rmdir "$dir"
}

shape_link() {
  local namespace=$1 device=$2 rate=$3
  # tbf: a token bucket at RATE; the bucket holds 128 KiB, and at most 20 ms of traffic may wait.
  tc -n "$namespace" qdisc add dev "$device" root tbf rate "$rate" burst 128kb latency 20ms
}

bring_up() {
  local count=$1 rate=$2 slots=$3
  [[ $count =~ ^[1-9][0-9]*$ && $count -le 200 ]] || die "up: N must be from 1 to 200, got '$count'"
  [[ $slots =~ ^[1-9][0-9]*$ ]] || die "up: --slots must be a positive integer, got '$slots'"
  ((EUID == 0)) || die "up: needs root to create namespaces"
  local dir switch k host uts_file
  dir=$(mktemp -d /tmp/dlscale-XXXXXX)
  : >"$dir/made"
  # On any failure from here on, remove what was made so far.
  # shellcheck disable=SC2064  # dir is local: expand it now
  trap "tear_down '$dir'" EXIT
  switch=$(switch_namespace "$dir")
  ip netns add "$switch"
  echo "netns $switch" >>"$dir/made"
  ip -n "$switch" link add br0 type bridge
  ip -n "$switch" link set br0 up
  for ((k = 0; k < count; ++k)); do
    host=$(basename "$dir")-host$k
    ip netns add "$host"
    echo "netns $host" >>"$dir/made"
    uts_file=$dir/$host.uts
    touch "$uts_file"
    echo "uts $uts_file" >>"$dir/made"
    # A UTS namespace kept alive by a bind mount on uts_file: no holder process needed.
    unshare --uts="$uts_file" hostname "$host"
    ip -n "$host" link add eth0 type veth peer name port$k netns "$switch"
    ip -n "$switch" link set port$k master br0 up
    ip -n "$host" addr add "$subnet_prefix.$((k + 1))/24" dev eth0
    ip -n "$host" link set eth0 up
    ip -n "$host" link set lo up
    if [[ -n $rate ]]; then
      shape_link "$host" eth0 "$rate"      # what the host sends
      shape_link "$switch" "port$k" "$rate"  # what the host receives
    fi
    echo "$host" >>"$dir/hosts"
    echo "$host slots=$slots" >>"$dir/hostfile"
  done
  trap - EXIT
  echo "$dir"
}

enter_host() {
  local dir=$1 host=$2
  shift 2
  host_index "$dir" "$host" >/dev/null
  exec nsenter --net="/run/netns/$host" --uts="$dir/$host.uts" -- "$@"
}

command=${1:-}
(($#)) && shift
case $command in
  up)
    (($# >= 1)) || die "usage: up N [--rate RATE] [--slots S]"
    count=$1 rate='' slots=2
    shift
    while (($#)); do
      case $1 in
        --rate) rate=${2:?--rate needs a value such as 1gbit} ;;
        --slots) slots=${2:?--slots needs a number} ;;
        *) die "up: unknown option '$1'" ;;
      esac
      shift 2
    done
    bring_up "$count" "$rate" "$slots"
    ;;
  down)
    (($# == 1)) || die "usage: down DIR"
    require_cluster "$1"
    tear_down "$1"
    ;;
  hosts)
    (($# == 1)) || die "usage: hosts DIR"
    require_cluster "$1"
    cat "$1/hosts"
    ;;
  exec)
    (($# >= 3)) || die "usage: exec DIR HOST COMMAND [ARG...]"
    require_cluster "$1"
    enter_host "$@"
    ;;
  agent)
    # Open MPI calls its rsh agent as `AGENT HOST COMMAND-LINE`, the command line being one
    # string or several words, for a remote shell to run. Like an ssh client, the agent itself
    # stays on the launching host and ends with the remote command's status; and as sshd would,
    # it starts the command with a fresh environment, keeping only PATH and HOME.
    (($# >= 3)) || die "usage: agent DIR HOST COMMAND-LINE"
    require_cluster "$1"
    dir=$1 host=$2
    shift 2
    # bash's own notice of a killed child (stderr inside the braces) is dropped; the command's
    # stderr (fd 3) is kept.
    status=0
    exec 3>&2
    { (enter_host "$dir" "$host" env -i PATH="$PATH" HOME="$HOME" /bin/sh -c "$*" 2>&3 3>&-) \
        || status=$?; } 2>/dev/null
    exit "$status"
    ;;
  mpirun)
    (($# >= 1)) || die "usage: mpirun DIR [MPIRUN ARGS...]"
    require_cluster "$1"
    dir=$1
    shift
    # shellcheck source-path=SCRIPTDIR source=../../scripts/mpi-environment.sh
    source "$repository/scripts/mpi-environment.sh"
    # Daemons start through the agent; ranks on different hosts talk TCP over the emulated
    # network (vader, shared memory, only within a host); daemons reach mpirun over it too.
    # Open MPI's session directories go under DIR, so that `down` removes those of killed jobs.
    # Every emulated host sees all of the machine's cores, so binding (by default to cores in
    # order, per host) would put the first rank of every host on core 0; the kernel places the
    # ranks instead.
    enter_host "$dir" "$(head -n 1 "$dir/hosts")" \
      mpirun --hostfile "$dir/hostfile" --bind-to none \
      --mca plm_rsh_agent "$self agent $dir" \
      --mca orte_tmpdir_base "$dir/sessions" \
      --mca btl tcp,self,vader \
      --mca btl_tcp_if_include "$subnet" \
      --mca oob_tcp_if_include "$subnet" \
      "$@"
    ;;
  kill-host)
    (($# == 2)) || die "usage: kill-host DIR HOST"
    require_cluster "$1"
    host_index "$1" "$2" >/dev/null
    kill_namespace_processes "$2"
    ;;
  link)
    if (($# != 3)) || [[ $3 != up && $3 != down ]]; then die "usage: link DIR HOST up|down"; fi
    require_cluster "$1"
    ip -n "$(switch_namespace "$1")" link set "port$(host_index "$1" "$2")" "$3"
    if [[ $3 == up ]]; then wait_until_reachable "$1" "$2"; fi
    ;;
  *)
    die "unknown command '${command}'; see the header of $self"
    ;;
esac
