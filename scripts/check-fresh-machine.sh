#!/usr/bin/env bash
# Proves the README's two commands on a fresh Debian 12 root, so that a package
# installed by hand on a developer's or CI's machine cannot hide a missing
# install step (it happened: libdnnl-dev's CMake config needs OpenCL, which
# only a hand-installed package provided).
#
#   scripts/check-fresh-machine.sh           run-default.sh, then the full test.sh
#   scripts/check-fresh-machine.sh --quick   run-default.sh, then test.sh --quick
#
# How: mmdebstrap builds a minimal bookworm root in a temp folder; the committed
# tree (git archive of HEAD, so nothing uncommitted or ignored leaks in) and the
# fixtures are copied in beside each other as on a developer's machine; the root
# gets its own /dev nodes made with mknod and its own proc, devpts, shm and
# read-only sysfs mounts — never a bind mount of the host's /dev, where a package's maintainer
# script could replace the host's /dev/null. Then both README commands run in a
# chroot. The CUDA toolkit is not a Debian package, so the fresh root builds
# the CPU backend only (the CUDA compile is CI's job). Needs root and network
# access to Debian's package mirrors. Everything is removed at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
test_args=()
[ "${1:-}" = "--quick" ] && test_args=(--quick)
fixtures="${STOKE_FIXTURES:-$(cd .. && pwd)/shared/fixtures}"
[ -d "$fixtures/models" ] || { echo "check-fresh-machine: fixtures not found at $fixtures (set STOKE_FIXTURES)" >&2; exit 1; }
[ "$(id -u)" -eq 0 ] || { echo "check-fresh-machine: needs root (mmdebstrap, chroot, mknod)" >&2; exit 1; }
if ! command -v mmdebstrap >/dev/null 2>&1; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends mmdebstrap >/dev/null
fi

root=$(mktemp -d "${STOKE_FRESH_ROOT_PARENT:-/var/tmp}/stoke-fresh-root-XXXXXX")
mounts=()
cleanup() {
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do umount "${mounts[i]}" 2>/dev/null || umount -l "${mounts[i]}" || true; done
  # --one-file-system: if an unmount failed, never descend into what is still mounted.
  rm -rf --one-file-system "$root"
}
trap cleanup EXIT

echo "== fresh Debian 12 root in $root"
# chroot/mount is skipped: mmdebstrap would bind-mount parts of the host's /dev
# where it cannot mknod; this script makes the root's own nodes below.
mmdebstrap --variant=minbase --skip=chroot/mount \
  bookworm "$root" \
  "deb http://deb.debian.org/debian bookworm main" \
  "deb http://deb.debian.org/debian bookworm-updates main" \
  "deb http://deb.debian.org/debian-security bookworm-security main"

# The root's own /dev: device nodes made for it, not the host's.
rm -rf "$root/dev" && mkdir -m 755 "$root/dev"
mknod -m 666 "$root/dev/null" c 1 3
mknod -m 666 "$root/dev/zero" c 1 5
mknod -m 666 "$root/dev/full" c 1 7
mknod -m 666 "$root/dev/random" c 1 8
mknod -m 666 "$root/dev/urandom" c 1 9
mknod -m 666 "$root/dev/tty" c 5 0
ln -s /proc/self/fd "$root/dev/fd"
ln -s /proc/self/fd/0 "$root/dev/stdin"
ln -s /proc/self/fd/1 "$root/dev/stdout"
ln -s /proc/self/fd/2 "$root/dev/stderr"
mkdir -m 755 "$root/dev/pts" && mkdir -m 1777 "$root/dev/shm"
ln -s pts/ptmx "$root/dev/ptmx"
mount -t devpts -o newinstance,ptmxmode=0666 devpts "$root/dev/pts" && mounts+=("$root/dev/pts")
mount -t tmpfs -o mode=1777 shm "$root/dev/shm" && mounts+=("$root/dev/shm")
mount -t proc proc "$root/proc" && mounts+=("$root/proc")
# A machine has /sys and a cgroup hierarchy: slurmd refuses to start without
# one even when, as in the Slurm test, no cgroup is used. All read-only, so
# nothing in the root can change the host through them: a cgroup2 mount where
# the host has cgroup v2; else the v1 layout slurmd looks for, a tmpfs holding
# the named "systemd" hierarchy.
mkdir -p "$root/sys"
mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys" && mounts+=("$root/sys")
cg="$root/sys/fs/cgroup"
if [ "$(stat -f -c %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
  mount -t cgroup2 -o ro,nosuid,nodev,noexec cgroup2 "$cg" && mounts+=("$cg")
else
  mount -t tmpfs -o nosuid,nodev,noexec,size=4k cgroup "$cg" && mounts+=("$cg")
  mkdir "$cg/systemd"
  mount -t cgroup -o ro,nosuid,nodev,noexec,none,name=systemd cgroup "$cg/systemd" && mounts+=("$cg/systemd")
  mount -o remount,ro "$cg"
fi
cp /etc/resolv.conf "$root/etc/resolv.conf"
# The network's own certificate authorities (e.g. a TLS-intercepting egress
# proxy's), which the host added by hand to /usr/local/share/ca-certificates:
# part of the network the fresh machine sits on, not a package stoke needs.
# ca-certificates (setup.sh installs it) adds them to the root's bundle, so
# pip inside the root reaches PyPI as pip on the host does.
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi

echo "== the committed tree ($(git rev-parse --short HEAD)) and the fixtures"
mkdir -p "$root/work/stoke" "$root/work/shared"
git -C "$repo" archive HEAD | tar -x -C "$root/work/stoke"
cp -a "$fixtures" "$root/work/shared/fixtures"

run_in_root() {
  chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    LANG=C.UTF-8 STOKE_FUZZ_SECONDS="${STOKE_FUZZ_SECONDS:-5}" /bin/bash -c "cd /work/stoke && $1"
}
echo "== README command 1: scripts/run-default.sh"
start=$SECONDS
run_in_root "scripts/run-default.sh"
echo "== run-default.sh passed in $((SECONDS - start)) s"
echo "== README command 2: scripts/test.sh ${test_args[*]:-}"
start=$SECONDS
run_in_root "scripts/test.sh ${test_args[*]:-}"
echo "== test.sh passed in $((SECONDS - start)) s"
echo "== README command 3: the Python package into a venv (pip install ./python)"
start=$SECONDS
run_in_root "python3 -m venv /tmp/venv && /tmp/venv/bin/pip install -q ./python && \
  /tmp/venv/bin/python -c 'import stoke; m = stoke.Model(\"../shared/fixtures/models/tiny-bert\", device=\"cpu\"); print(m.encode([\"fresh\"]).shape)'"
echo "== pip install ./python passed in $((SECONDS - start)) s"
echo "check-fresh-machine: the README commands passed on a fresh Debian 12 root"
