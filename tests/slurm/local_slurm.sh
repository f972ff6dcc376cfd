#!/usr/bin/env bash
# A real, private, single-node Slurm for the tests: its own munged, slurmctld and slurmd with
# their own key, socket, ports, state and spool directories under one directory, so it never
# touches (or clashes with) a Slurm or munge the machine already runs. Everything it starts is
# stopped by the PIDs it recorded.
#
#   local_slurm.sh start DIR   start the daemons; prints `export SLURM_CONF=...` for sbatch/srun
#   local_slurm.sh stop DIR    stop them (by recorded PID) and wait until they are gone
#
# Settings (what works with Debian 12's slurm-wlm and Open MPI): AuthType=auth/munge,
# ProctrackType=proctrack/linuxproc, TaskPlugin=task/none, SelectType=select/cons_tres,
# MpiDefault=pmix, and a cgroup.conf with CgroupPlugin=autodetect. Exit status 77 means Slurm or
# munge is not installed here (the caller reports a skip).
set -euo pipefail

action=${1:?usage: local_slurm.sh start|stop DIR}
dir=${2:?usage: local_slurm.sh start|stop DIR}

stop_daemons() {
  local pid_file pid
  for pid_file in "$dir"/slurmd.pid "$dir"/slurmctld.pid "$dir"/munged.pid; do
    [[ -s $pid_file ]] || continue
    pid=$(<"$pid_file")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$pid_file"
  done
}

if [[ $action == stop ]]; then
  stop_daemons
  exit 0
fi
[[ $action == start ]] || { echo "usage: local_slurm.sh start|stop DIR" >&2; exit 2; }

for program in munged mungekey slurmctld slurmd sbatch srun scontrol; do
  command -v "$program" >/dev/null || PATH=$PATH:/usr/sbin
  command -v "$program" >/dev/null || { echo "local_slurm: $program is not installed" >&2; exit 77; }
done

mkdir -p "$dir"/{state,spool,munge}
chmod 700 "$dir/munge"
trap 'stop_daemons' ERR

# munge: a private key and socket.
mungekey --create --keyfile="$dir/munge/munge.key" --force 2>/dev/null
chmod 600 "$dir/munge/munge.key"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
  --force

# Free TCP ports for slurmctld and slurmd, found by binding to port 0.
read -r controller_port node_port < <(python3 - <<'PY'
import socket
sockets = [socket.socket() for _ in range(2)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in sockets))
PY
)
node=$(hostname -s)
cpus=$(nproc)
memory_mb=$(awk '/MemTotal/ {print int($2 / 1024 * 0.8)}' /proc/meminfo)
user=$(id -un)
cat >"$dir/slurm.conf" <<CONF
ClusterName=dlscale-test
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$controller_port
SlurmdPort=$node_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=$node NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4
CONF
echo "CgroupPlugin=autodetect" >"$dir/cgroup.conf"

export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$dir/slurm.conf" -i
slurmd -f "$dir/slurm.conf"
for _ in $(seq 100); do
  if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
    echo "export SLURM_CONF=$dir/slurm.conf"
    exit 0
  fi
  sleep 0.2
done
echo "local_slurm: the node did not become idle; see $dir/slurmctld.log and $dir/slurmd.log" >&2
stop_daemons
exit 1
