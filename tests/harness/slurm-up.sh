#!/usr/bin/env bash
# Start a single-host SLURM "cluster" with N logical nodes (one slurmd per node,
# distinct ports, Debian's slurm-wlm 22.05 is built with multiple-slurmd support).
# No systemd needed. Everything lives under $SLURM_HARNESS_DIR (default /tmp/slurm-harness).
#
# usage: slurm-up.sh [NNODES=2] [AUTH=none|munge]
# then:  export SLURM_CONF=$SLURM_HARNESS_DIR/slurm.conf ; srun -N2 -n4 hostname
# stop:  slurm-down.sh
set -euo pipefail
NNODES=${1:-2}
AUTH=${2:-none}
D=${SLURM_HARNESS_DIR:-/tmp/slurm-harness}
CPUS=${SLURM_HARNESS_CPUS:-4}          # per logical node (over-declared; see config_overrides)
BASEPORT=${SLURM_HARNESS_BASEPORT:-17001}
CTLPORT=${SLURM_HARNESS_CTLPORT:-16817}
HOST=$(hostname -s)

if ! command -v slurmctld >/dev/null; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends slurmctld slurmd slurm-client munge >/dev/null
fi

mkdir -p "$D"/{state,log,run}
for i in $(seq 1 "$NNODES"); do mkdir -p "$D/spool/n$i"; done

if [ "$AUTH" = munge ]; then
  AUTHLINES="AuthType=auth/munge
CredType=cred/munge"
else
  AUTHLINES="AuthType=auth/none
CredType=cred/none"
fi

cat > "$D/slurm.conf" <<EOF
ClusterName=harness
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLPORT
SlurmUser=root
SlurmdUser=root
$AUTHLINES
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
# no cgroups: plain process-group tracking, no task affinity/containment
ProctrackType=proctrack/pgid
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
# trust the CPUs= below rather than the 2 real cores
SlurmdParameters=config_overrides
ReturnToService=2
SlurmctldTimeout=30
SlurmdTimeout=30
InactiveLimit=0
MinJobAge=30
KillWait=2
Waittime=0
EOF
# one line per logical node: own slurmd port, own loopback address 127.0.0.(10+i)
for i in $(seq 1 "$NNODES"); do
  echo "NodeName=n$i NodeHostname=$HOST NodeAddr=127.0.0.$((10 + i)) Port=$((BASEPORT + i - 1)) CPUs=$CPUS RealMemory=1000 State=UNKNOWN" >> "$D/slurm.conf"
done
echo "PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" >> "$D/slurm.conf"
# extra slurm.conf lines from the caller (e.g. Prolog=, HealthCheckProgram=), one per line
if [ -n "${SLURM_HARNESS_EXTRA_CONF:-}" ]; then printf '%s\n' "$SLURM_HARNESS_EXTRA_CONF" >> "$D/slurm.conf"; fi
# no cgroup.conf needed: proctrack/pgid + task/none + jobacct_gather/none never load cgroup code

if [ "$AUTH" = munge ]; then
  mkdir -p /run/munge && chown munge:munge /run/munge
  [ -s /etc/munge/munge.key ] || { /usr/sbin/mungekey -c -f; chown munge:munge /etc/munge/munge.key; }
  if ! munge -n </dev/null 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged --pid-file=/run/munge/munged.pid
    echo "munged pid $(cat /run/munge/munged.pid)"
  fi
fi

export SLURM_CONF="$D/slurm.conf"
slurmctld -f "$SLURM_CONF"          # daemonizes, writes pid file
for i in $(seq 1 "$NNODES"); do
  slurmd -f "$SLURM_CONF" -N "n$i"  # one daemon per logical node
done

# wait until all nodes are idle
for _ in $(seq 1 100); do
  if [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" -ge "$NNODES" ]; then break; fi
  sleep 0.1
done
sinfo -N
echo "export SLURM_CONF=$SLURM_CONF"
