#!/usr/bin/env bash
# Boots a tiny VM inside the virt-launcher image that
# hack/tools/kubevirt-node.sh built, without Kubernetes: the image's layer
# unpacked into a directory, then, in new mount, PID, network, IPC and UTS
# namespaces (loopback only; nothing leaves the machine), chrooted into it
# as the image's user (107, qemu) with the environment virt-controller
# gives the launcher container (XDG_CACHE_HOME and XDG_CONFIG_HOME
# /var/run/kubevirt-private, XDG_RUNTIME_DIR /var/run), it does what
# virt-launcher does before it defines a domain (pkg/virt-launcher/virtwrap/
# util/libvirt_helper.go):
#   - copies /etc/libvirt/qemu.conf to /var/run/kubevirt-private/libvirt/qemu.conf
#     and /etc/libvirt/virtqemud.conf to /var/run/libvirt/virtqemud.conf;
#   - starts /usr/sbin/virtlogd -f /etc/libvirt/virtlogd.conf and
#     /usr/sbin/virtqemud -f /var/run/libvirt/virtqemud.conf;
# then, with virsh on virt-launcher's URI
# (qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock), defines
# and starts a domain: TCG (<domain type='qemu'>, no KVM), 256 MiB, one
# vCPU, q35, direct kernel boot of hack/tools/smoke-guest.sh's Debian cloud
# kernel and busybox initramfs, its serial port (ttyS0) written to a file
# through virtlogd. The guest prints "virtop-guest-ok" and powers off; the
# script waits for the domain to shut off and checks the serial log for
# that line.
#
# What it leaves, in <cache>/kubevirt-<release>/smoke/: serial0.log (the
# guest's console), qemu.log (libvirt's log of the QEMU process, its
# command line), virtqemud.log, virtlogd.log, domain.xml, timings.
#
# Needs root (unshare, chroot, mknod), the image
# <cache>/kubevirt-<release>/images/virt-launcher.tar (make node-images-vm)
# and the smoke guest (built by smoke-guest.sh when missing; Debian's
# mirror needed then).
#
# Usage: hack/tools/launcher-smoke.sh [RELEASE]   (default v1.9.0)
# Environment: VIRTOP_TOOLS_DIR, SMOKE_TIMEOUT (seconds the VM may take, default 300).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rel="${1:-v1.9.0}"
cache="${VIRTOP_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/virtop/tools}"
timeout="${SMOKE_TIMEOUT:-300}"
QEMU_ID=107
GUEST_OK=virtop-guest-ok
URI="qemu+unix:///session?socket=/var/run/libvirt/virtqemud-sock"

# shellcheck source=common.sh
source "${here}/common.sh"

[[ "$(id -u)" -eq 0 ]] || die "run as root (unshare, chroot, mknod)"
image="${cache}/kubevirt-${rel}/images/virt-launcher.tar"
[[ -f "${image}" ]] || die "no ${image}: make node-images-vm KUBEVIRT_RELEASE=${rel} builds it"
guest="$("${here}/smoke-guest.sh" | tail -1)"
[[ -f "${guest}/vmlinuz" && -f "${guest}/initrd.img" ]] || die "smoke-guest.sh made no guest"

out="${cache}/kubevirt-${rel}/smoke"
rm -rf "${out}"
mkdir -p "${out}"
work="$(mktemp -d "${cache}/.launcher-smoke.XXXXXX")"
tmp_files+=("${work}")
root="${work}/root"
mkdir -p "${root}" "${work}/image"

