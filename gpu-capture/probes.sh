#!/usr/bin/env bash
# Issues 23 and 24 on a GPU machine (device tool), one short prepared run: the node probes, GPU health
# facts, baseline, preflight --probes --smoke --groups and the NCCL groups rehearsal, on the real GPU.
# Everything lands in $OUT/probes.tgz (one .out/.err pair a step; .err ends with the step's rc and seconds).
# Runs on a machine without a GPU too (the CPU paths): try it here before spending device time.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}; C=/tmp/probes-capture/probes; rm -rf "$C"; mkdir -p "$C" "$OUT"  # packed into $OUT after each step
PY=${PY:-python3}
V="$PY -m validator"
if [ -d .whl ] && ! $PY -c "import ClusterShell, asyncssh, ahocorasick_rs" 2>/dev/null; then  # what the GPU image lacks (ClusterShell, asyncssh, ahocorasick-rs): carried wheels
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 MASTER_ADDR=127.0.0.1
log() { echo "[probes $(date +%T)] $*"; }
step() {  # NAME SECONDS COMMAND...; with ONLY="NAME ...", only those steps run
  local name=$1 t=$2; shift 2
  [ -n "${ONLY:-}" ] && [[ " $ONLY " != *" $name "* ]] && return 0
  log "$name"
  local t0=$SECONDS; timeout -k 5 "$t" "$@" > "$C/$name.out" 2> "$C/$name.err"
  echo "rc=$? seconds=$((SECONDS - t0))" >> "$C/$name.err"; tail -1 "$C/$name.err"
  tar -C "$C/.." -czf "$OUT/probes.tgz" probes  # what ran so far comes back even if the run is cut short
}
{ uptime; nproc; nvidia-smi -L; $PY -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.nccl.version() if torch.cuda.is_available() else "")'; } > "$C/machine.txt" 2>&1

# 1. the probes alone on a quiet machine: compute and memory as programs, then a CPU-only compute
step compute 90 $PY validator/probes/compute.py
step memory 90 $PY validator/probes/memory.py
step compute-cpu 90 env CUDA_VISIBLE_DEVICES= $PY validator/probes/compute.py
# 2. GPU health facts: the agent's raw output (NVML, then nvidia-smi), the three spellings of the health query
step raw-nvml 60 $PY validator/agent/probe.py --no-port-probe
step raw-nvidia-smi 60 $PY validator/agent/probe.py --no-port-probe --gpu-sources nvidia-smi
Q=$($PY -c 'import sys; sys.path.insert(0, "validator/agent"); import probe; print("\n".join(probe.SMI_HEALTH_QUERIES))')
i=0; for q in $Q; do step smi-health-q$i 20 nvidia-smi --query-gpu=$q --format=csv,noheader,nounits; i=$((i + 1)); done
step smi-q 30 nvidia-smi -q
step node-check 60 $V node-check --fail-on warning
step node-check-json 60 $V node-check -f json --fail-on never
# 3. scan --probes here, a baseline recorded here, and the scan judged against it
step scan-probes 90 $V scan --local --probes -f json --fail-on never
printf "name: gpu-node\ndescription: this machine, for the probe baselines\n" > "$C/profile.yaml"
step baseline-record 90 $V baseline record --local --profile "$C/profile.yaml" -o "$C/baseline.yaml"
step scan-baseline 90 $V scan --local --probes --profile "$C/baseline.yaml" --fail-on warning
# 4. the live preflight on the GPU with every rehearsal, then two ranks on one GPU (the gate must name it)
TR="$PY -m torch.distributed.run --nnodes=1 --node-rank=0 --master-addr=127.0.0.1"
step preflight-1gpu 120 $V preflight --probes --smoke --groups --layout tp=1,pp=1,dp=1 -o "$C/preflight-1gpu.json" -- $TR --nproc-per-node=1 --master-port=29581 gpu-capture/train_nccl.py
step preflight-2ranks-1gpu 120 $V preflight --smoke -o "$C/preflight-2ranks-1gpu.json" -- $TR --nproc-per-node=2 --master-port=29582 gpu-capture/train_nccl.py
# 5. the groups rehearsal over real NCCL, 8 per-rank participants on the one GPU: healthy, one rank slow in DP,
#    one that stops entering PP (its TP peer is held in NCCL's init), one whose stop holds rank 0 (the decider)
step groups-nccl8 90 $PY gpu-capture/nccl_groups.py 8 29583 tp=2,pp=2,dp=2
step groups-nccl8-slow 90 $PY gpu-capture/nccl_groups.py 8 29584 tp=2,pp=2,dp=2 delay:dp:3@5
step groups-nccl8-gone 120 $PY gpu-capture/nccl_groups.py 8 29585 tp=2,pp=2,dp=2 exit:pp@3
step groups-nccl8-rank0-held 120 $PY gpu-capture/nccl_groups.py 8 29586 tp=2,pp=2,dp=2 exit:tp@1
# 6. the per-pair all_reduce (netcheck/allreduce.py) over NCCL: two processes on the one GPU
if [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" allreduce-join "* ]]; then
  ( export NCCL_HOSTID=pair-a; timeout -k 5 60 $PY validator/netcheck/allreduce.py serve 127.0.0.1 lo 30 > "$C/allreduce-serve.out" 2> "$C/allreduce-serve.err" ) &
  for _ in $(seq 300); do [ -s "$C/allreduce-serve.out" ] && break; sleep 0.2; done
  read -r PORT BACKEND < <($PY -c 'import json,sys; d=json.loads(open(sys.argv[1]).readline()); print(d["port"], d["backend"])' "$C/allreduce-serve.out")
  NCCL_HOSTID=pair-b step allreduce-join 60 $PY validator/netcheck/allreduce.py join 127.0.0.1 "$PORT" "$BACKEND" lo 30
  wait
fi
# (benchmarks/groups_rehearsal.py is not run here: its 2 emulated nodes x 8 ranks on a one-GPU machine are
#  refused by GPU001, as they should be, and the machine gave its commands one CPU)
tar -C "$C/.." -czf "$OUT/probes.tgz" probes
log "done"
