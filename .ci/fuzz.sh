#!/usr/bin/env bash
# fuzz.sh runs every Go fuzz target of the module, one after another, for
# FUZZTIME each (default 60s; any -fuzztime value, e.g. 10m or 100000x), and
# prints a markdown table of executions and findings per target, the figures
# RELIABILITY.md records.
#
#   ./.ci/fuzz.sh                      every target, 60 s each
#   FUZZTIME=10m ./.ci/fuzz.sh         longer (FUZZMINIMIZETIME: see below)
#   ./.ci/fuzz.sh FuzzReadRecord       only the targets named (regexp match)
#
# A failing target leaves its minimised input under the package's
# testdata/fuzz/<Target>/, where plain `go test` replays it: commit it with
# the fix as the regression test. The exit status is non-zero
# when any target failed. Full logs stay in $FUZZLOG (default a fresh
# temporary directory, printed at the end).
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZTIME=${FUZZTIME:-60s}
# A worker minimises every new interesting input before reporting it, for up
# to this long, and those runs are not counted in execs (the "0/sec" lines
# of the log). Go's default is 60s; 10s keeps a 60 s run mostly fuzzing.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-10s}
GO=${GO:-go}
FUZZLOG=${FUZZLOG:-$(mktemp -d -t audit-fuzz.XXXXXX)}
mkdir -p "$FUZZLOG"
only=${1:-.}

# Targets as "package name", from `go test -list` (compiles each test binary
# once; no test runs).
mapfile -t targets < <(
	$GO test -list '^Fuzz' ./... 2>&1 | awk '
		/^Fuzz/ { names[n++] = $1; next }
		/^(ok|FAIL)[ \t]/ { for (i = 0; i < n; i++) print $2, names[i]; n = 0 }
	' | awk -v only="$only" '$2 ~ only'
)
if [ ${#targets[@]} -eq 0 ]; then
	echo "fuzz.sh: no fuzz target matches '$only'" >&2
	exit 2
fi

echo "fuzz.sh: ${#targets[@]} targets, $FUZZTIME each, $(nproc) CPUs, $($GO version | cut -d' ' -f3), logs in $FUZZLOG" >&2
rows=()
failed=0
for t in "${targets[@]}"; do
	pkg=${t% *} name=${t#* }
	log="$FUZZLOG/$name.log"
	echo "fuzz.sh: $name ($pkg) ..." >&2
	start=$(date +%s)
	$GO test -run '^$' -fuzz "^$name\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" \
		-timeout "${FUZZ_TIMEOUT:-30m}" "$pkg" >"$log" 2>&1
	rc=$?
	secs=$(( $(date +%s) - start ))
	# The last progress line holds the totals:
	# "fuzz: elapsed: 1m0s, execs: 123456 (2050/sec), new interesting: 4 (total: 14)"
	last=$(grep -E '^fuzz: elapsed: .*execs: ' "$log" | tail -n 1)
	execs=$(sed -nE 's/.*execs: ([0-9]+) .*/\1/p' <<<"$last")
	elapsed=$(sed -nE 's/^fuzz: elapsed: ([0-9hms]+),.*/\1/p' <<<"$last")
	esecs=$(awk -v d="$elapsed" 'BEGIN { s = 0; while (match(d, /^[0-9]+[hms]/)) { v = substr(d, 1, RLENGTH - 1); u = substr(d, RLENGTH, 1); s += v * (u == "h" ? 3600 : u == "m" ? 60 : 1); d = substr(d, RLENGTH + 1) } print s }')
	rate=$([ -n "$execs" ] && [ "${esecs:-0}" -gt 0 ] && echo $(( execs / esecs )))
	newi=$(sed -nE 's/.*new interesting: ([0-9]+) .*/\1/p' <<<"$last")
	total=$(sed -nE 's/.*\(total: ([0-9]+)\).*/\1/p' <<<"$last")
	if [ $rc -eq 0 ]; then
		finding="none"
	else
		failed=1
		crasher=$(sed -nE 's/.*Failing input written to (.*)$/\1/p' "$log" | tail -n 1)
		# The first line that says why: a test's message, a panic, a hang.
		msg=$(grep -m1 -E '^\s+[a-z0-9_]+\.go:[0-9]+: |panic: |fuzzing process hung|fuzzing process terminated' "$log" ||
			grep -m1 -E -- '--- FAIL' "$log")
		msg=$(sed -E 's/^\s+//; s/\|/\\|/g' <<<"$msg" | cut -c1-160)
		finding="**FAIL** ${msg:-exit $rc}${crasher:+ (input: ${pkg#github.com/backoff-audit/audit/}/$crasher)}"
	fi
	rows+=("| $name | ${pkg#github.com/backoff-audit/audit/} | ${secs}s | ${execs:-?} | ${rate:-?} | ${newi:-?} | ${total:-?} | $finding |")
done

echo
echo "| target | package | wall | execs | execs/s (mean) | new interesting | corpus | findings |"
echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |"
printf '%s\n' "${rows[@]}"
echo
echo "fuzz.sh: logs in $FUZZLOG" >&2
exit $failed
