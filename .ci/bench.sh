#!/usr/bin/env bash
# make bench: the speed targets of BENCHMARKS.md. Generates three benchmark captures with
# the project's generator (reused when the generator and its parameters are
# unchanged), warms the page cache, then times side by side, round-robin so a
# burst of load hits every tool alike:
#   cat FILE >/dev/null
#   tcpdump -r FILE -w /dev/null  'IPv4 SYN to the retry port or IPv6 SYN to it'
#   audit pcap FILE --port PORT                 (the headline: the default text report)
#   audit pcap FILE --port PORT --format json   (the second row: every peer in full)
#   audit pcap FILE --port 9                    (for comparison: reading and decoding
#                                                only, as the capture has no SYN to port 9:
#                                                it exits 2, nothing judged)
#   tshark, extracting the SYN fields (once per size: it is slow)
# and prints a markdown table, the SYN count each tool found, and PASS/MISS
# per target, for text and for JSON. A MISS is printed, not hidden; the exit
# status is 0 unless a tool failed (audit exits 1 when a peer fails, which
# the capture makes some do on purpose: only 2 or a crash is a failure), or
# BENCH_STRICT=1 and a target was missed.
#
# Environment (defaults in brackets):
#   BENCH_RUNS [5]            timed runs per tool and size; the table shows the best and the median
#   BENCH_SIZES ["500000 1000000 2000000"]  packets per capture; peers = packets / 200 (scaled,
#                             so every size has the same mix: 10 000 peers at 2 M packets)
#   BENCH_SEED [1]            generator seed
#   BENCH_DIR [testdata/bench]  where the captures go (git-ignored)
#   BENCH_AUDIT [bin/audit]   the binary to measure (built when missing)
#   BENCH_TSHARK_MAX [120]    seconds: tshark skips a size whose time, extrapolated from the
#                             smallest size, would exceed this
#   BENCH_GO [0]              1: also run the Go micro-benchmarks (capture, attempt, server)
#   BENCH_STRICT [0]          1: exit 1 when a target is missed
set -euo pipefail
export LC_ALL=C
cd "$(dirname "$0")/.."
. .ci/benchlib.sh

runs=${BENCH_RUNS:-5}
sizes=(${BENCH_SIZES:-500000 1000000 2000000})
seed=${BENCH_SEED:-1}
dir=${BENCH_DIR:-testdata/bench}
audit=${BENCH_AUDIT:-bin/audit}
tshark_max=${BENCH_TSHARK_MAX:-120}
pkts_per_peer=200

# The retry port is the generator's, read from its source so the two agree.
port=$(sed -n 's/^[[:space:]]*retryPort[[:space:]]*=[[:space:]]*\([0-9][0-9]*\).*/\1/p' capture/internal/gen/fixtures.go)
[ -n "$port" ] || { echo "bench: cannot find retryPort in capture/internal/gen/fixtures.go" >&2; exit 2; }

# BPF tcp[] offsets address IPv4 only (docs/spec.md §5.5): the IPv6 clause reads the
# TCP header at its fixed offset behind a 40-byte header with no extension
# header (next header 6): flags at 40+13, destination port at 40+2.
bpf="(ip and (tcp[tcpflags] & (tcp-syn|tcp-ack)) == tcp-syn and dst port $port) or (ip6 and ip6[6] == 6 and ip6[53] & 0x12 == 0x02 and ip6[42:2] == $port)"
tshark_filter="tcp.flags.syn==1 && tcp.flags.ack==0 && tcp.dstport==$port"
tshark_fields=(-e frame.time_epoch -e ip.src -e ipv6.src -e tcp.srcport -e tcp.seq_raw)

# Tools: install what is missing when root, else name it and skip its column.
declare -A pkg_of=([/usr/bin/time]=time [tcpdump]=tcpdump [tshark]=tshark)
missing=()
for t in /usr/bin/time tcpdump tshark; do
	command -v "$t" >/dev/null || missing+=("${pkg_of[$t]}")
