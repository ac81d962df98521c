#!/usr/bin/env bash
# Builds the guest image of the virtual machine test tier once and caches it by version
# under $BERTH_CACHE/vm/<key>/ (the key names the Debian
# kernel, containerd's and Node's versions and IMAGE_VERSION below). `make test-vm` runs it;
# `make deps` does not (several minutes under emulation).
#
#   vmlinux       the kernel of Debian's linux-image package (apt-get download, dpkg-deb -x,
#                 never installed on the host), uncompressed: the compressed image's
#                 decompressor is very slow under QEMU's TCG emulation
#   initrd.img    busybox plus the virtio, ext4 modules; mounts /dev/vda, switches root
#   base.qcow2    a bookworm rootfs by mmdebstrap: systemd, udev, dbus, openssh-server, runc,
#                 CNI plugins and iptables from Debian; containerd 2.x from the project's
#                 cached build; the project's pinned Node; the kernel's modules
#   golden.state  the machine's state after its first boot (hack/vm/golden.ts): guests
#                 resume from it in seconds over a per-VM overlay of base.qcow2
#   id_ed25519    the key the harness logs in with (root, over ssh)
#
# Prints the image directory on stdout; progress on stderr.
. "$(dirname "$0")/../lib.sh"
cd "$BERTH_ROOT"
[ "$(id -u)" = 0 ] || die "the VM image build needs root (mmdebstrap, mkfs)."

need=()
for p in qemu-system-x86 qemu-utils mmdebstrap busybox-static e2fsprogs kmod openssh-client xz-utils cpio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  log "vm: installing Debian packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  with_heartbeat "apt-get update" apt-get update -qq || die "apt-get update failed"
  with_heartbeat "apt-get install" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || die "apt-get install ${need[*]} failed; run it by hand to see why."
fi

