#!/usr/bin/env bash
# A real, private, two-node Slurm for the tests: its own munged, slurmctld and two slurmd (nodes n1
# and n2, both on this host, each with its own port, spool and TmpFS, so that node-count studies
# of 1 and 2 nodes run) with their own key, socket, ports, state and spool directories under one
# directory, so it never touches (or clashes with) a Slurm or munge the machine already runs.
# Everything it starts is stopped by the PIDs it recorded.
#
#   local_slurm.sh start DIR   start the daemons; prints `export SLURM_CONF=...` for sbatch/srun
#   local_slurm.sh stop DIR    stop them (by recorded PID) and wait until they are gone
#
# Settings (what works with Debian 12's slurm-wlm and Open MPI): AuthType=auth/munge,
# ProctrackType=proctrack/linuxproc, TaskPlugin=task/affinity (so srun --cpu-bind works),
# SelectType=select/cons_tres, MpiDefault=pmix, a TmpFS per node (PMIx makes its directory for a
# step there, named by job and step only: two slurmd sharing /tmp would collide), and a
# cgroup.conf with CgroupPlugin=autodetect. The partition lets no two jobs share cores, so a job
# that asks for --exclusive gets Slurm's OverSubscribe=NO. Exit status 77 means Slurm or
# munge is not installed here (the caller reports a skip).
set -euo pipefail

action=${1:?usage: local_slurm.sh start|stop DIR}
dir=${2:?usage: local_slurm.sh start|stop DIR}

stop_daemons() {
  local pid_file pid
  for pid_file in "$dir"/slurmd-n1.pid "$dir"/slurmd-n2.pid "$dir"/slurmctld.pid \
    "$dir"/munged.pid; do
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

mkdir -p "$dir"/{state,munge,spool-n1,spool-n2,tmp-n1,tmp-n2}
chmod 700 "$dir/munge"
trap 'stop_daemons' ERR

# munge: a private key and socket.
mungekey --create --keyfile="$dir/munge/munge.key" --force 2>/dev/null
chmod 600 "$dir/munge/munge.key"
munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed" \
  --force

# Free TCP ports for slurmctld and slurmd, found by binding to port 0.
read -r controller_port node1_port node2_port < <(python3 - <<'PY'
import socket
sockets = [socket.socket() for _ in range(3)]
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
SlurmdPort=$node1_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge/munge.socket
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
SchedulerType=sched/backfill
ReturnToService=2
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool-%n
TmpFS=$dir/tmp-%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd-%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd-%n.log
JobCompType=jobcomp/none
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=n1 NodeHostname=$node NodeAddr=127.0.0.1 Port=$node1_port CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
NodeName=n2 NodeHostname=$node NodeAddr=127.0.0.1 Port=$node2_port CPUs=$cpus RealMemory=$memory_mb State=UNKNOWN
PartitionName=test Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
CONF
echo "CgroupPlugin=autodetect" >"$dir/cgroup.conf"

export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$dir/slurm.conf" -i
slurmd -f "$dir/slurm.conf" -N n1
slurmd -f "$dir/slurm.conf" -N n2
for _ in $(seq 100); do
  if (($(sinfo -h -N -o '%T' 2>/dev/null | grep -cE '^(idle|mixed|allocated)') == 2)); then
    echo "export SLURM_CONF=$dir/slurm.conf"
    exit 0
  fi
  sleep 0.2
done
echo "local_slurm: the nodes did not become idle; see $dir/slurmctld.log and $dir/slurmd-*.log" >&2
stop_daemons
exit 1
