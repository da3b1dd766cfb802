#!/usr/bin/env bash
# Stop the daemons started by slurm-up.sh, by PID (pid files), never by name.
set -uo pipefail
D=${SLURM_HARNESS_DIR:-/tmp/slurm-harness}
stop_pidfile() {
  local f=$1
  [ -f "$f" ] || return 0
  local p; p=$(cat "$f")
  if kill -0 "$p" 2>/dev/null; then
    kill -TERM "$p"
    for _ in $(seq 1 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$p" 2>/dev/null && kill -KILL "$p"
  fi
  rm -f "$f"
}
for f in "$D"/run/slurmd-*.pid; do stop_pidfile "$f"; done
stop_pidfile "$D/run/slurmctld.pid"
if [ "${1:-}" = --munge ]; then stop_pidfile /run/munge/munged.pid; fi
[ "${KEEP:-0}" = 1 ] || rm -rf "$D"
