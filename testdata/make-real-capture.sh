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

me=make-real-capture
. "$here/capture-lib.sh"
need go tcpdump
audit_binary "${1:-}"

# The server picks free ports and prints them ("control port ADDR", "retry
# port ADDR"); the capture filter needs the retry port, so read them first.
"$audit" server --control_port=0 --retry_port=0 --record="$tmp/record.jsonl" >"$tmp/server.log" 2>&1 &
server_pid=$!
started "$server_pid" INT
wait_for "$tmp/server.log" "retry port" "$server_pid"
control=$(port_of "$tmp/server.log" control) retry=$(port_of "$tmp/server.log" retry)
echo "server: control port $control, retry port $retry" >&2

# SYN without ACK to the retry port. tcp[] offsets address IPv4 only; IPv6
# needs its own clause (docs/spec.md §5.5), here for a header without extensions.
filter="(tcp dst port $retry and tcp[tcpflags] & (tcp-syn|tcp-ack) == tcp-syn)"
filter+=" or (ip6 and ip6[6] == 6 and ip6[42:2] == $retry and ip6[53] & 0x12 == 0x02)"
tcpdump_start "$tmp/capture.pcap" "$filter" -s 128

status=0
"$audit" client --server_control_port="$control" --server_retry_port="$retry" \
	--max_reconnect_backoff_ms="$cap_ms" --deadline="$deadline" || status=$?
echo "audit client exited $status" >&2

tcpdump_stop
stop "$server_pid"

cp "$tmp/capture.pcap" "$out_pcap"
cp "$tmp/record.jsonl" "$out_record"
echo "wrote $out_pcap and $out_record" >&2
"$audit" pcap --max_backoff "${cap_ms}ms" "$out_pcap" || true
