#!/usr/bin/env bash
# SYNs per second that `audit live` captures without loss (RELIABILITY.md).
# For each rate: `audit live --attach --iface lo --retry_port P --format json
# --idle 2s` watches a closed loopback port while capture/internal/synload
# sends crafted SYNs to it (IPv4 from 127.77.0.0/16 and IPv6 from ::1,
# alternately, each a new attempt) for SYNLOAD_SECONDS; the session ends
# after 2 s without a SYN, so its report counts everything the auditor took
# in, and the script compares:
#   sent       SYNs the generator sent (its own count; rate = what it achieved)
#   captured   SYNs in audit live's report (capture.syns)
#   received   libpcap's ps_recv: on lo every packet is counted twice (the
#              kernel's capture sees the outgoing and the incoming copy;
#              libpcap discards the outgoing one after the ring)
#   dropped    libpcap's ps_drop, in packets (two per SYN on lo): ring full
#   softnet    the kernel's backlog drops (/proc/net/softnet_stat) over the run
#   lost       sent - captured
# and prints a markdown table with the machine and the command.
# SYNLOAD_VERB=watch measures `audit watch --iface lo --port P --format json
# --metrics 127.0.0.1:0` instead: once its audit_attempts_total reaches the
# SYNs sent (or stops growing for 5 s) it is interrupted, and captured is
# its summary's attempts (every SYN of the load is a new attempt), dropped
# libpcap's counters and the packets it did not take in, from its stderr.
# Traffic goes
# only to 127.0.0.1 and ::1. Needs root (raw sockets, capture); without it,
# says so and exits 0 (SYNLOAD_STRICT=1: exit 1).
#
# Environment (defaults in brackets):
#   SYNLOAD_RATES ["10000 25000 50000 75000 100000"]  target SYN/s
#   SYNLOAD_SECONDS [5]   seconds of load per run
#   SYNLOAD_RUNS [3]      runs per rate
#   SYNLOAD_BUFFER []     audit live --buffer in bytes (default: the binary's, 64 MiB)
#   SYNLOAD_WRITE [0]     1: also --write every packet to a file (its cost included)
#   SYNLOAD_AUDIT [bin/audit]  the binary to measure (built when missing)
#   SYNLOAD_STRICT [0]    1: exit 1 when a run lost a SYN or when not root
#   SYNLOAD_VERB [live]   live, or watch
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."

rates=(${SYNLOAD_RATES:-10000 25000 50000 75000 100000})
seconds=${SYNLOAD_SECONDS:-5}
runs=${SYNLOAD_RUNS:-3}
buffer=${SYNLOAD_BUFFER:-}
write=${SYNLOAD_WRITE:-0}
audit=${SYNLOAD_AUDIT:-bin/audit}
strict=${SYNLOAD_STRICT:-0}
verb=${SYNLOAD_VERB:-live}

if [ "$(id -u)" -ne 0 ]; then
	echo "synload: SKIPPED, NOT RUN: raw sockets and live capture need root" >&2
	[ "$strict" = 1 ] && exit 1
	exit 0
fi
./.ci/deps.sh jq time iproute2 curl >&2

