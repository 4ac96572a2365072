#!/bin/bash
# A single-node Slurm cluster for tests, from Debian's packages (slurmctld,
# slurmd, slurm-client, munge): config, key, state and logs in one folder,
# daemons talking over loopback, nothing read from /etc/slurm or /etc/munge.
#   cluster.sh start DIR   DIR must be empty or missing; prints nothing on
#                          success, then `export SLURM_CONF=DIR/slurm.conf`
#                          makes sbatch/squeue/scontrol talk to it
#   cluster.sh stop DIR    cancels its jobs, stops the daemons it started (by
#                          the PIDs it wrote into DIR) and waits for them
# Runs as root (SlurmUser=root) or as any user who owns DIR (SlurmUser = that
# user). No cgroups: processes are tracked by parent PID
# (proctrack/linuxproc), tasks get no affinity (task/none).
set -euo pipefail

usage() { echo "usage: cluster.sh start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
cmd=$1
dir=$2

# Two free loopback ports (the kernel picks them; a race with another program
# taking one in between is possible but harmless: the daemon then fails to start).
free_ports() {
  python3 - <<'PY'
import socket
socks = []
for _ in range(2):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# Waits up to $2 tenths of a second for command $1 to succeed; gives up at
# once when the process whose PID is in file $3 (if given) has exited.
wait_for() {
  local tries=$2 pid_file=${3:-}
  while ! eval "$1" >/dev/null 2>&1; do
    tries=$((tries - 1))
    [ "$tries" -gt 0 ] || return 1
    if [ -n "$pid_file" ] && ! kill -0 "$(cat "$pid_file")" 2>/dev/null; then return 1; fi
    sleep 0.1
  done
}

# Stops the daemon whose PID is in file $1: TERM, up to 10 s, then KILL.
stop_pid_file() {
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    wait_for "! kill -0 $pid" 100 || kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

start() {
  for b in munged slurmctld slurmd sbatch; do
    command -v "$b" >/dev/null || { echo "cluster.sh: $b not found (Debian: munge slurmctld slurmd slurm-client)" >&2; exit 3; }
  done
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir")" ] || { echo "cluster.sh: $dir is not empty" >&2; exit 2; }
  # munged insists that every folder above its socket be searchable by all,
  # and that its key be private.
  chmod 755 "$dir"
  mkdir -p "$dir/munge" "$dir/socket" "$dir/state" "$dir/spool" "$dir/log" "$dir/pid"
  chmod 700 "$dir/munge" "$dir/state" "$dir/spool"
  chmod 755 "$dir/socket"
  head -c 1024 /dev/urandom >"$dir/munge/munge.key"
  chmod 400 "$dir/munge/munge.key"
  local user cpus ports
  user=$(id -un)
  cpus=$(nproc)
  read -r -a ports <<<"$(free_ports)"
  : >"$dir/plugstack.conf"
  cat >"$dir/slurm.conf" <<CONF
ClusterName=stoketest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=${ports[0]}
SlurmdPort=${ports[1]}
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/socket/munge.sock
PlugStackConfig=$dir/plugstack.conf
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/pid/slurmctld.pid
SlurmdPidFile=$dir/pid/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
KillWait=5
NodeName=stokenode NodeAddr=127.0.0.1 NodeHostname=$(hostname) CPUs=$cpus State=UNKNOWN
PartitionName=stoke Nodes=stokenode Default=YES MaxTime=INFINITE State=UP
CONF
  export SLURM_CONF="$dir/slurm.conf"
  # The daemons run in the foreground (-D) as our children's children, so
  # their PIDs are the ones $! gives; stop() ends exactly those.
  munged -F --socket="$dir/socket/munge.sock" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --seed-file="$dir/munge/seed" --log-file="$dir/log/munged.log" \
    >"$dir/log/munged.out" 2>&1 &
  echo $! >"$dir/pid/munged"
  wait_for "munge -S '$dir/socket/munge.sock' -n" 100 "$dir/pid/munged" ||
    { echo "cluster.sh: munged did not start:" >&2; cat "$dir/log/munged.out" >&2; stop; exit 1; }
  slurmctld -D -c >"$dir/log/slurmctld.out" 2>&1 &
  echo $! >"$dir/pid/slurmctld"
  wait_for "scontrol ping | grep -q UP" 150 "$dir/pid/slurmctld" ||
    { echo "cluster.sh: slurmctld did not start:" >&2; tail -20 "$dir/log/slurmctld.out" >&2; stop; exit 1; }
  slurmd -D -N stokenode >"$dir/log/slurmd.out" 2>&1 &
  echo $! >"$dir/pid/slurmd"
  wait_for "sinfo -h -n stokenode -o %t | grep -qx idle" 300 "$dir/pid/slurmd" ||
    { echo "cluster.sh: slurmd did not register:" >&2; tail -20 "$dir/log/slurmd.out" >&2; stop; exit 1; }
}

stop() {
  export SLURM_CONF="$dir/slurm.conf"
  if [ -s "$dir/pid/slurmctld" ] && kill -0 "$(cat "$dir/pid/slurmctld")" 2>/dev/null; then
    scancel --full --quiet --user="$(id -un)" 2>/dev/null || true
    wait_for '[ -z "$(squeue -h 2>/dev/null)" ]' 150 || true
  fi
  stop_pid_file "$dir/pid/slurmd"
  stop_pid_file "$dir/pid/slurmctld"
  stop_pid_file "$dir/pid/munged"
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) usage ;;
esac
