#!/bin/sh
# Install the Debian 12 packages Cairn needs to build, test and benchmark,
# if any is missing. Runs apt-get update first (a fresh machine's package
# lists may be empty).
set -e
need="build-essential pkg-config libfuse3-dev fuse3 liblmdb-dev libisal-dev liburing-dev \
      libssl-dev python3 python3-cryptography attr libnetcdf-dev dbench rsync git gnuplot-nox clang-14 libclang-rt-14-dev"
missing=""
for p in $need; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "deps: missing Debian packages:$missing (run as root, or install them)" >&2
	exit 1
fi
echo "deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing
