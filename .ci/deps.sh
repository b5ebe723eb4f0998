#!/usr/bin/env bash
# Installs (as root) or names (otherwise) what building and testing audit
# needs: Debian packages, and the grpc-js client's npm packages
# (testdata/clients/grpcjs, from its committed package-lock.json). Called by
# `make deps`, so `make demo` and `make test` work on a fresh machine
# (prometheus brings promtool, for the alert rules' tests, and the server the
# fleet's end-to-end test scrapes with; tshark: the TLS captures'
# decryption is compared with Wireshark's). Extra Debian packages can be
# asked for: deps.sh tcpdump
set -euo pipefail
cd "$(dirname "$0")/.."
need=(libpcap-dev gcc pkg-config protobuf-compiler python3-grpcio chromium prometheus tshark "$@")
missing=()
for p in "${need[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
# Node may come from elsewhere than Debian (NodeSource's nodejs carries its
# own npm, and Debian's npm package would conflict with it): the commands
# count, not the package names.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "missing Debian packages: ${missing[*]}" >&2
		echo "install them as root: apt-get install -y ${missing[*]}" >&2
		exit 1
	fi
	echo "installing: ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The grpc-js client's packages: installed once from the lock file, and again
# only when the installed grpc-js is not the pinned one, so that a machine
# without the npm registry keeps working once they are there.
js=testdata/clients/grpcjs
pinned=$(node -p "require('./$js/package.json').dependencies['@grpc/grpc-js']")
installed=$(node -p "try { require('./$js/node_modules/@grpc/grpc-js/package.json').version } catch (e) { '' }")
if [ "$installed" != "$pinned" ]; then
	echo "installing $js's npm packages (@grpc/grpc-js $pinned): npm ci --prefix $js" >&2
	npm ci --prefix "$js" --ignore-scripts --no-audit --no-fund --loglevel=error >&2 || {
		echo "npm ci --prefix $js failed: the grpc-js client needs the npm registry once" >&2
		exit 1
	}
fi
