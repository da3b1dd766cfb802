#!/usr/bin/env bash
# Set up the development environment, idempotently.
#   scripts/setup.sh          .venv with the package and its test tools (no torch, no services)
#   scripts/setup.sh --full   also what the whole test suite needs: Debian packages (OpenSSH server,
#                             Slurm, munge, iproute2, Chromium, buildah and debootstrap for the container
#                             image), torch==2.13.0 (CPU) + numpy, accelerate, deepspeed (no ops)
# Runs as root for --full (apt-get); pip caches are not needed.
set -euo pipefail
cd "$(dirname "$0")/.."
FULL=0; [ "${1:-}" = --full ] && FULL=1
PY=${PYTHON:-python3}

if [ "$FULL" = 1 ]; then
  need=()
  for pair in sshd:openssh-server ssh:openssh-client slurmctld:slurmctld slurmd:slurmd srun:slurm-client \
              munge:munge ip:iproute2 iptables:iptables chromium:chromium unshare:util-linux ps:procps bc:bc \
              buildah:buildah debootstrap:debootstrap; do
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
  # tests wrap) needs torch, so it comes after the pin, never in the package's extras; pinned too:
  # tests/facts/test_launchopts.py holds launchopts' table to its parser, which changes between
  # releases (1.16 dropped --fp8_opt_level and made --dynamo_use_dynamic's default None)
  pip install "torch==2.13.0" numpy
  pip install "torch==2.13.0" "accelerate==1.16.0"
fi
if [ "$FULL" = 1 ] && ! .venv/bin/python -c "import importlib.util as u; assert u.find_spec('deepspeed')" 2>/dev/null; then
  # deepspeed's launcher parser (tests/facts/test_launchopts.py): pure Python with no ops built
  # (DS_BUILD_OPS=0), built against the pinned CPU torch (no build isolation, which would pull CUDA)
  DS_BUILD_OPS=0 pip install --no-build-isolation "torch==2.13.0" "deepspeed==0.19.8"
fi
.venv/bin/python -c "import validator, typer, pytest, asyncssh, hypothesis, jsonschema, prometheus_client, build, ahocorasick_rs" 2>/dev/null || pip install -e ".[test]"
echo "setup: $(.venv/bin/validator --version)$( [ "$FULL" = 1 ] && .venv/bin/python -c 'import torch; print(", torch", torch.__version__)' 2>/dev/null)"