done
if [ ${#missing[@]} -gt 0 ] && [ "$(id -u)" -eq 0 ]; then
	echo "bench: installing ${missing[*]}" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || true
fi
command -v /usr/bin/time >/dev/null || { echo "bench: /usr/bin/time missing (apt-get install time as root)" >&2; exit 2; }
have_tcpdump=1 have_tshark=1
command -v tcpdump >/dev/null || { have_tcpdump=0; echo "bench: tcpdump missing (apt-get install tcpdump as root): its column is skipped" >&2; }
command -v tshark >/dev/null || { have_tshark=0; echo "bench: tshark missing (apt-get install tshark as root): its column is skipped" >&2; }

if [ ! -x "$audit" ]; then
	echo "bench: building $audit" >&2
	go build -o "$audit" ./cmd/audit
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$dir"

# --- Captures: generate once, reuse while generator and parameters match. ---
gen_id=$(ls capture/internal/gen/*.go | grep -v _test.go | xargs cat go.sum | sha256sum | cut -c1-16)
declare -A file_of bytes_of syns_of peers_of
gen_bin=""
for n in "${sizes[@]}"; do
	peers=$((n / pkts_per_peer))
	f="$dir/syn-$n-$peers-s$seed.pcap"
	want="gen=$gen_id packets=$n peers=$peers seed=$seed"
	if [ ! -f "$f" ] || [ ! -f "$f.meta" ] || [ "$(head -1 "$f.meta")" != "$want" ]; then
		if [ -z "$gen_bin" ]; then
			gen_bin="$tmp/gen"
			go build -o "$gen_bin" ./capture/internal/gen
		fi
		echo "bench: generating $f" >&2
		"$gen_bin" -bench-out "$f" -bench-packets "$n" -bench-peers "$peers" -bench-seed "$seed" 2>"$tmp/gen.out"
		{ echo "$want"; cat "$tmp/gen.out"; } >"$f.meta"
	fi
	# "FILE: N packets, B bytes, P peers, A attempts, S SYNs to port X"
	stats=$(sed -n 2p "$f.meta")
	file_of[$n]=$f
	bytes_of[$n]=$(stat -c %s "$f")
	syns_of[$n]=$(sed -n 's/.*, \([0-9]*\) SYNs to port.*/\1/p' <<<"$stats")
	peers_of[$n]=$peers
done

# Warm the page cache (twice: the first read may still be evicting).
for n in "${sizes[@]}"; do cat "${file_of[$n]}" >/dev/null; cat "${file_of[$n]}" >/dev/null; done

uptime_before=$(uptime)
echo "bench: $runs runs per tool and size, round-robin; load: $uptime_before" >&2
tools=(cat tcpdump audit audit-json audit-read)
[ $have_tcpdump = 1 ] || tools=(cat audit audit-json audit-read)
for n in "${sizes[@]}"; do
	f=${file_of[$n]}
	echo "bench: $n packets ($f)" >&2
	for ((r = 1; r <= runs; r++)); do
		for t in "${tools[@]}"; do
			case $t in
			cat) timed "$n.cat" 0 /dev/null cat "$f" ;;
			tcpdump) timed "$n.tcpdump" 0 /dev/null tcpdump -r "$f" -w /dev/null "$bpf" ;;
			audit) timed "$n.audit" "0 1" "$tmp/audit.txt" "$audit" pcap "$f" --port "$port" ;;
			audit-json) timed "$n.audit-json" "0 1" "$tmp/audit.json" "$audit" pcap "$f" --port "$port" --format json ;;
			audit-read) timed "$n.audit-read" "0 1 2" /dev/null "$audit" pcap "$f" --port 9 ;;
			esac
		done
	done
	# SYN counts: what each tool found (untimed).
	if command -v jq >/dev/null; then
		echo "audit $(jq .capture.syns "$tmp/audit.json")" >"$tmp/$n.count"
	else
		echo "audit $(grep -m1 '"syns"' "$tmp/audit.json" | tr -dc 0-9)" >"$tmp/$n.count"
	fi
	if [ $have_tcpdump = 1 ]; then
		echo "tcpdump $(tcpdump -nn -r "$f" "$bpf" 2>/dev/null | wc -l)" >>"$tmp/$n.count"
	fi
done

# tshark: once per size, smallest first; skipped where the extrapolated time
# is over BENCH_TSHARK_MAX.
declare -A tshark_note
if [ $have_tshark = 1 ]; then
	first=""
	for n in "${sizes[@]}"; do
		if [ -n "$first" ]; then
			est=$(calc "$(stat_of "$first.tshark" | cut -d' ' -f1) * ${bytes_of[$n]} / ${bytes_of[$first]}")
			if awk "BEGIN { exit !($est > $tshark_max) }"; then
				tshark_note[$n]="skipped: ~${est%.*} s expected > BENCH_TSHARK_MAX=$tshark_max"
				echo "bench: tshark on $n packets ${tshark_note[$n]}" >&2
				continue
			fi
		fi
		echo "bench: tshark on $n packets (slow)" >&2
		timed "$n.tshark" 0 "$tmp/tshark.out" tshark -r "${file_of[$n]}" -Y "$tshark_filter" -T fields "${tshark_fields[@]}"
		echo "tshark $(wc -l <"$tmp/tshark.out")" >>"$tmp/$n.count"
		first=${first:-$n}
	done
