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

me=make-compound-capture
. "$here/capture-lib.sh"
need go node tcpdump gzip
[ -d "$here/clients/grpcjs/node_modules/@grpc/grpc-js" ] || die "run npm ci --prefix testdata/clients/grpcjs first" 2
audit_binary "${1:-}" "$root/bin/audit"
grpcgo="$tmp/grpcgo"
(cd "$root" && go build -o "$grpcgo" ./testdata/clients/grpcgo)

"$audit" server --control_port=0 --retry_port=0 >"$tmp/server.log" 2>&1 &
server_pid=$!
started "$server_pid" INT
wait_for "$tmp/server.log" "retry port" "$server_pid"
retry=$(port_of "$tmp/server.log" retry)
echo "retry port $retry" >&2

tcpdump_start "$tmp/capture.pcap" "tcp port $retry" -s 96

client_pids=()
: >"$tmp/peers"
for i in $(seq "$js"); do
	addr=127.0.0.$((1 + i))
	node "$here/clients/grpcjs/client.js" --server_host=127.0.0.1 --server_retry_port="$retry" \
		--local_address="$addr" --duration_s="$duration" >"$tmp/js-$i.out" 2>&1 &
	client_pids+=($!)
	started $!
	echo "$addr grpc-js" >>"$tmp/peers"
done
for i in $(seq "$go_clients"); do
	addr=127.0.0.$((100 + i))
	"$grpcgo" --server_host=127.0.0.1 --server_retry_port="$retry" \
		--local_address="$addr" --duration="${duration}s" >"$tmp/go-$i.out" 2>&1 &
	client_pids+=($!)
	started $!
	echo "$addr grpc-go" >>"$tmp/peers"
done

failed=0
for p in "${client_pids[@]}"; do
	wait "$p" || failed=$((failed + 1))
	forget "$p"
done
if [ "$failed" -ne 0 ]; then
	cat "$tmp"/*.out >&2
	die "$failed clients failed (their output above)"
fi

tcpdump_stop

gzip -n -9 <"$tmp/capture.pcap" >"$out_pcap"
cp "$tmp/peers" "$out_peers"
echo "wrote $out_pcap ($(stat -c %s "$out_pcap") bytes) and $out_peers" >&2
"$audit" pcap "$out_pcap" || true
