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
# the container image (docs/kubernetes.md, "The image"): built once here with buildah (what the tests
# run it with), its debootstrap base cached in .cache/image; tests/k8s/test_image.py runs this build
export VALIDATOR_TEST_IMAGE=localhost/cluster-validator:test
IMAGE_ENGINE=buildah scripts/image.sh "$VALIDATOR_TEST_IMAGE"
VALIDATOR_REQUIRE_SERVICES=1 .venv/bin/python -m pytest -q "$@"