tmp=$(mktemp -d "${TMPDIR:-/tmp}/synload.XXXXXX")
apid= tpid=
cleanup() {
	# Only the processes this script started, by their ids.
	[ -n "$apid" ] && kill -INT "$apid" 2>/dev/null || true
	[ -n "$tpid" ] && wait "$tpid" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT

if [ ! -x "$audit" ]; then
	echo "synload: building $audit" >&2
	go build -o "$audit" ./cmd/audit
fi
go build -o "$tmp/synload" ./capture/internal/synload/cmd/synload

# A port nothing listens on, over IPv4 or IPv6.
port=
for _ in $(seq 50); do
	p=$((40000 + RANDOM % 20000))
	[ -z "$(ss -Htanl "sport = :$p")" ] && { port=$p; break; }
done
[ -n "$port" ] || { echo "synload: no free port found" >&2; exit 2; }

# softnet_drops: the second column of softnet_stat, in hex, summed over CPUs.
softnet_drops() {
	local s=0 _c dropped _rest
	while read -r _c dropped _rest; do s=$((s + 16#$dropped)); done </proc/net/softnet_stat
	echo "$s"
}

cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
libpcap=$(dpkg-query -W -f='${Version}' libpcap0.8 2>/dev/null || echo unknown)
args=(live --attach --iface lo --retry_port "$port" --format json --idle 2s)
[ "$verb" = watch ] && args=(watch --iface lo --port "$port" --format json --metrics 127.0.0.1:0)
[ -n "$buffer" ] && args+=(--buffer "$buffer")
[ "$write" = 1 ] && args+=(--write "$tmp/load.pcap")

echo "# audit $verb under SYN load on lo"
echo
echo "machine: $(nproc) CPUs, $cpu, kernel $(uname -r), libpcap $libpcap, $(free -g | awk '/^Mem:/ { print $2 }') GiB"
echo "command: $audit ${args[*]}"
echo "load:    synload -port $port -rate RATE -duration ${seconds}s (IPv4 and IPv6 alternately, 250 IPv4 sources)"
echo "         ($0; SYNLOAD_RATES='${rates[*]}' SYNLOAD_SECONDS=$seconds SYNLOAD_RUNS=$runs SYNLOAD_BUFFER=$buffer SYNLOAD_WRITE=$write)"
echo
echo "| target SYN/s | run | sent | achieved SYN/s | captured | libpcap received | libpcap dropped (pkts) | softnet drops | lost SYNs | audit CPU s | peak RSS MiB | load avg | result |"
echo "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"

declare -A clean_runs
lost_any=0
for rate in "${rates[@]}"; do
	clean_runs[$rate]=0
	for run in $(seq "$runs"); do
		load=$(cut -d' ' -f1 /proc/loadavg)
		rm -f "$tmp/out" "$tmp/err" "$tmp/time"
		/usr/bin/time -f '%U %S %M' -o "$tmp/time" "$audit" "${args[@]}" >"$tmp/out" 2>"$tmp/err" &
		tpid=$!
		apid=
		# audit runs as the only child of time, whatever the binary's name.
		for _ in $(seq 100); do
			apid=$(pgrep -P "$tpid" || true)
			[ -n "$apid" ] && grep -q "capturing SYNs" "$tmp/err" 2>/dev/null && break
			sleep 0.1
		done
		if [ -z "$apid" ] || ! grep -q "capturing SYNs" "$tmp/err"; then
			echo "synload: audit live did not start:" >&2
			cat "$tmp/err" >&2
			exit 2
		fi

		before=$(softnet_drops)
		sent_json=$("$tmp/synload" -port "$port" -rate "$rate" -duration "${seconds}s")
		after=$(softnet_drops)
		sent=$(jq -r .sent <<<"$sent_json")
		if [ "$verb" = watch ]; then
			# Its attempts reach the SYNs sent once it has taken them
			# in; two minutes at most, 5 s at most without growing.
			url=$(sed -n 's/.*metrics at \(http:[^ ]*\).*/\1/p' "$tmp/err" | head -1)
			seen=-1 still=0
			for _ in $(seq 1200); do
				n=$(curl -s "$url" | sed -n 's/^audit_attempts_total{port="'"$port"'"} //p')
				[ "${n:-0}" -ge "$sent" ] && break
				if [ "${n:-0}" = "$seen" ]; then still=$((still + 1)); else still=0 seen=${n:-0}; fi
				[ "$still" -ge 50 ] && break
				sleep 0.1
			done
		else
			# The report comes 2 s (--idle) after the auditor has taken
			# in the last SYN; it may be behind the sender. Two minutes
			# at most.
			for _ in $(seq 1200); do
				[ -s "$tmp/out" ] && break
				sleep 0.1
			done
		fi
		kill -INT "$apid" 2>/dev/null || true
		for _ in $(seq 300); do
			kill -0 "$apid" 2>/dev/null || break
			sleep 0.1
		done
		if kill -0 "$apid" 2>/dev/null; then
			echo "synload: audit live still running 30 s after SIGINT; killed" >&2
			kill -KILL "$apid" 2>/dev/null || true
		fi
		wait "$tpid" || true
		tpid= apid=

		achieved=$(jq -r '.rate | floor' <<<"$sent_json")
		if [ "$verb" = watch ] && [ -s "$tmp/out" ]; then
			captured=$(tail -1 "$tmp/out" | jq -r .summary.attempts)
			read -r received kdrop ifdrop < <(sed -n 's/.*since the start: \([0-9]*\) packets received, \([0-9]*\) dropped by the kernel, \([0-9]*\) dropped by the interface.*/\1 \2 \3/p' "$tmp/err")
			nottaken=$(sed -n 's/.*; \([0-9]*\) captured packets not taken in.*/\1/p' "$tmp/err")
			dropped=$((kdrop + ifdrop + ${nottaken:-0}))
		elif [ -s "$tmp/out" ]; then
			read -r captured received dropped < <(head -1 "$tmp/out" | jq -r '"\(.capture.syns) \(.live.received) \(.live.dropped + .live.if_dropped)"')
		else
			captured=0 received=? dropped=?
			echo "synload: no report from audit live at $rate SYN/s:" >&2
			tail -3 "$tmp/err" >&2
		fi
		read -r user sys rss < <(tail -1 "$tmp/time") || true
		cpu_s=$(awk -v u="${user:-0}" -v s="${sys:-0}" 'BEGIN { printf "%.2f", u + s }')
		rss_mib=$(( ${rss:-0} / 1024 ))
		lost=$((sent - captured))
		result=ZERO-LOSS
		if [ "$lost" -ne 0 ] || [ "$dropped" != 0 ]; then
			result=LOSS
			lost_any=1
		else
			clean_runs[$rate]=$((clean_runs[$rate] + 1))
		fi
		echo "| $rate | $run | $sent | $achieved | $captured | $received | $dropped | $((after - before)) | $lost | $cpu_s | $rss_mib | $load | $result |"
	done
done

echo
best=none
for rate in "${rates[@]}"; do
	[ "${clean_runs[$rate]}" -eq "$runs" ] && best=$rate
done
echo "highest target rate with zero loss in all $runs runs: $best SYN/s (target: 50000)"
[ "$strict" = 1 ] && [ "$lost_any" = 1 ] && exit 1
exit 0
