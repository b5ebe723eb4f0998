#!/usr/bin/env bash
# Installs (as root) or names (otherwise) the Debian packages that building and
# testing audit needs. Called by `make deps`, so `make demo` and `make test`
# work on a fresh machine. Extra packages can be asked for: deps.sh tcpdump tshark
set -euo pipefail
need=(libpcap-dev gcc pkg-config protobuf-compiler python3-grpcio "$@")
missing=()
for p in "${need[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "missing Debian packages: ${missing[*]}" >&2
	echo "install them as root: apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "installing: ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
