#!/usr/bin/env bash
# Build the container image (the Dockerfile) with what works on this machine:
#   scripts/image.sh [TAG]                      (default cluster-validator:test)
# - wheels: every dependency and the package itself, built on the host into .cache/image/wheels
#   (the build stage installs them with --no-index: the build needs no package index of its own);
# - engine: docker where its daemon answers, else buildah (bud --isolation chroot), else podman
#   (build --isolation chroot); IMAGE_ENGINE=docker|buildah|podman chooses;
# - base: python:3.11-slim where it can be pulled, else Debian bookworm minbase + python3 + iproute2
#   made with debootstrap from DEBIAN_MIRROR (as root), kept as .cache/image/base-bookworm.tar and
#   imported once as localhost/cluster-validator-base:bookworm; IMAGE_BASE=IMAGE chooses.
# Every step is bounded (IMAGE_TIMEOUT, default 600 s each). Exit 0 built, 1 a step failed, 2 nothing
# here can build it. The last line is `image.sh: built TAG ...`.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-cluster-validator:test}
CACHE=.cache/image
LIMIT=${IMAGE_TIMEOUT:-600}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
SLIM=docker.io/library/python:3.11-slim
LOCAL_BASE=localhost/cluster-validator-base:bookworm
PY=${PYTHON:-.venv/bin/python}; [ -x "$PY" ] || PY=python3
die() { echo "image.sh: $2" >&2; exit "$1"; }
t0=$SECONDS
mkdir -p "$CACHE"
exec 9>"$CACHE/lock"
flock -w "$LIMIT" 9 || die 1 "another image.sh holds $CACHE/lock for more than $LIMIT s"

if [ -n "${IMAGE_ENGINE:-}" ]; then ENGINE=$IMAGE_ENGINE
elif command -v docker >/dev/null && timeout 20 docker info >/dev/null 2>&1; then ENGINE=docker
elif command -v buildah >/dev/null; then ENGINE=buildah
elif command -v podman >/dev/null; then ENGINE=podman
else die 2 "no container engine: install docker, or buildah (apt-get install buildah; scripts/setup.sh --full)"
fi
command -v "$ENGINE" >/dev/null || die 2 "IMAGE_ENGINE=$ENGINE: not installed"
has_image() {
  case $ENGINE in
    docker) docker image inspect "$1" >/dev/null 2>&1 ;;
    *) buildah inspect --type image "$1" >/dev/null 2>&1 || podman image exists "$1" 2>/dev/null ;;
  esac
}

rm -rf "$CACHE/wheels"
timeout "$LIMIT" "$PY" -m pip wheel -q --disable-pip-version-check -w "$CACHE/wheels" . pip \
  2> >(grep -v "is ignored" >&2) || die 1 "pip wheel failed: the package and its dependencies must build as wheels on this host"
t_wheels=$((SECONDS - t0))

clean_root() {  # a debootstrap killed by the timeout leaves /proc and /sys mounted in it
  umount -R "$CACHE/rootfs/proc" "$CACHE/rootfs/sys" 2>/dev/null || true
  rm -rf --one-file-system "$CACHE/rootfs"
}
debootstrap_base() {
  local tar=$CACHE/base-bookworm.tar root=$CACHE/rootfs
  if [ ! -s "$tar" ]; then
    [ "$(id -u)" = 0 ] || die 2 "$SLIM cannot be pulled and the debootstrap base needs root"
    command -v debootstrap >/dev/null || die 2 "$SLIM cannot be pulled and debootstrap is not installed"
    clean_root
    echo "image.sh: $SLIM cannot be pulled: making a Debian bookworm base with debootstrap from $MIRROR" >&2
    timeout "$LIMIT" debootstrap --variant=minbase --include=python3,iproute2 bookworm "$root" "$MIRROR" \
      >"$CACHE/debootstrap.log" 2>&1 \
      || { clean_root; die 1 "debootstrap from $MIRROR failed (unreachable mirror?): see $CACHE/debootstrap.log"; }
    # what a base image does not carry: package caches and lists, docs, the host's names and logs
    rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/* \
      "$root"/usr/share/info/* "$root"/usr/share/locale/* "$root"/var/log/* "$root"/debootstrap
    : >"$root/etc/hostname"; : >"$root/etc/resolv.conf"
    tar -C "$root" --numeric-owner -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    clean_root
  fi
  case $ENGINE in
    docker) docker import "$tar" "$LOCAL_BASE" >/dev/null ;;
    podman) podman import -q "$tar" "$LOCAL_BASE" >/dev/null ;;
    buildah) local c; c=$(buildah from -q scratch) && buildah add -q "$c" "$tar" / >/dev/null \
               && buildah commit -q --rm "$c" "$LOCAL_BASE" >/dev/null ;;
  esac || die 1 "could not import $tar as $LOCAL_BASE"
}

BASE=${IMAGE_BASE:-}
if [ -z "$BASE" ]; then
  if has_image "$SLIM" || timeout 60 "$ENGINE" pull -q "$SLIM" >/dev/null 2>&1; then BASE=$SLIM
  else
    has_image "$LOCAL_BASE" || debootstrap_base
    BASE=$LOCAL_BASE
  fi
fi
t_base=$((SECONDS - t0 - t_wheels))

args=(--build-arg "BASE=$BASE" -t "$TAG" .)
case $ENGINE in
  docker) build=(docker build -q "${args[@]}") ;;
  buildah) build=(buildah bud -q --isolation chroot "${args[@]}") ;;
  podman) build=(podman build -q --isolation chroot --layers=false "${args[@]}") ;;
  *) die 2 "IMAGE_ENGINE=$ENGINE: not one of docker, buildah, podman" ;;
esac
old=$("$ENGINE" images -q "$TAG" 2>/dev/null || true)
timeout "$LIMIT" "${build[@]}" >/dev/null || die 1 "${build[*]} failed"
# the image this tag named before, now untagged: removed, so that rebuilding keeps one copy
for id in $old; do [ "$id" = "$("$ENGINE" images -q "$TAG")" ] || "$ENGINE" rmi "$id" >/dev/null 2>&1 || true; done
echo "image.sh: built $TAG with $ENGINE from $BASE in $((SECONDS - t0)) s" \
  "(wheels ${t_wheels} s, base ${t_base} s, build $((SECONDS - t0 - t_wheels - t_base)) s)"