# The image's layers, in order, as containerd would unpack them.
tar -xf "${image}" -C "${work}/image" manifest.json
mapfile -t layers < <(grep -o '"Layers":\[[^]]*\]' "${work}/image/manifest.json" | sed 's/^"Layers":\[//; s/\]$//' | tr ',' '\n' | tr -d '"')
[[ ${#layers[@]} -gt 0 ]] || die "${image}: manifest.json names no layers"
for l in "${layers[@]}"; do
	tar -xOf "${image}" "${l}" | gzip -dcf | tar -x --numeric-owner --xattrs --xattrs-include='*' -C "${root}"
done

# What the pod gives the container: emptyDirs owned by the qemu user at
# /var/run/libvirt and /var/run/kubevirt-private, the guest's files.
install -d -o "${QEMU_ID}" -g "${QEMU_ID}" "${root}/run/libvirt" "${root}/run/kubevirt-private" \
	"${root}/run/kubevirt-private/smoke"
install -m 0644 -o "${QEMU_ID}" -g "${QEMU_ID}" "${guest}/vmlinuz" "${guest}/initrd.img" "${root}/run/kubevirt-private/smoke/"
cat >"${root}/run/kubevirt-private/smoke/domain.xml" <<'EOF'
<domain type='qemu'>
  <name>virtop-smoke</name>
  <memory unit='MiB'>256</memory>
  <vcpu>1</vcpu>
  <os>
    <type arch='x86_64' machine='q35'>hvm</type>
    <kernel>/var/run/kubevirt-private/smoke/vmlinuz</kernel>
    <initrd>/var/run/kubevirt-private/smoke/initrd.img</initrd>
    <cmdline>console=ttyS0 panic=-1 quiet</cmdline>
  </os>
  <features><acpi/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <serial type='file'>
      <source path='/var/run/kubevirt-private/smoke/serial0.log'/>
      <target port='0'/>
    </serial>
    <console type='file'>
      <source path='/var/run/kubevirt-private/smoke/serial0.log'/>
      <target type='serial' port='0'/>
    </console>
    <memballoon model='none'/>
  </devices>
</domain>
EOF
chown "${QEMU_ID}:${QEMU_ID}" "${root}/run/kubevirt-private/smoke/domain.xml"

# Runs as the qemu user, chrooted, in the namespaces.
cat >"${root}/run/kubevirt-private/smoke/inner.sh" <<EOF
#!/bin/bash
set -u
s=/var/run/kubevirt-private/smoke
now() { date +%s.%N; }
el() { awk -v a="\$1" -v b="\$2" 'BEGIN { printf "%.1f", b - a }'; }
t0=\$(now)
mkdir -p /var/run/kubevirt-private/libvirt
cp /etc/libvirt/qemu.conf /var/run/kubevirt-private/libvirt/qemu.conf
cp /etc/libvirt/virtqemud.conf /var/run/libvirt/virtqemud.conf
/usr/sbin/virtlogd -f /etc/libvirt/virtlogd.conf >\$s/virtlogd.log 2>&1 &
/usr/sbin/virtqemud -f /var/run/libvirt/virtqemud.conf >\$s/virtqemud.log 2>&1 &
for i in \$(seq 1 300); do [ -S /var/run/libvirt/virtqemud-sock ] && break; sleep 0.1; done
[ -S /var/run/libvirt/virtqemud-sock ] || { echo "virtqemud made no socket"; exit 1; }
t1=\$(now)
echo "daemons up in \$(el \$t0 \$t1)s"
virsh -q -c '${URI}' version || exit 1
virsh -q -c '${URI}' define \$s/domain.xml || exit 1
t2=\$(now)
virsh -q -c '${URI}' start virtop-smoke || exit 1
t3=\$(now)
echo "virsh start returned in \$(el \$t2 \$t3)s"
ok=""
for i in \$(seq 1 \$((${timeout} * 5))); do
	if [ -z "\$ok" ] && grep -q '${GUEST_OK}' \$s/serial0.log 2>/dev/null; then ok=\$(now); echo "${GUEST_OK} on the serial console \$(el \$t2 \$ok)s after virsh start"; fi
	st=\$(virsh -q -c '${URI}' domstate virtop-smoke 2>/dev/null)
	[ "\$st" = "shut off" ] && break
	sleep 0.2
done
t4=\$(now)
st=\$(virsh -q -c '${URI}' domstate --reason virtop-smoke 2>&1)
echo "domain state: \$st, \$(el \$t2 \$t4)s after virsh start"
if [ "\${st%% (*}" != "shut off" ]; then virsh -q -c '${URI}' destroy virtop-smoke; fi
virsh -q -c '${URI}' undefine virtop-smoke >/dev/null
cp /var/run/kubevirt-private/libvirt/qemu/log/virtop-smoke.log \$s/qemu.log 2>/dev/null
[ -n "\$ok" ]
EOF
chmod 0755 "${root}/run/kubevirt-private/smoke/inner.sh"

# The namespaces: a private /dev with the nodes a container gets, proc of
# the new PID namespace, sysfs; only loopback in the network namespace.
rc=0
unshare --mount --pid --net --ipc --uts --fork --kill-child --propagation private bash -ec '
	root="$1" uid="$2"
	ip link set lo up 2>/dev/null || true
	mount -t proc proc "${root}/proc"
	mount -t sysfs -o ro sysfs "${root}/sys"
	mount -t tmpfs -o mode=0755,nosuid dev "${root}/dev"
	for n in "null 1 3" "zero 1 5" "full 1 7" "random 1 8" "urandom 1 9" "tty 5 0"; do
		set -- ${n}
		mknod -m 0666 "${root}/dev/$1" c "$2" "$3"
	done
	mkdir -p "${root}/dev/pts" "${root}/dev/shm"
	mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "${root}/dev/pts"
	ln -s pts/ptmx "${root}/dev/ptmx"
	mount -t tmpfs -o mode=1777 shm "${root}/dev/shm"
	exec chroot --userspec="${uid}:${uid}" --groups="${uid}" "${root}" /usr/bin/env -i \
		PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/home/qemu LC_ALL=C \
		XDG_CACHE_HOME=/var/run/kubevirt-private XDG_CONFIG_HOME=/var/run/kubevirt-private XDG_RUNTIME_DIR=/var/run \
		/var/run/kubevirt-private/smoke/inner.sh
' bash "${root}" "${QEMU_ID}" 2>&1 | tee "${out}/timings" || rc=$?

for f in serial0.log qemu.log virtqemud.log virtlogd.log domain.xml; do
	[[ -f "${root}/run/kubevirt-private/smoke/${f}" ]] && cp "${root}/run/kubevirt-private/smoke/${f}" "${out}/${f}"
done
echo "--- serial console (${out}/serial0.log):"
cat "${out}/serial0.log" 2>/dev/null || echo "(none)"
if [[ ${rc} -ne 0 ]] || ! grep -q "${GUEST_OK}" "${out}/serial0.log" 2>/dev/null; then
	echo "--- virtqemud.log (tail):"
	tail -20 "${out}/virtqemud.log" 2>/dev/null || true
	echo "--- qemu.log (tail):"
	tail -20 "${out}/qemu.log" 2>/dev/null || true
	die "the smoke VM did not print ${GUEST_OK} (logs in ${out})"
fi
echo "ok: the VM booted in the virt-launcher ${rel} image and printed ${GUEST_OK} (logs in ${out})"
