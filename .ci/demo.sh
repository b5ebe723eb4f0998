#!/usr/bin/env bash
# The logic of `make demo`: `audit live --iface lo` (the reference server and
# a libpcap capture of its retry port) on free ports, `audit client` against
# it with a 2 s max backoff for 15 s, then the session's whole report: kernel
# verdict, server verdict, cross-check, then the client's own output. About
# 20 s in all.
#
# Without permission to capture, it says why and runs `audit server` +
# `audit client` instead.
#
# Usage: .ci/demo.sh [path/to/audit]   (default bin/audit)
set -euo pipefail

bin=${1:-bin/audit}
[ -x "$bin" ] || { echo "demo: $bin is not an executable; run 'make build' first" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

max_backoff_ms=2000
deadline=15s
tmp=$(mktemp -d)
pid=
cleanup() {
	# Only the process this script started, by its id.
	[ -n "$pid" ] && kill -INT "$pid" 2>/dev/null && wait "$pid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

# wait_for FILE PATTERN: until PATTERN is in FILE (10 s at most) or the
# process has ended; true when the pattern was found.
wait_for() {
	for _ in $(seq 100); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

port_of() { grep -oE "$1 port [^ ,]+" "$2" | head -1 | sed -E 's/.*:([0-9]+)$/\1/'; }

client_heading="audit client --max_reconnect_backoff_ms=$max_backoff_ms --deadline=$deadline (grpc-go)"

run_client() {
	"$bin" client --server_host=127.0.0.1 --server_control_port="$1" --server_retry_port="$2" \
		--max_reconnect_backoff_ms="$max_backoff_ms" --deadline="$deadline"
}

echo "=== audit live --iface lo: the reference server and a capture of its retry port ==="
# live's stdout reaches the terminal through tee on a fifo rather than a
# process substitution, so that the script can wait for tee's last line
# before it prints anything of its own.
mkfifo "$tmp/live.fifo"
tee "$tmp/live.out" < "$tmp/live.fifo" &
tee_pid=$!
"$bin" live --iface lo --control_port=0 --retry_port=0 --write="$tmp/demo.pcap" \
	> "$tmp/live.fifo" 2> "$tmp/live.err" &
pid=$!

if wait_for "$tmp/live.err" "capturing SYNs"; then
	grep '^audit live:' "$tmp/live.err"
	control=$(port_of control "$tmp/live.err")
	retry=$(port_of retry "$tmp/live.err")
	client=0
	# The client runs while live reports each attempt, and finishes just as
	# live prints the session's report: its output is held in a file and
	# shown after that report, not in the middle of it.
	run_client "$control" "$retry" > "$tmp/client.out" 2>&1 || client=$?
	# The report follows Stop at once; give it a moment to be printed.
	wait_for "$tmp/live.out" "^libpcap on lo" || true
	kill -INT "$pid"
	live=0
	wait "$pid" || live=$?
	pid=
	wait "$tee_pid" || true
	grep '^audit live: at exit' "$tmp/live.err" || true
	echo "=== audit live exit status $live (0: every verdict passed, 1: one failed) ==="
	echo "=== $client_heading, run alongside; its output, held until now ==="
	cat "$tmp/client.out"
	echo "=== audit client exit status $client ==="
	echo "the same SYNs offline, from the --write file: audit pcap --max_backoff=${max_backoff_ms}ms:" \
		"$("$bin" pcap --port="$retry" --max_backoff="${max_backoff_ms}ms" "$tmp/demo.pcap" 2>/dev/null | tail -1)"
	exit "$live"
fi

# No capture: say why, then show the server and client alone.
wait "$pid" 2>/dev/null || true
pid=
wait "$tee_pid" || true
reason=$(grep -m1 '^audit:' "$tmp/live.err" || tail -1 "$tmp/live.err")
echo "demo: audit live cannot capture on lo here: ${reason#audit: }" >&2
echo "demo: running 'audit server' + 'audit client' instead: the server's verdict only, no kernel timestamps, no cross-check." >&2
echo "demo: for the live audit, run as root or: sudo setcap cap_net_raw,cap_net_admin=eip $bin" >&2
echo "=== audit server ==="
"$bin" server --control_port=0 --retry_port=0 > "$tmp/server.out" 2> "$tmp/server.err" &
pid=$!
wait_for "$tmp/server.out" "retry port" || { cat "$tmp/server.err" >&2; exit 2; }
cat "$tmp/server.out"
client=0
echo "--- $client_heading ---"
run_client "$(port_of control "$tmp/server.out")" "$(port_of retry "$tmp/server.out")" || client=$?
echo "--- audit client exit status $client ---"
grep -E 'retry +[0-9]+:|session ended' "$tmp/server.err" || true
exit "$client"
