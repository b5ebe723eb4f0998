#!/usr/bin/env bash
# make bench, second part: how audit scales with peers and connections
# (BENCHMARKS.md, "Scale"). Makes each capture with the project's generators
# (reused while the generators and their parameters are unchanged), warms the
# page cache, then times, round-robin so a burst of load hits every tool alike:
#   tcpdump -r FILE -w /dev/null  'IPv4 or IPv6 SYN to the retry port'
#   audit pcap FILE --port PORT                 (text)
#   audit pcap FILE --port PORT --format json
# on 10 000 and 100 000 spec-following peers (full segments: each attempt
# the interop test's five) and 1 000 000 peers (SYNs only, as a SYN filter
# captures them); then the peak RSS of audit pcap on 200 000 peers arriving
# in 10 waves over an hour against one wave of 20 000, and of audit h2 (text
# and JSON) on 100 000 short h2c connections. Prints markdown tables
# (median and range of the wall times, the highest peak RSS) and PASS/MISS
# per target. Exit status 0 unless a tool failed, or SCALE_STRICT=1 and a
# target was missed.
#
# Environment (defaults in brackets):
#   SCALE [1]          0: skip the 1 000 000-peer capture (1 GB on disk) when short of
#                      disk or time
#   SCALE_RUNS [3]     timed runs per tool and capture
#   SCALE_DIR [testdata/bench]  where the captures go (git-ignored)
#   SCALE_AUDIT [bin/audit]     the binary to measure (built when missing)
#   SCALE_KEEP [0]     1: keep the captures over 500 MB for the next run (else removed at exit)
#   SCALE_STRICT [0]   1: exit 1 when a target is missed
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
. .ci/benchlib.sh

runs=${SCALE_RUNS:-3}
dir=${SCALE_DIR:-testdata/bench}
audit=${SCALE_AUDIT:-bin/audit}
big=${SCALE:-1}

port=$(sed -n 's/^[[:space:]]*retryPort[[:space:]]*=[[:space:]]*\([0-9][0-9]*\).*/\1/p' capture/internal/gen/fixtures.go)
[ -n "$port" ] || { echo "scale: cannot find retryPort in capture/internal/gen/fixtures.go" >&2; exit 2; }
# As .ci/bench.sh: IPv4 SYNs to the port, and IPv6 ones behind a 40-byte header.
bpf="(ip and (tcp[tcpflags] & (tcp-syn|tcp-ack)) == tcp-syn and dst port $port) or (ip6 and ip6[6] == 6 and ip6[53] & 0x12 == 0x02 and ip6[42:2] == $port)"

for t in /usr/bin/time tcpdump; do
	command -v "$t" >/dev/null || { echo "scale: $t missing (apt-get install time tcpdump as root)" >&2; exit 2; }
done
if [ ! -x "$audit" ]; then
	echo "scale: building $audit" >&2
	go build -o "$audit" ./cmd/audit
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/scale.XXXXXX")
made=()
cleanup() {
	rm -rf "$tmp"
	if [ "${SCALE_KEEP:-0}" != 1 ]; then
		for f in "${made[@]}"; do
			[ "$(stat -c %s "$f" 2>/dev/null || echo 0)" -gt 500000000 ] && rm -f "$f" "$f.meta"
		done
	fi
	return 0
}
trap cleanup EXIT
mkdir -p "$dir"

# --- Captures: name → generator arguments. ---
declare -A args_of file_of
names=(peers-10k peers-100k)
args_of[peers-10k]="peers -peers 10000"
args_of[peers-100k]="peers -peers 100000"
if [ "$big" != 0 ]; then
	names+=(peers-1m-syn)
	args_of[peers-1m-syn]="peers -peers 1000000 -peers-syn-only"
fi
names+=(wave-1 waves-10 h2-100k)
args_of[wave-1]="peers -peers 20000"
args_of[waves-10]="peers -peers 200000 -peers-waves 10"
args_of[h2-100k]="h2 -mb 1 -conns 100000 -concurrent 64"

