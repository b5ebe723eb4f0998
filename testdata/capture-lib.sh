# capture-lib.sh: what the make-*-capture.sh scripts beside it share, sourced
# by them once they have set `me` (their name in messages), `here` (this
# folder) and `root` (the repository). It checks that the script runs as
# root, makes the scratch folder $tmp, and at exit stops the processes the
# script started (started PID [SIGNAL]), last first, and removes $tmp.

# die MESSAGE [STATUS]: MESSAGE on stderr, and exit STATUS (default 1).
die() {
	echo "$me: $1" >&2
	exit "${2:-1}"
}

# need TOOL...: each TOOL is on PATH, or the script exits 2 naming it.
need() {
	local tool
	for tool; do
		command -v "$tool" >/dev/null || die "$tool not found" 2
	done
}

[ "$(id -u)" -eq 0 ] || die "run as root: tcpdump must capture on lo" 2

tmp=$(mktemp -d)
pids=() # PID:SIGNAL of each process started and not yet ended

# started PID [SIGNAL]: stop PID at exit with SIGNAL, unless stop did first.
# The default is TERM: a process started in the background of a script
# ignores INT unless it handles it itself (as tcpdump and audit do, to
# write their last packets and records).
started() { pids+=("$1:${2:-TERM}"); }

# stop PID: PID's signal (see started), and wait for it to end.
stop() {
	local p
	for p in "${pids[@]}"; do
		[ "${p%:*}" = "$1" ] && kill -"${p#*:}" "$1" 2>/dev/null && wait "$1" 2>/dev/null || true
	done
	forget "$1"
}

# forget PID: PID has ended (the script waited for it): leave it be at exit.
forget() {
	local keep=() p
	for p in "${pids[@]}"; do
		[ "${p%:*}" = "$1" ] || keep+=("$p")
	done
	pids=("${keep[@]}")
}

cleanup() {
	# Only the processes this script started, by pid.
	local i
	for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
		kill -"${pids[i]#*:}" "${pids[i]%:*}" 2>/dev/null && wait "${pids[i]%:*}" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT

# audit_binary [BINARY [DEFAULT]]: $audit is BINARY (a path from the
# repository's root), or ./cmd/audit built into DEFAULT (default
# $tmp/audit).
audit_binary() {
	if [ -n "${1:-}" ]; then
		audit=$(cd "$root" && realpath "$1")
	else
		audit=${2:-$tmp/audit}
		(cd "$root" && go build -o "$audit" ./cmd/audit)
	fi
}

# wait_for FILE PATTERN PID: until FILE holds PATTERN (grep), or the script
# exits naming what FILE holds when PID ends or 10 s pass first.
wait_for() {
	for _ in $(seq 100); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.1
	done
	echo "$me: no '$2' in $1:" >&2
	cat "$1" >&2
	exit 1
}

# port_of FILE NAME: the port a server printed in FILE for NAME (control or
# retry): audit server's "NAME port ADDR:PORT" line, or the Python server's
# "NAME_port": PORT.
port_of() {
	sed -nE "s/.*\"$2_port\": ([0-9]+).*/\\1/p; s/.*$2 port \\S*:([0-9]+).*/\\1/p" "$1" | head -1
}

# tcpdump_start FILE FILTER [OPTION...]: tcpdump on lo writing FILE with
# nanosecond timestamps, packet by packet, once it listens.
tcpdump_start() {
	local file=$1 filter=$2
	shift 2
	tcpdump -i lo -nn -U --time-stamp-precision=nano "$@" -w "$file" "$filter" 2>"$tmp/tcpdump.log" &
	tcpdump_pid=$!
	started "$tcpdump_pid" INT
	wait_for "$tmp/tcpdump.log" "listening on" "$tcpdump_pid"
}

# tcpdump_stop [SECONDS]: stop tcpdump after SECONDS (default 0.5) for the
# last packets, and print its counts.
tcpdump_stop() {
	sleep "${1:-0.5}"
	stop "$tcpdump_pid"
	cat "$tmp/tcpdump.log" >&2
}
