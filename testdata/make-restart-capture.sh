#!/usr/bin/env bash
# make-restart-capture.sh records two real runs of a grpc-go client (`audit
# client`) against `audit server` on loopback, tcpdump writing every TCP
# segment of both ports, whole. It leaves, next to this script:
#
#   real-restart.pcap          a healthy server's restart: --retry_mode
#                              outage=1s,4s, cap 2000 ms. The retry port
#                              serves (TLS, h2, RPCs answered UNAVAILABLE)
#                              for 1 s after Start, the client READY on its
#                              first connection; then it closes every
#                              connection and refuses for 4 s, the client
#                              backing off; then it serves again and the
#                              client is READY once more.
#   real-restart.record.jsonl  the server's record of that run
#   real-onesided.pcap         the client's side only (tcpdump 'dst port
#                              RETRY') of a close-mode run with cap 2000 ms:
#                              a tap that misses the server's answers
#
# Run it as root (tcpdump needs CAP_NET_RAW) from anywhere in the
# repository:
#   ./testdata/make-restart-capture.sh [AUDIT_BINARY]
# Without AUDIT_BINARY it builds ./cmd/audit into a scratch folder. It takes
# about 25 s. Timestamps and ports differ on every run: the files are a
# sample, and the tests that read them (go test ./auditrun -run
# 'TestPcapRealRestart|TestPcapOneSided') hold what any run shows.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

me=make-restart-capture
. "$here/capture-lib.sh"
need go tcpdump
audit_binary "${1:-}"

# run MODE FILTER OUT: one server in MODE, one client session of 8 s, the
# capture of FILTER (with RETRY and CONTROL for the ports) copied to OUT.
run() {
	local mode=$1 filter=$2 out=$3 server_pid control retry status=0
	rm -f "$tmp/record.jsonl"
	"$audit" server --control_port=0 --retry_port=0 --retry_mode="$mode" --record="$tmp/record.jsonl" >"$tmp/server.log" 2>&1 &
	server_pid=$!
	started "$server_pid" INT
	wait_for "$tmp/server.log" "retry port" "$server_pid"
	control=$(port_of "$tmp/server.log" control) retry=$(port_of "$tmp/server.log" retry)
	filter=${filter//RETRY/$retry}
	tcpdump_start "$tmp/capture.pcap" "${filter//CONTROL/$control}" -s 0 --immediate-mode
	"$audit" client --quiet --server_host=127.0.0.1 --server_control_port="$control" --server_retry_port="$retry" \
		--max_reconnect_backoff_ms=2000 --deadline=8s --retry_mode="$mode" --ca_file="$here/tls/server.pem" --reissue \
		>"$tmp/client.out" 2>&1 || status=$?
	echo "$mode: audit client exited $status" >&2
	cat "$tmp/client.out" >&2
	tcpdump_stop
	stop "$server_pid"
	cp "$tmp/capture.pcap" "$here/$out"
	echo "wrote $here/$out (control port $control, retry port $retry)" >&2
}

run outage=1s,4s "tcp port RETRY or tcp port CONTROL" real-restart.pcap
cp "$tmp/record.jsonl" "$here/real-restart.record.jsonl"
run close "tcp dst port RETRY" real-onesided.pcap

"$audit" pcap "$here/real-restart.pcap" || true
"$audit" pcap "$here/real-onesided.pcap" || true