# gen NAME: the command that makes capture NAME into $file_of[NAME].
gen_cmd() {
	local kind rest
	read -r kind rest <<<"${args_of[$1]}"
	case $kind in
	peers) echo "go run ./capture/internal/gen -peers-out ${file_of[$1]} $rest" ;;
	h2) echo "go run ./flows/internal/benchcap/gen -out ${file_of[$1]} $rest" ;;
	esac
}
gen_id=$(ls capture/internal/gen/*.go flows/internal/benchcap/*.go flows/internal/benchcap/gen/*.go | grep -v _test.go | xargs cat go.sum | sha256sum | cut -c1-16)
for n in "${names[@]}"; do
	file_of[$n]=$dir/scale-$n.pcap
	f=${file_of[$n]}
	want="gen=$gen_id ${args_of[$n]}"
	if [ ! -f "$f" ] || [ ! -f "$f.meta" ] || [ "$(head -1 "$f.meta")" != "$want" ]; then
		if [ "$n" = peers-1m-syn ]; then
			avail=$(df -P --block-size=1M "$dir" | awk 'NR == 2 { print $4 }')
			[ "$avail" -ge 1500 ] || { echo "scale: $dir has $avail MB free, the 1 000 000-peer capture takes about 1 000: run with SCALE=0" >&2; exit 2; }
		fi
		echo "scale: $(gen_cmd "$n")" >&2
		$(gen_cmd "$n") >"$tmp/gen.out" 2>&1
		{ echo "$want"; cat "$tmp/gen.out"; } >"$f.meta"
	fi
	made+=("$f")
done

# Warm the page cache (the 1 M-peer file too: it is read 3 × runs times).
for n in "${names[@]}"; do cat "${file_of[$n]}" >/dev/null; done

uptime_before=$(uptime)
echo "scale: $runs runs per tool and capture, round-robin; load: $uptime_before" >&2
timed_names=(peers-10k peers-100k)
[ "$big" != 0 ] && timed_names+=(peers-1m-syn)
for n in "${timed_names[@]}"; do
	f=${file_of[$n]}
	echo "scale: $n ($f)" >&2
	for ((r = 1; r <= runs; r++)); do
		timed "$n.tcpdump" 0 /dev/null tcpdump -r "$f" -w /dev/null "$bpf"
		timed "$n.text" "0 1" /dev/null "$audit" pcap "$f" --port "$port"
		timed "$n.json" "0 1" /dev/null "$audit" pcap "$f" --port "$port" --format json
	done
done
for ((r = 1; r <= runs; r++)); do
	timed wave-1 "0 1" /dev/null "$audit" pcap "${file_of[wave-1]}" --port "$port"
	timed waves-10 "0 1" /dev/null "$audit" pcap "${file_of[waves-10]}" --port "$port"
	timed h2.text "0 1" /dev/null "$audit" h2 "${file_of[h2-100k]}"
	timed h2.json "0 1" /dev/null "$audit" h2 "${file_of[h2-100k]}" --format json
done
uptime_after=$(uptime)

# --- Report ---
mb() { printf %.0f "$(calc "$1 * 1024 / 1e6")"; }
echo
echo "### Machine"
echo
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, kernel $(uname -r); $(go version | cut -d' ' -f3-); $(tcpdump --version 2>&1 | head -1)"
echo "- load before:${uptime_before#*load average:}, after:${uptime_after#*load average:}"
echo "- $runs runs per tool, round-robin, page cache warm; wall = median (range); RSS = highest peak of the runs; MB = 10^6 bytes"
echo
echo "### audit pcap against tcpdump"
echo
echo "| capture | file MB | attempts | tcpdump s | audit pcap (text) s | ×tcpdump | RSS MB | --format json s | JSON ÷ text | RSS MB |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
declare -A med rss
for n in "${timed_names[@]}"; do
	for t in tcpdump text json; do
		read -r b m k c w < <(stat_of "$n.$t")
		med[$n.$t]=$m rss[$n.$t]=$k
		printf -v "rng_${t}" "%.2f (%.2f–%.2f)" "$m" "$b" "$w"
	done
	label=${n#peers-}
	case $n in
	peers-10k) label="10 000 peers, full segments" ;;
	peers-100k) label="100 000 peers, full segments" ;;
	peers-1m-syn) label="1 000 000 peers, SYNs only" ;;
	esac
	printf "| %s | %.0f | %s | %s | %s | %.2f | %s | %s | %.2f | %s |\n" "$label" "$(calc "$(stat -c %s "${file_of[$n]}") / 1e6")" "$(sed -n 's/.*, \([0-9]*\) attempts,.*/\1/p' "${file_of[$n]}.meta")" \
		"$rng_tcpdump" "$rng_text" "$(calc "${med[$n.text]} / ${med[$n.tcpdump]}")" "$(mb "${rss[$n.text]}")" \
		"$rng_json" "$(calc "${med[$n.json]} / ${med[$n.text]}")" "$(mb "${rss[$n.json]}")"
done
echo
echo "### Memory"
echo
echo "| command | wall s | peak RSS MB |"
echo "| --- | ---: | ---: |"
for n in wave-1 waves-10 h2.text h2.json; do
	read -r b m k c w < <(stat_of "$n")
	rss[$n]=$k
	case $n in
	wave-1) label="audit pcap: 20 000 peers, one wave (full segments)" ;;
	waves-10) label="audit pcap: 200 000 peers, 10 waves 6 min apart (full segments)" ;;
	h2.text) label="audit h2: 100 000 h2c connections (text)" ;;
	h2.json) label="audit h2: 100 000 h2c connections (JSON)" ;;
	esac
	printf "| %s | %.2f (%.2f–%.2f) | %s |\n" "$label" "$m" "$b" "$w" "$(mb "$k")"
