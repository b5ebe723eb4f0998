# Sourced by .ci/bench.sh and .ci/scale.sh: the timing helpers both use.
# The caller sets $tmp (a scratch folder) before calling them.

# calc EXPR: floating-point arithmetic.
calc() { awk "BEGIN { printf \"%.6g\", $1 }"; }

# timed NAME OKCODES OUT CMD...: runs CMD under /usr/bin/time, its output to
# OUT; appends "wall_s rss_kb" to $tmp/NAME. Wall time comes from the shell clock (µs; time's
# %e has 10 ms steps, too coarse for cat), peak RSS from time's %M.
timed() {
	local name=$1 ok=$2 out=$3 rc=0 t0 t1
	shift 3
	t0=$EPOCHREALTIME
	/usr/bin/time -f '%e %M' -o "$tmp/time" "$@" >"$out" 2>"$tmp/stderr" || rc=$?
	t1=$EPOCHREALTIME
	if [[ " $ok " != *" $rc "* ]]; then
		echo "bench: $name: exit status $rc: $*" >&2
		tail -5 "$tmp/stderr" >&2
		exit 2
	fi
	echo "$(calc "$t1 - $t0") $(tail -1 "$tmp/time" | cut -d' ' -f2)" >>"$tmp/$name"
}

# stat_of NAME: "best median max_rss_kb count worst" of $tmp/NAME.
stat_of() {
	sort -g -k1,1 "$tmp/$1" | awk '{ w[NR] = $1; if ($2 > r) r = $2 }
		END { m = (NR % 2) ? w[(NR + 1) / 2] : (w[NR / 2] + w[NR / 2 + 1]) / 2; printf "%s %s %d %d %s\n", w[1], m, r, NR, w[NR] }'
}
