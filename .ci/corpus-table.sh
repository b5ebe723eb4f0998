#!/usr/bin/env bash
# corpus-table.sh runs `audit pcap FILE --format json` on every file of a
# capture corpus and prints a markdown table: exit code, outcome (port and
# verdicts, or the exact error line), our SYN count beside tshark's, and peak
# RSS, then one summary line. With -o FILE the table goes to FILE instead,
# under a header that says it is generated and by which command; the file is
# replaced only once the whole table is written. `make corpus-table` writes
# docs/corpus-table.md this way.
#
#   ./.ci/corpus-table.sh [-o FILE]                 the corpus (see below)
#   ./.ci/corpus-table.sh [-o FILE] DIR|FILE ...    other captures
#
# The corpus is $AUDIT_CORPUS (as for the corpus tests of capture/): its top
# level, hostile/ and synthetic/.
# Its INDEX.tsv, when present, gives tshark's count of client SYNs per file.
# File names in the table are relative to the corpus, never a path of this
# machine.
#
# When a capture has SYNs to several ports, audit exits 2 and lists the
# candidate ports, most SYNs first; the script then runs again with --port
# of the first candidate and reports both. No file may panic, run longer than
# $LIMIT_S seconds (default 30) or use more than $LIMIT_KB KB (default 262144,
# 256 MiB); the exit status is 1 when one did, and each offender is flagged
# in the table.
set -uo pipefail
out=
if [ "${1:-}" = "-o" ]; then
	[ -n "${2:-}" ] || { echo "corpus-table.sh: -o needs a file name" >&2; exit 2; }
	out=$(cd "$(dirname "$2")" 2>/dev/null && pwd)/$(basename "$2") ||
		{ echo "corpus-table.sh: no directory for $2" >&2; exit 2; }
	shift 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

GO=${GO:-go}
BIN=${BIN:-bin/audit}
LIMIT_S=${LIMIT_S:-30}
LIMIT_KB=${LIMIT_KB:-262144}
TIME=/usr/bin/time # GNU time: %M is the peak RSS in KB
[ -x "$TIME" ] || { echo "corpus-table.sh: $TIME missing: apt-get install -y time" >&2; exit 2; }

$GO build -o "$BIN" ./cmd/audit || exit 2
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

