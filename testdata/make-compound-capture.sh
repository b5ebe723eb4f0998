#!/usr/bin/env bash
# make-compound-capture.sh records many real clients at once on loopback
# reconnecting to one retry port with the spec's default backoff (initial
# 1 s, ×1.6, jitter 0.2, cap 120 s), long enough for grpc-js's compounding
# jitter (docs/spec.md §4.2, §7.4) to show: grpc-js draws each backoff
# from the previous jittered one, so a chain drifts out of the windows
# that the spec's E·(1 ± 0.2) draws from. It leaves, next to this script:
#
#   real-compound.pcap.gz  every TCP segment to and from the retry port,
#                          headers only (snap length 96), pcap ns, gzip
#   real-compound.peers    one line per client: "ADDRESS STACK"
#
# The retry port is this project's `audit server` retry port in its default
# mode, close: it accepts each connection and closes it at once. The
# clients, each from its own loopback address (on Linux a connection to
# 127.0.0.0/8 comes from 127.0.0.1 unless bound, and `audit pcap` groups
# attempts by source address, docs/spec.md §5.3):
#
#   grpc-js  JS clients (default 16) of testdata/clients/grpcjs, from
#            127.0.0.2 up, with --local_address;
#   grpc-go  GO clients (default 3) of testdata/clients/grpcgo, from
#            127.0.0.101 up: the control group, whose backoff is drawn from
#            the expected value and must not match the signature.
#
# All start together and keep a wait-for-ready RPC for DURATION_S (default
# 46) seconds, which makes 7 intervals per chain (1 + 1.6 + … + 16.8 s is
# 43 s) before the cap, which they never reach.
#
# Run it as root (tcpdump needs CAP_NET_RAW) from anywhere in the
# repository, after `npm ci --prefix testdata/clients/grpcjs`:
#   ./testdata/make-compound-capture.sh [AUDIT_BINARY]
# Without AUDIT_BINARY it builds ./cmd/audit into bin/audit. It takes about
# DURATION_S + 5 s. Timestamps, ports and draws differ on every run, so the
# files are a sample, not a reproducible fixture. Then read it with:
#   audit pcap testdata/real-compound.pcap.gz
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out_pcap="$here/real-compound.pcap.gz"
out_peers="$here/real-compound.peers"
js=${JS:-16}
go_clients=${GO:-3}
duration=${DURATION_S:-46}

for tool in go node tcpdump gzip; do
	command -v "$tool" >/dev/null || { echo "make-compound-capture: $tool not found" >&2; exit 2; }
done
if [ "$(id -u)" -ne 0 ]; then
	echo "make-compound-capture: run as root: tcpdump must capture on lo" >&2
	exit 2
fi
if [ ! -d "$here/clients/grpcjs/node_modules/@grpc/grpc-js" ]; then
	echo "make-compound-capture: run npm ci --prefix testdata/clients/grpcjs first" >&2
	exit 2
fi

tmp=$(mktemp -d)
server_pid= tcpdump_pid=
client_pids=()
cleanup() {
	# Only the processes this script started, by pid.
	for p in "${client_pids[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "$tcpdump_pid" ] && kill -INT "$tcpdump_pid" 2>/dev/null && wait "$tcpdump_pid" 2>/dev/null || true
	[ -n "$server_pid" ] && kill -INT "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

if [ -n "${1:-}" ]; then
	audit=$(cd "$root" && realpath "$1")
else
	audit="$root/bin/audit"
	(cd "$root" && go build -o "$audit" ./cmd/audit)
fi
grpcgo="$tmp/grpcgo"
(cd "$root" && go build -o "$grpcgo" ./testdata/clients/grpcgo)

# wait_for FILE PATTERN PID: until FILE holds PATTERN, or PID has ended.
wait_for() {
	for _ in $(seq 100); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.1
	done
	echo "make-compound-capture: no '$2' in $1:" >&2
	cat "$1" >&2
	exit 1
}

"$audit" server --control_port=0 --retry_port=0 >"$tmp/server.log" 2>&1 &
server_pid=$!
wait_for "$tmp/server.log" "retry port" "$server_pid"
retry=$(sed -nE 's/.*retry port \S*:([0-9]+).*/\1/p' "$tmp/server.log" | head -1)
echo "retry port $retry" >&2

tcpdump -i lo -nn -U -s 96 --time-stamp-precision=nano -w "$tmp/capture.pcap" \
	"tcp port $retry" 2>"$tmp/tcpdump.log" &
tcpdump_pid=$!
wait_for "$tmp/tcpdump.log" "listening on" "$tcpdump_pid"

: >"$tmp/peers"
for i in $(seq "$js"); do
	addr=127.0.0.$((1 + i))
	node "$here/clients/grpcjs/client.js" --server_host=127.0.0.1 --server_retry_port="$retry" \
		--local_address="$addr" --duration_s="$duration" >"$tmp/js-$i.out" 2>&1 &
	client_pids+=($!)
	echo "$addr grpc-js" >>"$tmp/peers"
done
for i in $(seq "$go_clients"); do
	addr=127.0.0.$((100 + i))
	"$grpcgo" --server_host=127.0.0.1 --server_retry_port="$retry" \
		--local_address="$addr" --duration="${duration}s" >"$tmp/go-$i.out" 2>&1 &
	client_pids+=($!)
	echo "$addr grpc-go" >>"$tmp/peers"
done

failed=0
for p in "${client_pids[@]}"; do
	wait "$p" || failed=$((failed + 1))
done
client_pids=()
if [ "$failed" -ne 0 ]; then
	echo "make-compound-capture: $failed clients failed:" >&2
	cat "$tmp"/*.out >&2
	exit 1
fi

sleep 0.5 # let tcpdump write the last packets
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
tcpdump_pid=
cat "$tmp/tcpdump.log" >&2

gzip -n -9 <"$tmp/capture.pcap" >"$out_pcap"
cp "$tmp/peers" "$out_peers"
echo "wrote $out_pcap ($(stat -c %s "$out_pcap") bytes) and $out_peers" >&2
"$audit" pcap "$out_pcap" || true
