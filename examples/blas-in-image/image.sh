#!/bin/sh
# Builds this example's container image, a directory: Debian 12 (bookworm)
# with gcc, libc6-dev and make, and apt's package lists and OpenBLAS's
# packages downloaded into apt's cache but not installed, so that a node's
# Phase 1 can `apt-get install libopenblas-dev` with no network (compute
# nodes often have none). Needs mmdebstrap (scripts/services.sh install
# images) and Debian's archive: HPCQ_DEBIAN_MIRROR, else deb.debian.org.
#
#   examples/blas-in-image/image.sh [DIR]     # default: examples/blas-in-image/image
#
# Turn the directory into the formats sites ship (a SquashFS, a SIF, an OCI
# layout) as docs/tasks.md says; run.yaml names the directory.
set -eu
out=${1:-$(dirname "$0")/image}
mirror=${HPCQ_DEBIAN_MIRROR:-http://deb.debian.org/debian}
mode=root
[ "$(id -u)" = 0 ] || mode=unshare
rm -rf "$out.tmp"
mmdebstrap --mode="$mode" --variant=minbase --include=gcc,libc6-dev,make \
	--dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--skip=cleanup/apt/lists,cleanup/apt/cache \
	--customize-hook='chroot "$1" sh -c "apt-get clean && apt-get install --download-only -y -q libopenblas-dev"' \
	--customize-hook='rm -f "$1"/var/cache/apt/*.bin' \
	bookworm "$out.tmp" "$mirror"
rm -rf "$out"
mv "$out.tmp" "$out"
