# cluster-validator, for `validator preflight` as a Kubernetes init container (docs/kubernetes.md).
#
#   docker build -t registry.example.com/cluster-validator:0.1.0 .
#
# Not built or run by this project's tests: the development machines have no container engine.
# Slim Python base, no compilers (every dependency installs from a wheel; the package itself is
# pure Python), a numeric non-root user so that `runAsNonRoot: true` can be verified.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# iproute2: `ip -j addr` gives the interface facts NCCL's choice is judged by (without it the
# agent falls back to ioctls, which see fewer details)
RUN apt-get update \
    && apt-get install -y --no-install-recommends iproute2 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin validator

WORKDIR /opt/cluster-validator
COPY pyproject.toml README.md ./
COPY validator ./validator
RUN pip install --prefer-binary . \
    && cd / && rm -rf /opt/cluster-validator /root/.cache

WORKDIR /
USER 10001:10001
ENTRYPOINT ["validator"]
CMD ["preflight", "--help"]
