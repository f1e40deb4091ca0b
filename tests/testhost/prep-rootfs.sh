#!/bin/bash
# Usage: prep-rootfs.sh <rootfs-dir> <suite> <mirror>
# Makes a debootstrapped Debian rootfs fit to run as a podman container with systemd as PID 1.
set -euo pipefail
R=$1; S=$2; M=$3
components="main"
# trixie's non-free carries the real 550 driver and CUDA 12.4 toolkit (the nvidia scenario uses them)
[ "$S" = trixie ] && components="main contrib non-free non-free-firmware"
cat > "$R/etc/apt/sources.list" <<EOS
deb $M $S $components
deb $M $S-updates $components
EOS
# Empty machine-id: systemd generates a fresh one at each boot, so every container gets its own.
: > "$R/etc/machine-id"; rm -f "$R/var/lib/dbus/machine-id"
echo testhost > "$R/etc/hostname"
# Drop debootstrap's download cache and package lists, as official images do: roles must update.
rm -rf "$R"/var/cache/apt/archives/*.deb "$R"/var/cache/apt/*.bin "$R"/var/lib/apt/lists/*_*
# Units that are useless or fail in a container, and apt timers that would race roles for dpkg.
for u in systemd-remount-fs.service getty.target console-getty.service \
         systemd-timesyncd.service systemd-udevd.service systemd-udev-trigger.service \
         sys-kernel-debug.mount sys-kernel-tracing.mount sys-kernel-config.mount \
         dev-hugepages.mount systemd-modules-load.service kmod-static-nodes.service \
         apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer; do
  ln -sf /dev/null "$R/etc/systemd/system/$u"
done
[ -e "$R/sbin/init" ] || ln -s /lib/systemd/systemd "$R/sbin/init"
