#!/usr/bin/env bash
# Set up the development environment, idempotently.
#   scripts/setup.sh          .venv with the package and its test tools (no torch, no services)
#   scripts/setup.sh --full   also what the whole test suite needs: Debian packages (OpenSSH server,
#                             Slurm, munge, iproute2, Chromium) and torch==2.13.0 (CPU) + numpy
# Runs as root for --full (apt-get); pip caches are not needed.
set -euo pipefail
cd "$(dirname "$0")/.."
FULL=0; [ "${1:-}" = --full ] && FULL=1
PY=${PYTHON:-python3}

if [ "$FULL" = 1 ]; then
  need=()
  for pair in sshd:openssh-server ssh:openssh-client slurmctld:slurmctld slurmd:slurmd srun:slurm-client \
              munge:munge ip:iproute2 chromium:chromium unshare:util-linux ps:procps bc:bc; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || [ -x "/usr/sbin/${pair%%:*}" ] || need+=("${pair#*:}")
  done
  if [ ${#need[@]} -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  fi
fi

[ -x .venv/bin/python ] || "$PY" -m venv .venv
pip() { .venv/bin/python -m pip -q --disable-pip-version-check "$@" 2> >(grep -v "is ignored" >&2); }
if [ "$FULL" = 1 ] && ! .venv/bin/python -c "import torch, accelerate" 2>/dev/null; then
  # exactly 2.13.0: an unpinned torch pulls a multi-GB CUDA build. accelerate (a launch path the
  # tests wrap) needs torch, so it comes after the pin, never in the package's extras.
  pip install "torch==2.13.0" numpy
  pip install "torch==2.13.0" accelerate
fi
.venv/bin/python -c "import validator, typer, pytest, asyncssh, hypothesis, jsonschema, prometheus_client, build" 2>/dev/null || pip install -e ".[test]"
echo "setup: $(.venv/bin/validator --version)$( [ "$FULL" = 1 ] && .venv/bin/python -c 'import torch; print(", torch", torch.__version__)' 2>/dev/null)"
