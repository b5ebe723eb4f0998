#!/usr/bin/env bash
# make-control-capture.sh records an interop run of the C-core client
# (interop/reconnect_client.py, Debian's python3-grpcio) on loopback, while
# tcpdump writes every TCP segment of the server's control port and retry
# port. The server is the Python ReconnectService (interop/reconnect_server.py,
# also C-core: neither side is this project's), or with SERVER=audit this
# project's `audit server`. It leaves, next to this script:
#
#   control-ccore.pcap     both ports, full segments, nanosecond timestamps
#   control-ccore.json     the ports, and what the server's Stop answered
#
# (control-audit.pcap and control-audit.json with SERVER=audit). Run it as
# root (tcpdump needs CAP_NET_RAW) from anywhere in the repository:
#   ./testdata/make-control-capture.sh
#   SERVER=audit ./testdata/make-control-capture.sh [AUDIT_BINARY]
# Then check it with: audit pcap testdata/control-ccore.pcap
# (no record file: the sessions come from the control port's Start and Stop).
#
# The run takes about 7 s. Timestamps and ports differ on every run, so the
# files are a sample, not a reproducible fixture.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
server=${SERVER:-python}
name=ccore
[ "$server" = audit ] && name=audit
out_pcap="$here/control-$name.pcap"
out_json="$here/control-$name.json"
deadline=${DEADLINE_S:-6}
cap_ms=${MAX_RECONNECT_BACKOFF_MS:-2000}
py=/usr/bin/python3 # Debian's python3-grpcio is for this interpreter (docs/spec.md §6.1)

for tool in tcpdump "$py"; do
	command -v "$tool" >/dev/null || { echo "make-control-capture: $tool not found" >&2; exit 2; }
done
if [ "$(id -u)" -ne 0 ]; then
	echo "make-control-capture: run as root: tcpdump must capture on lo" >&2
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

if [ "$server" = audit ]; then
	audit="$tmp/audit"
	if [ -n "${1:-}" ]; then
		audit=$(cd "$root" && realpath "$1")
	else
		(cd "$root" && go build -o "$audit" ./cmd/audit)
	fi
	"$audit" server --control_port=0 --retry_port=0 >"$tmp/server.out" 2>&1 &
else
	"$py" "$here/interop/reconnect_server.py" >"$tmp/server.out" 2>"$tmp/server.err" &
fi
server_pid=$!
control= retry=
for _ in $(seq 100); do
	control=$(sed -nE 's/.*"control_port": ([0-9]+).*/\1/p; s/.*control port \S*:([0-9]+).*/\1/p' "$tmp/server.out" | head -1)
	retry=$(sed -nE 's/.*"retry_port": ([0-9]+).*/\1/p; s/.*retry port \S*:([0-9]+).*/\1/p' "$tmp/server.out" | head -1)
	[ -n "$control" ] && [ -n "$retry" ] && break
	kill -0 "$server_pid" 2>/dev/null || break
	sleep 0.1
done
if [ -z "$control" ] || [ -z "$retry" ]; then
	echo "make-control-capture: the server printed no ports:" >&2
	cat "$tmp/server.out" "$tmp/server.err" >&2 2>/dev/null
	exit 1
fi
echo "server: control port $control, retry port $retry" >&2

# --immediate-mode: without it libpcap holds the last packets (Stop among
# them) in a ring block that SIGINT never hands out. Both ends are
# 127.0.0.1: other processes of a shared machine that connect from 127.0.1.x
# with one of the two ports as their source port stay out.
tcpdump -i lo -nn -U --immediate-mode -s 0 --time-stamp-precision=nano -w "$tmp/capture.pcap" \
	"src host 127.0.0.1 and dst host 127.0.0.1 and (tcp port $control or tcp port $retry)" 2>"$tmp/tcpdump.log" &
tcpdump_pid=$!
for _ in $(seq 100); do
	grep -q "listening on" "$tmp/tcpdump.log" && break
	kill -0 "$tcpdump_pid" 2>/dev/null || { cat "$tmp/tcpdump.log" >&2; exit 1; }
	sleep 0.1
done

status=0
"$py" "$here/interop/reconnect_client.py" --server_control_port="$control" --server_retry_port="$retry" \
	--max_reconnect_backoff_ms="$cap_ms" --deadline_s="$deadline" >"$tmp/client.out" || status=$?
echo "client exited $status: $(cat "$tmp/client.out")" >&2

sleep 1 # let tcpdump write the last packets
kill -INT "$tcpdump_pid"
wait "$tcpdump_pid" || true
tcpdump_pid=
kill -INT "$server_pid"
wait "$server_pid" || true
server_pid=
cat "$tmp/tcpdump.log" >&2

cp "$tmp/capture.pcap" "$out_pcap"
# What Stop answered, as the client printed it.
stop=$(sed -nE 's/.*("backoff_ms": \[[^]]*\]).*("passed": (true|false)).*/{\1, \2}/p' "$tmp/client.out" | head -1)
printf '{"control_port": %s, "retry_port": %s, "max_reconnect_backoff_ms": %s, "stop": %s}\n' \
	"$control" "$retry" "$cap_ms" "${stop:-null}" >"$out_json"
echo "wrote $out_pcap and $out_json" >&2
cat "$out_json" >&2
