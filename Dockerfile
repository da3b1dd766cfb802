# cluster-validator, for `validator preflight` as a Kubernetes init container (docs/kubernetes.md).
#
#   scripts/image.sh registry.example.com/cluster-validator:0.1.0
#
# scripts/image.sh builds the dependency wheels on the host (the build needs no package index of its
# own), picks the engine that runs here (docker, else buildah or podman with chroot isolation) and,
# where python:3.11-slim cannot be pulled, a Debian bookworm base made with debootstrap (BASE).
# The tests build it that way and run it (tests/k8s/test_image.py). By hand:
#
#   .venv/bin/python -m pip wheel -q -w .cache/image/wheels . pip && docker build -t IMAGE .
#
# A slim Debian Python base, no compilers (every dependency installs from a wheel; the package itself
# is pure Python), no pip, caches or wheels in the result (they stay in the first stage), a numeric
# non-root user so that `runAsNonRoot: true` can be verified.
ARG BASE=python:3.11-slim
ARG WHEELS=.cache/image/wheels

FROM ${BASE} AS install
ARG WHEELS
COPY ${WHEELS} /wheels
# a venv without pip, filled by the pip of the wheel directory (run from its wheel): only the
# packages and the `validator` script end up in /opt/cluster-validator
RUN python3 -m venv --without-pip /opt/cluster-validator \
    && PIP=$(ls /wheels/pip-*.whl) \
    && /opt/cluster-validator/bin/python "$PIP/pip" install -q --no-index --find-links /wheels \
       --no-cache-dir --disable-pip-version-check --no-compile cluster-validator

FROM ${BASE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/cluster-validator/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# iproute2: `ip -j addr` gives the interface facts NCCL's choice is judged by (without it the
# agent falls back to ioctls, which see fewer details); the debootstrap base already has it
RUN if ! command -v ip >/dev/null; then \
        apt-get update && apt-get install -y --no-install-recommends iproute2 \
        && apt-get clean && rm -rf /var/lib/apt/lists/*; \
    fi \
    && useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin validator

COPY --from=install /opt/cluster-validator /opt/cluster-validator

USER 10001:10001
ENTRYPOINT ["validator"]
CMD ["preflight", "--help"]