done
echo
echo "### Captures"
echo
for n in "${names[@]}"; do echo "- \`$(gen_cmd "$n")\`"; done
echo
echo "### Targets"
echo
missed=0
verdict() { # verdict OK TEXT
	if [ "$1" = 1 ]; then echo "- PASS $2"; else echo "- MISS $2"; missed=1; fi
}
# ratio_target NAME TOOL BASE MAX TEXT
ratio_target() {
	local x
	x=$(calc "${med[$1.$2]} / ${med[$1.$3]}")
	verdict "$(awk "BEGIN { print ($x <= $4) }")" "$5: $(printf %.2f "$x")× (≤ $4×)"
}
# rss_target KEY MAXMB TEXT
rss_target() {
	verdict "$(awk "BEGIN { print (${rss[$1]} * 1024 / 1e6 <= $2) }")" "$3: $(mb "${rss[$1]}") MB (≤ $2 MB)"
}
if [ "$big" != 0 ]; then
	ratio_target peers-1m-syn text tcpdump 3 "1 000 000 peers, SYNs only: text against tcpdump (medians)"
	rss_target peers-1m-syn.text 600 "1 000 000 peers, SYNs only: peak RSS"
else
	echo "- SKIP 1 000 000 peers (SCALE=0)"
fi
ratio_target peers-100k text tcpdump 2 "100 000 peers, full segments: text against tcpdump (medians)"
rss_target peers-100k.text 200 "100 000 peers, full segments: peak RSS, text"
rss_target peers-100k.json 200 "100 000 peers, full segments: peak RSS, JSON"
ratio_target peers-100k json text 1.3 "100 000 peers, full segments: JSON against text (medians)"
x=$(calc "${rss[waves-10]} / ${rss[wave-1]}")
verdict "$(awk "BEGIN { print ($x <= 1.5) }")" "10 waves against one: peak RSS $(printf %.2f "$x")× (≤ 1.5×)"
rss_target h2.text 200 "audit h2, 100 000 connections: peak RSS, text"
rss_target h2.json 200 "audit h2, 100 000 connections: peak RSS, JSON"

if [ "${SCALE_STRICT:-0}" = 1 ] && [ $missed = 1 ]; then
	exit 1
fi
exit 0