if [ $# -eq 0 ]; then
	want=${AUDIT_CORPUS:-}
	[ -n "$want" ] || { echo "corpus-table.sh: no corpus: set AUDIT_CORPUS=DIR, or name captures" >&2; exit 2; }
	corpus=$(cd "$want" 2>/dev/null && pwd) ||
		{ echo "corpus-table.sh: no corpus at $want (AUDIT_CORPUS)" >&2; exit 2; }
	set -- "$corpus"
fi
# Files of a directory run from inside it, so that names and error lines
# read "hostile/zero-bytes.pcap", not a path of this machine.
files=() # "dir<TAB>name"
for arg in "$@"; do
	if [ -d "$arg" ]; then
		mapfile -t -O "${#files[@]}" files < <(cd "$arg" && find . -type f ! -name '*.tsv' ! -name '*.txt' ! -name '*.md' |
			sed 's|^\./||' | LC_ALL=C sort | sed "s|^|$(pwd)\t|")
	else
		files+=("$(dirname "$arg")"$'\t'"$(basename "$arg")")
	fi
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# run FILE ARGS...: one audit run; sets rc, rss (KB), out and err files.
# time wraps timeout, so a killed audit is still measured, and timeout
# signals audit itself, not time.
run() {
	(cd "$dir" && "$TIME" -f %M -o "$tmp/rss" timeout -k 5 "$LIMIT_S" "$BIN" pcap "$@" --format json >"$tmp/out" 2>"$tmp/err")
	rc=$?
	rss=$(tail -n 1 "$tmp/rss")
	[[ $rss =~ ^[0-9]+$ ]] || rss=0
}

# verdicts summarises the JSON report in $tmp/out.
verdicts() {
	awk '
		/^  "port": / { gsub(/[^0-9]/, "", $2); port = $2 }
		/"truncated": true/ { trunc = 1 }
		/^  "summary": \{/ { in_sum = 1; next }
		in_sum && /^  \}/ { in_sum = 0 }
		in_sum { k = $1; v = $2; gsub(/[",:]/, "", k); gsub(/,/, "", v); s[k] = v }
		END {
			printf "port %s: %s peer%s, %s passed, %s failed, %s too few", port, s["peers"], s["peers"] == 1 ? "" : "s", s["passed"], s["failed"], s["too_few"]
			if (trunc) printf "; truncated"
		}' "$tmp/out"
}

# warnings summarises the warnings of the last run: the first and a count.
warnings() {
	local nw
	nw=$(grep -c '^audit: warning: ' "$tmp/err")
	if [ "$nw" -gt 0 ]; then
		printf '; warning: %s' "$(grep -m1 '^audit: warning: ' "$tmp/err" | sed 's/^audit: warning: //')"
		[ "$nw" -gt 1 ] && printf ' (+%d more)' $((nw - 1))
	fi
}

# syns is the number of SYNs the last run counted: to the audited port, or
# to every candidate port, or none; "-" when the file could not be read.
syns() {
	case $rc in
	0 | 1) sed -nE 's/^    "syns": ([0-9]+),?$/\1/p' "$tmp/out" | head -n 1 ;;
	2) if grep -q 'no TCP SYN in the capture' "$tmp/err"; then
			echo 0
		elif grep -q 'choose the retry port: ' "$tmp/err"; then
			errline | grep -oE '\(([0-9]+) SYNs?\)' | tr -dc '0-9\n' | awk '{ s += $1 } END { print s }'
		else
			echo -
		fi ;;
	*) echo - ;;
	esac
}

# tsharkSyns is the INDEX.tsv count of client SYNs (v4 + v6) for a corpus
# file, as tshark decoded it; empty when the index does not list it.
tsharkSyns() {
	[ -f "${corpus:-}/INDEX.tsv" ] || return 0
	awk -F '\t' -v f="$1" 'NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
		$col["file"] == f { print $col["tshark_syn_v4"] + $col["tshark_syn_v6"] }' "$corpus/INDEX.tsv"
}

# errline is the exact error: the last line of stderr that is not a warning.
errline() { grep -v '^audit: warning: ' "$tmp/err" | tail -n 1; }

# flags names what went wrong with the last run, if anything.
flags() {
	local f=()
	grep -qE '^(panic: |fatal error: )' "$tmp/err" && f+=("PANIC")
	{ [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && f+=("TIMEOUT")
	[ "$rc" -gt 128 ] && [ "$rc" -ne 137 ] && f+=("SIGNAL $((rc - 128))")
	[ "$rss" -gt "$LIMIT_KB" ] && f+=("RSS > $((LIMIT_KB / 1024)) MiB")
	[ "$rc" -gt 2 ] && [ "$rc" -le 128 ] && [ "$rc" -ne 124 ] && f+=("EXIT $rc")
	local IFS=,
	echo "${f[*]}"
}

cell() { sed -e 's/|/\\|/g' -e 's/`/'"'"'/g' <<<"$1" | tr -d '\n'; }

bad=0
maxrss=0
n=0
warned=0
declare -A exits=() # exit column → rows
{
echo "| file | exit | outcome | SYNs (ours / tshark) | peak RSS KB |"
echo "| --- | ---: | --- | ---: | ---: |"
for entry in "${files[@]}"; do
	n=$((n + 1))
	dir=${entry%%$'\t'*} name=${entry#*$'\t'}
	f=$name
	run "$f"
	flag=$(flags)
	exitcol=$rc
	peak=$rss
	case $rc in
	0 | 1) outcome=$(verdicts)$(warnings) ;;
	*) outcome=$(errline)$(warnings) ;;
	esac
	nsyn=$(syns)
	if [ "$rc" -eq 2 ] && [ -z "$flag" ] && grep -q 'choose the retry port: ' "$tmp/err"; then
		# The first candidate that --port accepts (a capture may hold SYNs
		# to port 0, which --port reads as "detect").
		port=$(errline | sed -nE 's/.*choose the retry port: (.*)$/\1/p' | grep -oE '(^|, )[0-9]+ ' | tr -dc '0-9\n' | grep -vx 0 | head -n 1)
		cands=$(errline | sed -nE 's/.*the capture holds SYNs to ([0-9]+) ports.*/\1/p')
		list=$(errline | sed -nE 's/.*choose the retry port: (.*)$/\1/p')
		run "$f" --port "$port"
		flag=$(flags)
		exitcol="2 → $rc"
		peak=$((rss > peak ? rss : peak))
		case $rc in
		0 | 1) second=$(verdicts) ;;
		*) second=$(errline) ;;
		esac
		if [ ${#list} -gt 160 ]; then
			list="${list:0:150}…"
		fi
		outcome="$cands candidate ports: $list; with --port $port: $second$(warnings)"
	fi
	maxrss=$((peak > maxrss ? peak : maxrss))
	exits[$exitcol]=$((${exits[$exitcol]:-0} + 1))
	[[ $outcome == *"; warning: "* ]] && warned=$((warned + 1))
	if [ -n "$flag" ]; then
		bad=1
		outcome="**$flag** $outcome"
	fi
	echo "| $(cell "$name") | $exitcol | $(cell "$outcome") | $nsyn / $(tsharkSyns "$name") | $peak |"
done
echo
tally=()
for k in "0" "1" "2" "2 → 0" "2 → 1" "2 → 2"; do
	[ -n "${exits[$k]:-}" ] && tally+=("exit $k ×${exits[$k]}") && unset "exits[$k]"
done
for k in "${!exits[@]}"; do tally+=("exit $k ×${exits[$k]}"); done
flagged=$([ $bad -ne 0 ] && echo "some flagged (see above)" || echo "no panic, timeout or limit exceeded")
echo "$n files: $(IFS=,; echo "${tally[*]}" | sed 's/,/, /g'); $warned with warnings; $flagged;" \
	"largest peak RSS $maxrss KB; limits ${LIMIT_S}s and $LIMIT_KB KB per run"
} >"$tmp/table"

if [ -n "$out" ]; then
	{
		echo "<!-- Generated by \`make corpus-table\` (.ci/corpus-table.sh); do not edit by hand: rerun it. -->"
		echo "# \`audit pcap\` on the capture corpus"
		echo
		echo "Generated by \`make corpus-table\` (\`./.ci/corpus-table.sh -o ${out#"$root"/}\`);" \
			"the last line sums it up. One row per file: the exit code" \
			"(\`2 → 1\`: exit 2 listing several ports, then the run with \`--port\` of the first)," \
			"the verdicts or the exact error line with the first warning, the SYNs we counted" \
			"beside tshark's count from the corpus's INDEX.tsv, and the peak RSS (GNU time)."
		echo
		cat "$tmp/table"
	} >"$tmp/out.md" && mv "$tmp/out.md" "$out"
	tail -n 1 "$tmp/table"
else
	cat "$tmp/table"
fi
if [ $bad -ne 0 ]; then
	echo "corpus-table.sh: some files panicked, timed out or exceeded the memory limit (flagged above)" >&2
fi
exit $bad
