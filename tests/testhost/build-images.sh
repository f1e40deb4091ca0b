#!/bin/bash
# Builds the throwaway systemd test-host images from Debian's archive with debootstrap, once.
# An image is tagged with a hash of this folder, so editing the recipe rebuilds it and nothing else
# does. Needs root, podman, runc and debootstrap (the Makefile's host-packages target installs them).
#   SUITES="bookworm trixie" tests/testhost/build-images.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/podman-env.sh"
SUITES=${SUITES:-bookworm}
MIRROR=${LLMOPS_DEBIAN_MIRROR:-http://deb.debian.org/debian}
TAG=$(cat "$HERE/build-images.sh" "$HERE/prep-rootfs.sh" | sha256sum | cut -c1-12)
W=$LLMOPS_CACHE/testhost; mkdir -p "$W"
PKGS=systemd,systemd-sysv,dbus,python3,python3-apt,sudo,iproute2,ca-certificates,curl,procps

build_one() {
  local S=$1 V IMG TGZ R
  case $S in bookworm) V=12;; trixie) V=13;; *) echo "unknown suite $S" >&2; return 2;; esac
  IMG=localhost/llmops-testhost-debian$V:$TAG
  if podman image exists "$IMG"; then echo "image $IMG: cached"; return 0; fi
  TGZ=$W/debian$V-$TAG.tar.gz
  if [ ! -s "$TGZ" ]; then
    R=$W/rootfs-$S; rm -rf "$R"
    echo "image $IMG: debootstrap $S (about 70-120 s)"
    debootstrap --variant=minbase --include=$PKGS "$S" "$R" "$MIRROR" > "$W/debootstrap-$S.log" 2>&1 \
      || { tail -20 "$W/debootstrap-$S.log"; return 1; }
    "$HERE/prep-rootfs.sh" "$R" "$S" "$MIRROR"
    tar --numeric-owner -C "$R" -c . | gzip -1 > "$TGZ.tmp" && mv "$TGZ.tmp" "$TGZ"
    rm -rf "$R"
  fi
  podman import --change 'CMD ["/sbin/init"]' --change 'ENV container=podman' \
    --change 'STOPSIGNAL SIGRTMIN+3' "$TGZ" "$IMG" >/dev/null
  # A stable name for molecule.yml and the demo inventory.
  podman tag "$IMG" "localhost/llmops-testhost-debian$V:latest"
  echo "image $IMG: built"
}

pids=()
for S in $SUITES; do build_one "$S" & pids+=($!); done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit $rc
