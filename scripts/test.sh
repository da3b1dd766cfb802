#!/usr/bin/env bash
# The test command: install what the tests need (as root), lint, type-check, run the whole suite
# with its real services (sshd, Slurm daemons, network namespaces, torchrun), which the tests
# start and stop themselves.  Extra arguments go to pytest, e.g. scripts/test.sh -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --full
.venv/bin/ruff check validator tests benchmarks
.venv/bin/ruff format --check validator tests benchmarks
.venv/bin/mypy validator
.venv/bin/python -m validator.docs --check docs/checks
.venv/bin/python -m validator.schema --check docs/schema
# the container image (docs/integrations.md): built where a container engine answers, said plainly where not
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then
  docker build -q -t cluster-validator:test . && docker run --rm cluster-validator:test --version
else
  echo "test.sh: no container engine here: the Dockerfile was not built"
fi
VALIDATOR_REQUIRE_SERVICES=1 .venv/bin/python -m pytest -q "$@"
