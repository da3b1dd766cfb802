#!/usr/bin/env bash
# One short prepared run on a GPU machine (device tool): real NVML / nvidia-smi / procfs outputs
# for the GPU fact parsers, and real NCCL failures for diagnose. Everything lands in $OUT/capture.tgz.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/gpu-out}; C=$OUT/capture; mkdir -p "$C/fr"
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
PY=python3
log() { echo "[capture $(date +%T)] $*"; }
step() { local name=$1 t=$2; shift 2; log "$name"; timeout -k 5 "$t" "$@" > "$C/$name.out" 2> "$C/$name.err"; echo "rc=$?" >> "$C/$name.err"; }

# Real NCCL failures (2 ranks on the single GPU)
export OMP_NUM_THREADS=1 NCCL_DEBUG=WARN
FR="TORCH_FR_BUFFER_SIZE=2000 TORCH_NCCL_TRACE_BUFFER_SIZE=2000 TORCH_NCCL_DUMP_ON_TIMEOUT=1 TORCH_NCCL_DESYNC_DEBUG=1 NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1"
mkdir -p "$C/fr-skip" "$C/fr-mismatch"
step nccl-skipped-allreduce 200 env $FR TORCH_FR_DUMP_TEMP_FILE=$C/fr-skip/nccl_trace_rank_ $PY -m torch.distributed.run --nproc-per-node=2 --master-port=29562 gpu-capture/nccl_scenarios.py skip &
step nccl-mismatched-collective 200 env $FR TORCH_FR_DUMP_TEMP_FILE=$C/fr-mismatch/nccl_trace_rank_ $PY -m torch.distributed.run --nproc-per-node=2 --master-port=29563 gpu-capture/nccl_scenarios.py mismatch &
wait
ls -laR "$C"/fr* > "$C/fr-listing.txt" 2>&1
tar -C "$OUT" -czf "$OUT/capture.tgz" capture && rm -rf "$C"
log "done: $(ls -la $OUT)"
