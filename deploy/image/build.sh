#!/usr/bin/env bash
# Builds herald's container image (deploy/image/Containerfile) with buildah, FROM scratch:
# a static binary and the CA roots in a temporary build context, nothing pulled.
#
#   build.sh [IMAGE]    default IMAGE: $HERALD_IMAGE or localhost/herald:<version>
#
# HERALD_VERSION is the version stamped into the binary (`herald version`, the start-up log,
# the telemetry resource); default `git describe --tags --always --dirty`, or "dev" outside a
# git checkout. deploy/local/containers.sh installs buildah; `make image` runs both.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VERSION="${HERALD_VERSION:-$(git -C "$REPO" describe --tags --always --dirty 2>/dev/null || echo dev)}"
IMAGE="${1:-${HERALD_IMAGE:-localhost/herald:$VERSION}}"
CA_ROOTS=/etc/ssl/certs/ca-certificates.crt

[ -f "$CA_ROOTS" ] || { echo "image: $CA_ROOTS is missing: deploy/local/containers.sh install" >&2; exit 1; }
command -v buildah >/dev/null || { echo "image: buildah is missing: deploy/local/containers.sh install" >&2; exit 1; }

ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT

# Static (no libc: scratch has none), reproducible paths, symbols stripped.
CGO_ENABLED=0 go -C "$REPO" build -trimpath -ldflags "-s -w -X main.version=$VERSION" -o "$ctx/herald" ./cmd/herald
cp "$CA_ROOTS" "$ctx/ca-certificates.crt"

# vfs: no overlay mounts for containers on this kind of machine; chroot isolation: the build
# runs no command anyway (FROM scratch, COPY only).
buildah --storage-driver vfs bud --isolation chroot --quiet \
	--build-arg "VERSION=$VERSION" -t "$IMAGE" -f "$REPO/deploy/image/Containerfile" "$ctx" >/dev/null
echo "$IMAGE"