fi
uptime_after=$(uptime)

# --- Report ---
echo
echo "### Machine"
echo
echo "- $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(awk '/MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo) RAM, kernel $(uname -r)"
echo "- $(go version | cut -d' ' -f3-); $( [ $have_tcpdump = 1 ] && tcpdump --version 2>&1 | head -2 | tr '\n' ' ')$( [ $have_tshark = 1 ] && tshark --version 2>/dev/null | head -1)"
echo "- $(date -u '+%Y-%m-%d %H:%M UTC'); load before:${uptime_before#*load average:}, after:${uptime_after#*load average:}"
echo "- $runs runs per tool and size, round-robin, page cache warm; wall = best run (median beside it); RSS = highest peak of the runs; MB = 10^6 bytes"
echo
echo "### Results"
echo
echo "| tool | packets | file MB | wall s best | wall s median | MB/s | Mpkt/s | peak RSS MB | ×tcpdump | ×cat | tshark ÷ tool |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
declare -A best med rss
for n in "${sizes[@]}"; do
	for t in cat tcpdump audit audit-json audit-read tshark; do
		[ -f "$tmp/$n.$t" ] || continue
		read -r b m k c < <(stat_of "$n.$t")
		best[$n.$t]=$b med[$n.$t]=$m rss[$n.$t]=$k
	done
	for t in cat tcpdump audit audit-json audit-read tshark; do
		label=$t
		[ "$t" = audit ] && label="audit pcap (text)"
		[ "$t" = audit-json ] && label="audit pcap --format json"
		[ "$t" = audit-read ] && label="audit pcap --port 9 (read only)"
		if [ -z "${best[$n.$t]:-}" ]; then
			[ "$t" = tshark ] && [ -n "${tshark_note[$n]:-}" ] && printf "| tshark | %d | %.0f | %s | | | | | | | |\n" "$n" "$(calc "${bytes_of[$n]} / 1e6")" "${tshark_note[$n]}"
			continue
		fi
		b=${best[$n.$t]}
		xt="" xc="" xs=""
		[ -n "${best[$n.tcpdump]:-}" ] && xt=$(printf %.2f "$(calc "$b / ${best[$n.tcpdump]}")")
		xc=$(printf %.2f "$(calc "$b / ${best[$n.cat]}")")
		[ -n "${best[$n.tshark]:-}" ] && xs=$(printf %.1f "$(calc "${best[$n.tshark]} / $b")")
		[ "$t" = tshark ] && m="(1 run)" || m=$(printf %.3f "${med[$n.$t]}")
		printf "| %s | %d | %.0f | %.3f | %s | %.0f | %.2f | %.1f | %s | %s | %s |\n" "$label" "$n" \
			"$(calc "${bytes_of[$n]} / 1e6")" "$b" "$m" "$(calc "${bytes_of[$n]} / 1e6 / $b")" \
			"$(calc "$n / 1e6 / $b")" "$(calc "${rss[$n.$t]} * 1024 / 1e6")" "$xt" "$xc" "$xs"
	done
done

echo
echo "### SYNs to port $port found"
echo
count_tools=(audit)
[ $have_tcpdump = 1 ] && count_tools+=(tcpdump)
[ $have_tshark = 1 ] && count_tools+=(tshark)
echo "| packets | peers | generator wrote | ${count_tools[*]/%/ |} equal |"
echo "| ---: | ---: | ---: |$(printf ' ---: |%.0s' "${count_tools[@]}") --- |"
counts_ok=1
for n in "${sizes[@]}"; do
	row="" eq=yes
	for t in "${count_tools[@]}"; do
		c=$(awk -v t="$t" '$1 == t { print $2 }' "$tmp/$n.count")
		row+="${c:-not run} | "
		[ -z "$c" ] || [ "$c" = "${syns_of[$n]}" ] || eq=NO
	done
	[ $eq = yes ] || counts_ok=0
	echo "| $n | ${peers_of[$n]} | ${syns_of[$n]} | $row$eq |"
