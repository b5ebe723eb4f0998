#!/usr/bin/env bash
# make-control-capture.sh records interop runs of the C-core client
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
# CLIENT_PY names another interpreter for the client, with its own grpcio,
# RUNS runs it that many times in the one capture (a session each; the JSON
# then lists every Stop's answer under "stops"), and NAME names the files
# control-NAME.*: the newer C-core of the Google Cloud CLI's bundled Python
# (grpcio 1.71), which jitters its first backoff, is recorded with
#   SERVER=audit CLIENT_PY=/usr/lib/google-cloud-sdk/platform/bundledpythonunix/bin/python3 \
#     RUNS=8 NAME=ccore171 ./testdata/make-control-capture.sh
#
# A run takes about 7 s. Timestamps and ports differ on every run, so the
# files are a sample, not a reproducible fixture.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
server=${SERVER:-python}
name=ccore
[ "$server" = audit ] && name=audit
name=${NAME:-$name}
out_pcap="$here/control-$name.pcap"
out_json="$here/control-$name.json"
deadline=${DEADLINE_S:-6}
cap_ms=${MAX_RECONNECT_BACKOFF_MS:-2000}
py=/usr/bin/python3 # Debian's python3-grpcio is for this interpreter (docs/spec.md §6.1)
client_py=${CLIENT_PY:-$py}
runs=${RUNS:-1}

me=make-control-capture
. "$here/capture-lib.sh"
need tcpdump "$py" "$client_py"

if [ "$server" = audit ]; then
	audit_binary "${1:-}"
	"$audit" server --control_port=0 --retry_port=0 >"$tmp/server.out" 2>&1 &
else
	"$py" "$here/interop/reconnect_server.py" >"$tmp/server.out" 2>"$tmp/server.err" &
fi
server_pid=$!
started "$server_pid" INT
wait_for "$tmp/server.out" "retry.port" "$server_pid"
control=$(port_of "$tmp/server.out" control) retry=$(port_of "$tmp/server.out" retry)
echo "server: control port $control, retry port $retry" >&2

# --immediate-mode: without it libpcap holds the last packets (Stop among
# them) in a ring block that SIGINT never hands out. Both ends are
# 127.0.0.1: other processes of a shared machine that connect from 127.0.1.x
# with one of the two ports as their source port stay out.
tcpdump_start "$tmp/capture.pcap" "src host 127.0.0.1 and dst host 127.0.0.1 and (tcp port $control or tcp port $retry)" \
	--immediate-mode -s 0

: >"$tmp/client.out"
for run in $(seq "$runs"); do
	status=0
	"$client_py" "$here/interop/reconnect_client.py" --server_control_port="$control" --server_retry_port="$retry" \
		--max_reconnect_backoff_ms="$cap_ms" --deadline_s="$deadline" >>"$tmp/client.out" || status=$?
	echo "client run $run exited $status: $(tail -1 "$tmp/client.out")" >&2
done

tcpdump_stop 1
stop "$server_pid"

cp "$tmp/capture.pcap" "$out_pcap"
# What Stop answered, as the client printed it: one answer a run.
stops=$(sed -nE 's/.*("backoff_ms": \[[^]]*\]).*("grpc_version": "[^"]*").*("passed": (true|false)).*/{\1, \3, \2}/p' "$tmp/client.out")
if [ "$runs" -eq 1 ]; then
	printf '{"control_port": %s, "retry_port": %s, "max_reconnect_backoff_ms": %s, "stop": %s}\n' \
		"$control" "$retry" "$cap_ms" "${stops:-null}" >"$out_json"
else
	printf '{"control_port": %s, "retry_port": %s, "max_reconnect_backoff_ms": %s, "stops": [%s]}\n' \
		"$control" "$retry" "$cap_ms" "$(echo "$stops" | paste -sd, | sed 's/,{/, {/g')" >"$out_json"
fi
echo "wrote $out_pcap and $out_json" >&2
cat "$out_json" >&2
