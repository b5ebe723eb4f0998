#!/usr/bin/env bash
# make-real-capture.sh records a real interop run on loopback: this project's
# `audit server` and a real grpc-go client (`audit client`), with tcpdump
# writing the kernel's SYNs to the retry port. It leaves, next to this script:
#
#   real-grpc-go.pcap          SYNs to the retry port, nanosecond timestamps
#   real-grpc-go.record.jsonl  the server's --record file of the same run
#
# Run it as root (tcpdump needs CAP_NET_RAW) from anywhere in the repository:
#   ./testdata/make-real-capture.sh [AUDIT_BINARY]   (or: make real-capture)
# Without AUDIT_BINARY it builds ./cmd/audit into a scratch folder.
# Then check it with: audit pcap testdata/real-grpc-go.pcap
#
# The run takes about 10 s. Timestamps and ports differ on every run, so the
# files are a sample, not a reproducible fixture.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out_pcap="$here/real-grpc-go.pcap"
out_record="$here/real-grpc-go.record.jsonl"
deadline=${DEADLINE:-8s}
cap_ms=${MAX_RECONNECT_BACKOFF_MS:-2000}

for tool in go tcpdump; do
	command -v "$tool" >/dev/null || { echo "make-real-capture: $tool not found" >&2; exit 2; }
done
if [ "$(id -u)" -ne 0 ]; then
	echo "make-real-capture: run as root: tcpdump must capture on lo" >&2
	exit 2
fi

tmp=$(mktemp -d)
server_pid= tcpdump_pid=
cleanup() {
	# Only the processes this script started, by pid.
	[ -n "$tcpdump_pid" ] && kill -INT "$tcpdump_pid" 2>/dev/null && wait "$tcpdump_pid" 2>/dev/null || true
	[ -n "$server_pid" ] && kill -INT "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

audit="$tmp/audit"
if [ -n "${1:-}" ]; then
	audit=$(cd "$root" && realpath "$1")
else
	(cd "$root" && go build -o "$audit" ./cmd/audit)
fi

# The server picks free ports and prints them ("control port ADDR", "retry
# port ADDR"); the capture filter needs the retry port, so read them first.
"$audit" server --control_port=0 --retry_port=0 --record="$tmp/record.jsonl" >"$tmp/server.log" 2>&1 &
server_pid=$!
control= retry=
for _ in $(seq 100); do
	control=$(sed -nE 's/.*control port \S*:([0-9]+).*/\1/p' "$tmp/server.log" | head -1)
	retry=$(sed -nE 's/.*retry port \S*:([0-9]+).*/\1/p' "$tmp/server.log" | head -1)
	[ -n "$control" ] && [ -n "$retry" ] && break
	kill -0 "$server_pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$control" ] || [ -z "$retry" ]; then
	echo "make-real-capture: audit server printed no ports:" >&2
	cat "$tmp/server.log" >&2
	exit 1
fi
echo "server: control port $control, retry port $retry" >&2

# SYN without ACK to the retry port. tcp[] offsets address IPv4 only; IPv6
# needs its own clause (docs/spec.md §5.5), here for a header without extensions.
filter="(tcp dst port $retry and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn)"
filter+=" or (ip6 and ip6[6] == 6 and ip6[42:2] == $retry and ip6[53] & 0x12 == 0x02)"
tcpdump -i lo -nn -U -s 128 --time-stamp-precision=nano -w "$tmp/capture.pcap" "$filter" 2>"$tmp/tcpdump.log" &
tcpdump_pid=$!
for _ in $(seq 100); do
	grep -q "listening on" "$tmp/tcpdump.log" && break
	kill -0 "$tcpdump_pid" 2>/dev/null || { cat "$tmp/tcpdump.log" >&2; exit 1; }
	sleep 0.1
done

status=0
"$audit" client --server_control_port="$control" --server_retry_port="$retry" \
	--max_reconnect_backoff_ms="$cap_ms" --deadline="$deadline" || status=$?
echo "audit client exited $status" >&2

sleep 0.5 # let tcpdump write the last packets
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
tcpdump_pid=
kill -INT "$server_pid"
wait "$server_pid" || true
server_pid=
cat "$tmp/tcpdump.log" >&2

cp "$tmp/capture.pcap" "$out_pcap"
cp "$tmp/record.jsonl" "$out_record"
echo "wrote $out_pcap and $out_record" >&2
"$audit" pcap --max-backoff "${cap_ms}ms" "$out_pcap" || true
