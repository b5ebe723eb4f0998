#!/usr/bin/env bash
# make-fates-capture.sh records a real grpc-go client (`audit client`) on
# loopback trying three retry ports in turn, one of each fate an attempt can
# meet (docs/spec.md §7), while tcpdump writes every TCP segment of the
# three ports. It leaves, next to this script:
#
#   real-fates.pcap   the three runs, nanosecond timestamps, snap length 160
#   real-fates.ports  "close PORT", "refuse PORT", "hang PORT", one a line
#
# The three ports:
#   close   this project's `audit server` retry port: it accepts each
#           connection and closes it without a byte;
#   refuse  a port nothing listens on: the kernel answers each SYN with RST;
#   hang    a listener (python3) that accepts each connection and never
#           reads or writes: grpc-go gives each attempt up at its connect
#           timeout (20 s).
# The client runs the interop steps against the server's control port with
# --max_reconnect_backoff_ms=1000, its retry port one of the three:
# --deadline=4s for close and refuse, 23s for hang (one attempt given up
# at 20 s, the next cut short when the client exits).
#
# Run it as root (tcpdump needs CAP_NET_RAW) from anywhere in the repository:
#   ./testdata/make-fates-capture.sh [AUDIT_BINARY]
# Without AUDIT_BINARY it builds ./cmd/audit into a scratch folder. It takes
# about 35 s. Timestamps and ports differ on every run, so the files are a
# sample, not a reproducible fixture; auditrun/testdata/real-fates-*.txt
# must then be rewritten (go test ./auditrun -run TestPcapRealFates -update).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
out_pcap="$here/real-fates.pcap"
out_ports="$here/real-fates.ports"

me=make-fates-capture
. "$here/capture-lib.sh"
need go tcpdump python3
audit_binary "${1:-}"

"$audit" server --control_port=0 --retry_port=0 >"$tmp/server.log" 2>&1 &
server_pid=$!
started "$server_pid" INT
wait_for "$tmp/server.log" "retry port" "$server_pid"
control=$(port_of "$tmp/server.log" control) close=$(port_of "$tmp/server.log" retry)

# The hang port: listen, accept, hold every connection, never read.
python3 -u -c '
import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(64)
print("hang port", s.getsockname()[1])
held = []
while True:
    held.append(s.accept()[0])
' >"$tmp/hang.log" 2>&1 &
hang_pid=$!
started "$hang_pid"
wait_for "$tmp/hang.log" "hang port" "$hang_pid"
hang=$(sed -nE 's/hang port ([0-9]+)/\1/p' "$tmp/hang.log")

# The refuse port: one that nothing listens on, over IPv4.
refuse=
for _ in $(seq 50); do
	p=$((40000 + RANDOM % 20000))
	[ -z "$(ss -Htan "sport = :$p")" ] && { refuse=$p; break; }
done
[ -n "$refuse" ] || die "no free port found" 2
echo "control port $control; close $close, refuse $refuse, hang $hang" >&2

tcpdump_start "$tmp/capture.pcap" "tcp port $close or tcp port $refuse or tcp port $hang" -s 160

for run in "close 4s" "refuse 4s" "hang 23s"; do
	read -r what deadline <<<"$run"
	port=${!what}
	status=0
	"$audit" client --quiet --server_host=127.0.0.1 --server_control_port="$control" --server_retry_port="$port" \
		--max_reconnect_backoff_ms=1000 --deadline="$deadline" >"$tmp/client-$what.out" 2>&1 || status=$?
	echo "$what: audit client exited $status" >&2
done

tcpdump_stop

cp "$tmp/capture.pcap" "$out_pcap"
printf 'close %s\nrefuse %s\nhang %s\n' "$close" "$refuse" "$hang" >"$out_ports"
echo "wrote $out_pcap and $out_ports" >&2
for what in close refuse hang; do
	"$audit" pcap --max_backoff 1s --port "${!what}" "$out_pcap" || true
done