done
echo
missed=0
verdict() { # verdict OK TEXT
	if [ "$1" = 1 ]; then echo "- PASS $2"; else echo "- MISS $2"; missed=1; fi
}
# targets TOOL: the speed targets for one audit row.
targets() {
	local t=$1 n a x mb lo hi per_lo per_hi fit growth
	for n in "${sizes[@]}"; do
		a=${best[$n.$t]}
		if [ -n "${best[$n.tcpdump]:-}" ]; then
			x=$(calc "$a / ${best[$n.tcpdump]}")
			verdict "$(awk "BEGIN { print ($x <= 0.6) }")" "$n pkts: ≤ 0.6× tcpdump: $(printf %.3f "$a") s vs $(printf %.3f "${best[$n.tcpdump]}") s = $(printf %.2f "$x")×"
		else
			echo "- SKIP $n pkts: ≤ 0.6× tcpdump: tcpdump missing"
		fi
		if [ -n "${best[$n.tshark]:-}" ]; then
			x=$(calc "${best[$n.tshark]} / $a")
			verdict "$(awk "BEGIN { print ($x >= 50) }")" "$n pkts: ≥ 50× faster than tshark: $(printf %.1f "${best[$n.tshark]}") s vs $(printf %.3f "$a") s = $(printf %.1f "$x")×"
		else
			echo "- SKIP $n pkts: ≥ 50× faster than tshark: ${tshark_note[$n]:-tshark missing}"
		fi
		x=$(calc "$a / ${best[$n.cat]}")
		verdict "$(awk "BEGIN { print ($x <= 3) }")" "$n pkts: within 3× of cat: $(printf %.3f "$a") s vs $(printf %.3f "${best[$n.cat]}") s = $(printf %.2f "$x")×"
		mb=$(calc "${rss[$n.$t]} * 1024 / 1e6")
		verdict "$(awk "BEGIN { print ($mb < 100) }")" "$n pkts: peak RSS < 100 MB: $(printf %.1f "$mb") MB"
	done
	# Linear growth: time per packet of the largest size at most 1.2× that of the
	# smallest (process start-up makes small sizes dearer per packet, never cheaper).
	lo=${sizes[0]} hi=${sizes[-1]}
	per_lo=$(calc "${best[$lo.$t]} / $lo * 1e9") per_hi=$(calc "${best[$hi.$t]} / $hi * 1e9")
	fit=$(for n in "${sizes[@]}"; do echo "$n ${best[$n.$t]}"; done | awk '{ x[NR] = $1; y[NR] = $2; sx += $1; sy += $2 }
		END { mx = sx / NR; my = sy / NR; for (i = 1; i <= NR; i++) { sxy += (x[i] - mx) * (y[i] - my); sxx += (x[i] - mx) ^ 2; syy += (y[i] - my) ^ 2 }
			b = (sxx > 0) ? sxy / sxx : 0; a = my - b * mx; r2 = (syy > 0 && sxx > 0) ? sxy * sxy / (sxx * syy) : 1
			printf "wall ≈ %.3f s + %.1f ns × packets, R² = %.4f", a, b * 1e9, r2 }')
	growth=$(for n in "${sizes[@]}"; do printf "%s: %.0f ns/pkt; " "$n" "$(calc "${best[$n.$t]} / $n * 1e9")"; done)
	verdict "$(awk "BEGIN { print ($per_hi <= 1.2 * $per_lo) }")" "linear growth (ns/packet at $hi ≤ 1.2× at $lo): ${growth% } $fit"
}
echo "### Targets: audit pcap (text, the default), best run"
echo
targets audit
echo
echo "### Targets: audit pcap --format json, best run"
echo
targets audit-json
echo
[ $counts_ok = 1 ] && echo "- PASS every tool found the generator's SYN count" || { echo "- MISS SYN counts differ (table above)"; missed=1; }

if [ "${BENCH_GO:-0}" = 1 ]; then
	echo
	echo "### Go micro-benchmarks"
	echo
	echo '```'
	echo "\$ go test -run XXX -bench . -benchmem ./capture/ ./attempt/ ./server/"
	go test -run XXX -bench . -benchmem ./capture/ ./attempt/ ./server/ 2>&1 | grep -E '^(Benchmark|ok|FAIL|goos|cpu)'
	echo '```'
fi

if [ "${BENCH_STRICT:-0}" = 1 ] && [ $missed = 1 ]; then
	exit 1
fi
exit 0
