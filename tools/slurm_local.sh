#!/bin/sh
# A real single-node SLURM cluster on this machine, from Debian's packages, to test
# `lmlow sweep --executor slurm` against: munged, slurmctld and slurmd with their state, logs and
# sockets in a private folder, so nothing of the machine's own configuration is touched.
#
#   sh tools/slurm_local.sh start      # prints `export SLURM_CONF=...`; sbatch/squeue use it
#   sh tools/slurm_local.sh status
#   sh tools/slurm_local.sh stop       # stops the daemons and removes the folder
#
# Needs root (slurmd starts jobs as their user) and, if missing, installs slurmctld, slurmd,
# slurm-client and munge with apt-get. proctrack/linuxproc and task/none: no cgroups needed.
# cred_expire=30 (default 120): how long SLURM holds a requeued job before it may start again;
# shorter, so that a preempted-and-requeued task resumes within the tests' patience.
# Folder: $LMLOW_SLURM_DIR (default /tmp/lmlow-slurm). Exit status 0 when the cluster answers.
set -eu
DIR=${LMLOW_SLURM_DIR:-/tmp/lmlow-slurm}
CONF=$DIR/slurm.conf

die() { echo "slurm_local: $*" >&2; exit 1; }

install_packages() {
    missing=""
    for p in slurmctld slurmd slurm-client munge; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
    done
    [ -z "$missing" ] && return 0
    command -v apt-get >/dev/null || die "no apt-get to install$missing"
    echo "slurm_local: installing$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
}

write_conf() {
    host=$(hostname -s)
    cpus=$(nproc)
    mem=$(awk '/MemTotal/ {print int($2 / 1024 * 0.9)}' /proc/meminfo)
    cat >"$CONF" <<EOF
ClusterName=lmlow-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=30
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
SlurmctldPort=${LMLOW_SLURM_PORT:-16817}
SlurmdPort=$(( ${LMLOW_SLURM_PORT:-16817} + 1 ))
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
MpiDefault=none
ReturnToService=2
KillWait=20
MinJobAge=600
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
}

start() {
    [ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their user)"
    install_packages
    [ -f "$DIR/slurmctld.pid" ] && stop quiet
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/munge"
    chmod 700 "$DIR/munge"
    write_conf
    dd if=/dev/urandom of="$DIR/munge/munge.key" bs=1024 count=1 2>/dev/null
    chmod 400 "$DIR/munge/munge.key"
    munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
        --seed-file="$DIR/munge/munge.seed" || die "munged did not start ($DIR/munge/munged.log)"
    slurmctld -f "$CONF" -i || die "slurmctld did not start ($DIR/slurmctld.log)"
    slurmd -f "$CONF" || die "slurmd did not start ($DIR/slurmd.log)"
    export SLURM_CONF="$CONF"
    i=0
    until sinfo -h -o %T 2>/dev/null | grep -Eq '^(idle|mixed|allocated)'; do
        i=$((i + 1))
        [ $i -gt 60 ] && die "the node did not come up in 30 s (sinfo: $(sinfo -h 2>&1 | head -1); logs in $DIR)"
        sleep 0.5
    done
    echo "export SLURM_CONF=$CONF"
}

stop() {
    for pidfile in "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"; do
        if [ -f "$pidfile" ]; then
            kill "$(cat "$pidfile")" 2>/dev/null || true
        fi
    done
    sleep 1
    for pidfile in "$DIR/slurmd.pid" "$DIR/slurmctld.pid" "$DIR/munge/munged.pid"; do
        if [ -f "$pidfile" ]; then
            kill -9 "$(cat "$pidfile")" 2>/dev/null || true
        fi
    done
    [ "${1:-}" = quiet ] || rm -rf "$DIR"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) SLURM_CONF=$CONF sinfo && SLURM_CONF=$CONF squeue ;;
    *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
