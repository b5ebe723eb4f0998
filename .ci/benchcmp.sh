#!/usr/bin/env bash
# benchcmp.sh REV [FILE]: audit pcap at REV against the working tree, on the
# same capture, in one interleaved run: the figure behind every "slows by no
# more than N %" in BENCHMARKS.md. Builds both binaries (REV in a temporary
# worktree), warms the page cache, then times text and JSON reports of each,
# round-robin with the order reversed every other round, and prints best,
# first quartile and median per command, and head ÷ REV of each.
#
#   .ci/benchcmp.sh 9cc7ee0                     the 2 M-packet bench capture
#   RUNS=30 .ci/benchcmp.sh HEAD~3 big.pcap     another file, more runs
#   HEAD_FLAGS=--infer .ci/benchcmp.sh .        what a flag costs: the working
#                                               tree without it against itself with it
#
# FILE defaults to make bench's 2 M-packet capture (made when missing);
# PORT (default 50052) is the retry port; RUNS (default 20) rounds. REV "."
# is the working tree itself (no second build); HEAD_FLAGS are added to the
# working tree's commands only.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: .ci/benchcmp.sh REV [FILE]}
file=${2:-testdata/bench/syn-2000000-10000-s1.pcap}
port=${PORT:-50052}
runs=${RUNS:-20}
GO=${GO:-go}

if [ ! -f "$file" ]; then
	mkdir -p "$(dirname "$file")"
	$GO run ./capture/internal/gen -bench-out "$file" -bench-packets 2000000 -bench-peers 10000 -bench-seed 1 >&2
fi
tmp=$(mktemp -d -t audit-benchcmp.XXXXXX)
wt=$tmp/worktree
trap 'git worktree remove --force "$wt" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
$GO build -o "$tmp/head" ./cmd/audit
if [ "$rev" = . ]; then
	cp "$tmp/head" "$tmp/base"
else
	git worktree add --detach -q "$wt" "$rev"
	(cd "$wt" && $GO build -o "$tmp/base" ./cmd/audit)
fi
hflags=${HEAD_FLAGS:-}
cat "$file" >/dev/null
cat "$file" >/dev/null

names=(base-text head-text base-json head-json)
cmd_of() {
	case $1 in
	base-text) echo "$tmp/base pcap $file --port $port" ;;
	head-text) echo "$tmp/head pcap $file --port $port $hflags" ;;
	base-json) echo "$tmp/base pcap $file --port $port --format json" ;;
	head-json) echo "$tmp/head pcap $file --port $port --format json $hflags" ;;
	esac
}
base_rev=$([ "$rev" = . ] && echo "the working tree" || git rev-parse --short "$rev")
echo "benchcmp: $rev ($base_rev) against the working tree${hflags:+ with $hflags} ($(git rev-parse --short HEAD)$(git diff --quiet || echo ', modified')), $runs rounds; load: $(uptime)" >&2
for ((i = 0; i <= runs; i++)); do
	order=("${names[@]}")
	((i % 2)) && order=(head-json base-json head-text base-text)
	for n in "${order[@]}"; do
		t0=$EPOCHREALTIME
		$(cmd_of "$n") >/dev/null 2>&1 || [ $? = 1 ] # 1: a peer fails, as the bench capture makes some do
		t1=$EPOCHREALTIME
		((i > 0)) && echo "$t0 $t1" | awk '{ printf "%.4f\n", $2 - $1 }' >>"$tmp/$n"
	done
done
echo "load after: $(uptime)" >&2
printf '| command | best s | p25 s | median s |\n| --- | ---: | ---: | ---: |\n'
for n in "${names[@]}"; do
	sort -g "$tmp/$n" | awk -v n="$n" '{ w[NR] = $1 } END { m = (NR % 2) ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2; printf "| %s | %.3f | %.3f | %.3f |\n", n, w[1], w[int((NR + 3) / 4)], m; print n, w[1], m > "/dev/stderr" }' 2>>"$tmp/summary"
done
awk '{ best[$1] = $2; med[$1] = $3 }
	END {
		split("text json", k, " ")
		for (i = 1; i <= 2; i++) printf "head ÷ base, %s: best %.2f, median %.2f\n", k[i], best["head-" k[i]] / best["base-" k[i]], med["head-" k[i]] / med["base-" k[i]] }' "$tmp/summary"
