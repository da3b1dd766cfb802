#!/usr/bin/env bash
# The built-in example: set up, then run the main jobs on this machine alone.
#  1. four ranks of one job, hand-set environments, probed and checked (`validator probe` + `check`):
#     a duplicate rank, a WORLD_SIZE outlier, a MASTER_ADDR that resolves to loopback;
#  2. the same four ranks rehearsing their rendezvous for real (`validator preflight`), once
#     broken and once healthy, where the pass execs the real command.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
export PATH="$PWD/.venv/bin:$PATH"
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
port=$(python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
# a routable address of this machine (the "master"), as the good ranks would use
master=$(validator probe --json | python -c 'import json,sys; a=json.load(sys.stdin)["network"]["nccl"]["addr"]; print((a or "127.0.0.1").split("/")[0])')

rank() { # RANK LOCAL_RANK WORLD_SIZE NODE MASTER_ADDR
  env -i PATH="$PATH" RANK=$1 LOCAL_RANK=$2 WORLD_SIZE=$3 LOCAL_WORLD_SIZE=2 GROUP_RANK=$4 MASTER_ADDR=$5 MASTER_PORT=$port "${@:6}"
}
echo "== 1. validator probe --json on four ranks, then validator check"
rank 0 0 4 0 "$master" validator probe --json > "$work/rank0.json"
rank 1 1 4 0 "$master" validator probe --json > "$work/rank1.json"
rank 1 0 4 1 localhost validator probe --json > "$work/rank2.json"   # duplicate RANK=1, MASTER_ADDR=localhost
rank 3 1 8 1 "$master" validator probe --json > "$work/rank3.json"   # WORLD_SIZE=8
validator check "$work"/rank*.json && true
echo "(validator check exited $?: 0 pass, 1 findings, 2 bad input, 3 incomplete)"

echo; echo "== 2a. validator preflight: four ranks rendezvous on 127.0.0.1:$port, rank 3 has WORLD_SIZE=8"
for r in 0 1 2 3; do
  ws=4; [ $r = 3 ] && ws=8
  quiet=--quiet; [ $r = 0 ] && quiet=   # the coordinator (rank 0) prints the whole report
  env -i PATH="$PATH" RANK=$r LOCAL_RANK=$r WORLD_SIZE=$ws MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    validator preflight --timeout 20 $quiet -- echo "rank $r: training would start here" &
done
wait || true
sleep 0.5
echo; echo "== 2b. the same, healthy: every rank passes and execs its command"
for r in 0 1 2 3; do
  env -i PATH="$PATH" RANK=$r LOCAL_RANK=$r WORLD_SIZE=4 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    validator preflight --timeout 20 --quiet -- echo "rank $r: training starts" &
done
wait
echo; echo "Next: validator explain RNK004; docs/usage.md; validator preflight --help"