# The kernel package the linux-image-amd64 metapackage points at today.
KPKG=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ {print $2; exit}')
[ -n "$KPKG" ] || die "cannot find Debian's linux-image package (apt-cache depends linux-image-amd64); run apt-get update"
KVER=${KPKG#linux-image-}
NODE_BIN="$BERTH_ROOT/node_modules/node/bin/node"
[ -x "$NODE_BIN" ] || die "no pinned Node at $NODE_BIN: run make deps"
NODE_V=$("$NODE_BIN" --version)
CONTAINERD_DIR="$BERTH_CACHE/bin/containerd-$CONTAINERD_VERSION"
[ -x "$CONTAINERD_DIR/containerd" ] || die "no containerd build at $CONTAINERD_DIR: run make deps"
# Bump IMAGE_VERSION when what this script puts into the image changes, or the machine
# definition (qemuArgs in test/harness/vm-qemu.ts: devices, memory, CPUs), since a saved
# state resumes only into the same machine.
IMAGE_VERSION=1
KEY="$KVER-containerd$CONTAINERD_VERSION-node$NODE_V-v$IMAGE_VERSION"
OUT="$BERTH_CACHE/vm/$KEY"
if [ -f "$OUT/READY" ]; then
  echo "$OUT"
  exit 0
fi

exec 9>"$BERTH_CACHE/vm.lock"
flock 9
if [ -f "$OUT/READY" ]; then echo "$OUT"; exit 0; fi
start=$SECONDS
log "vm: building the guest image $KEY (first use; about 10 minutes, cached afterwards)"
WORK="$OUT.tmp"
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK/rootfs" "$WORK/kernel" "$WORK/initrd"' EXIT

log "vm: kernel $KPKG (apt-get download, dpkg-deb -x)"
mkdir -p "$WORK/kernel"
(cd "$WORK/kernel" && apt-get download "$KPKG" >/dev/null) || die "apt-get download $KPKG failed"
dpkg-deb -x "$WORK"/kernel/*.deb "$WORK/kernel/x"
depmod -b "$WORK/kernel/x" "$KVER"
# vmlinuz is a boot stub plus an xz stream; the stream holds the ELF kernel.
off=$(LC_ALL=C grep -obUaP '\xfd7zXZ\x00' "$WORK/kernel/x/boot/vmlinuz-$KVER" | head -n1 | cut -d: -f1 || true)
[ -n "$off" ] || die "no xz stream in vmlinuz-$KVER"
tail -c +$((off + 1)) "$WORK/kernel/x/boot/vmlinuz-$KVER" | xz -dc 2>/dev/null > "$WORK/vmlinux" || true
head -c 4 "$WORK/vmlinux" | grep -q 'ELF' || die "the kernel extracted from vmlinuz-$KVER is not an ELF image"

log "vm: initrd (busybox, virtio and ext4 modules)"
I="$WORK/initrd"
mkdir -p "$I/bin" "$I/mods" "$I/dev" "$I/proc" "$I/sys" "$I/newroot"
cp /bin/busybox "$I/bin/busybox"
for a in sh mount umount switch_root insmod sleep cat mkdir echo; do ln -s busybox "$I/bin/$a"; done
modules_dep="$WORK/kernel/x/lib/modules/$KVER/modules.dep"
# Every module the root device needs, dependencies first (modules.dep lists them).
order=()
add_module() {
  local rel=$1 dep
  for seen in "${order[@]}"; do [ "$seen" = "$rel" ] && return 0; done
  for dep in $(awk -v m="$rel:" '$1 == m { $1 = ""; print }' "$modules_dep"); do add_module "$dep"; done
  order+=("$rel")
}
for m in virtio_pci virtio_blk ext4 crc32c_generic; do
  rel=$(awk -F: -v n="/$m.ko" 'index($1, n) == length($1) - length(n) + 1 { print $1; exit }' "$modules_dep")
  [ -n "$rel" ] || die "module $m not in modules.dep of $KVER"
  add_module "$rel"
done
: > "$I/mods/order"
for rel in "${order[@]}"; do
  cp "$WORK/kernel/x/lib/modules/$KVER/$rel" "$I/mods/"
  basename "$rel" >> "$I/mods/order"
done
cat > "$I/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /mods/order); do insmod /mods/$m 2>/dev/null; done
i=0
while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
mount -t ext4 -o rw /dev/vda /newroot || { echo "initrd: cannot mount /dev/vda"; sh; }
umount /proc /sys
mount --move /dev /newroot/dev
exec switch_root /newroot /sbin/init
EOF
chmod +x "$I/init"
(cd "$I" && find . | cpio -o -H newc --quiet | gzip -1) > "$WORK/initrd.img"

log "vm: root file system (mmdebstrap bookworm, systemd)"
ssh-keygen -q -t ed25519 -N '' -C berth-vm -f "$WORK/id_ed25519"
R="$WORK/rootfs"
with_heartbeat "mmdebstrap" mmdebstrap --quiet --variant=minbase \
  --include=systemd,systemd-sysv,udev,dbus,libpam-systemd,iproute2,iputils-ping,openssh-server,runc,containernetworking-plugins,iptables,conntrack,kmod,procps,util-linux,mount,ca-certificates,socat \
  bookworm "$R" || die "mmdebstrap failed"
cp -a "$WORK/kernel/x/lib/modules" "$R/lib/"
install -m 0755 "$CONTAINERD_DIR/containerd" "$CONTAINERD_DIR/containerd-shim-runc-v2" "$CONTAINERD_DIR/ctr" "$R/usr/local/bin/"
install -m 0755 "$NODE_BIN" "$R/usr/local/bin/node"
install -d -m 0700 "$R/root/.ssh"
install -m 0600 "$WORK/id_ed25519.pub" "$R/root/.ssh/authorized_keys"
echo berth-vm > "$R/etc/hostname"
: > "$R/etc/machine-id"
printf '/dev/vda / ext4 rw,relatime 0 1\n' > "$R/etc/fstab"
# eth0: QEMU's user-mode network (restrict=on: no route off the machine), for ssh only.
# eth1 (the host-only bridge) is addressed by the harness after each resume.
cat > "$R/etc/systemd/network/10-eth0.network" <<'EOF'
[Match]
Name=eth0
[Network]
Address=10.0.2.15/24
EOF
ln -sf /lib/systemd/system/systemd-networkd.service "$R/etc/systemd/system/multi-user.target.wants/systemd-networkd.service"
printf 'PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n' > "$R/etc/ssh/sshd_config.d/berth.conf"
# The serial console logs in as root without a password (debugging a stuck guest).
mkdir -p "$R/etc/systemd/system/serial-getty@ttyS0.service.d"
printf '[Service]\nExecStart=\nExecStart=-/sbin/agetty --autologin root --keep-baud 115200 %%I $TERM\n' \
  > "$R/etc/systemd/system/serial-getty@ttyS0.service.d/autologin.conf"
# Nodes route pods between each other; the host never forwards (nothing leaves the bridge).
printf 'net.ipv4.ip_forward=1\n' > "$R/etc/sysctl.d/90-berth.conf"
printf 'overlay\nbr_netfilter\n9p\n9pnet_virtio\n' > "$R/etc/modules-load.d/berth.conf"
# Mount points of the host's read-only 9p shares (mounted after each resume: QEMU cannot
# save a machine with a mounted 9p share).
mkdir -p "$R/berth" "$R/cache"
# containerd as a unit; the harness writes its config and starts it.
cat > "$R/etc/systemd/system/containerd.service" <<'EOF'
[Unit]
Description=containerd (berth VM tier)
After=network.target
[Service]
ExecStartPre=-/sbin/modprobe overlay
ExecStart=/usr/local/bin/containerd --config /etc/containerd/config.toml
Type=notify
Delegate=yes
KillMode=process
Restart=always
LimitNOFILE=infinity
TasksMax=infinity
OOMScoreAdjust=-999
[Install]
WantedBy=multi-user.target
EOF
systemctl --root "$R" mask apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1 || true
rm -f "$R"/etc/ssh/ssh_host_*
chroot "$R" ssh-keygen -A >/dev/null

log "vm: disk image"
truncate -s 6G "$WORK/rootfs.ext4"
mkfs.ext4 -q -L berth-root -d "$R" "$WORK/rootfs.ext4"
qemu-img convert -O qcow2 "$WORK/rootfs.ext4" "$WORK/base.qcow2"
rm -f "$WORK/rootfs.ext4"

log "vm: first boot and golden snapshot (hack/vm/golden.ts)"
with_heartbeat "golden boot" "$BERTH_ROOT/node_modules/.bin/node" hack/vm/golden.ts "$WORK" \
  || die "the golden boot failed; see $WORK/golden-console.log"
chmod 0444 "$WORK/base.qcow2" "$WORK/golden.state"
rm -rf "$WORK/rootfs" "$WORK/kernel" "$WORK/initrd"
secs=$((SECONDS - start))
size=$(du -sh "$WORK" | cut -f1)
printf 'key=%s\nkernel=%s\nbuild_seconds=%s\nsize=%s\nbuilt=%s\n' "$KEY" "$KPKG" "$secs" "$size" "$(date -u +%FT%TZ)" > "$WORK/BUILD-INFO"
rm -rf "$OUT"
mv "$WORK" "$OUT"
touch "$OUT/READY"
log "vm: image ready in $secs s, $size: $OUT"
echo "$OUT"
