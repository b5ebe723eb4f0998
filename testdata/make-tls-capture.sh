#!/usr/bin/env bash
# make-tls-capture.sh records a real client reconnecting to this project's
# `audit server --retry_mode goaway` over TLS on loopback, with the key log
# that decrypts it, for `audit h2 --keylog` and `audit pcap --keylog`
# (docs/spec.md §7.1: each connection completes TLS with ALPN h2, gets the
# server's SETTINGS and a GOAWAY NO_ERROR, and is closed; the client
# reconnects at once). It leaves, next to this script:
#
#   tls-NAME.pcap.gz  every TCP segment of the retry port, whole, pcap ns,
#                     gzip (gzip -n -9)
#   tls-NAME.keylog   the NSS key log of those connections
#
# NAME (the first argument) chooses the client and who writes the key log:
#
#   grpcjs-tls13  grpc-js (testdata/clients/grpcjs) with
#                 NODE_OPTIONS=--tls-keylog=FILE: the client's key log
#   grpcjs-tls12  the same with --tls-max-v1.2 in NODE_OPTIONS: TLS 1.2
#   grpcgo        grpc-go (audit client --reissue), the server's key log
#                 (audit server --keylog)
#   ccore         gRPC C-core through Debian's python3-grpcio
#                 (testdata/clients/ccore_client.py), the server's key log
#
# Each client runs the interop steps (Start, the retry channel, Stop) with
# the test certificate as its root (testdata/tls/server.pem) for
# DURATION_S seconds (default 1): a goaway retry port makes every client
# reconnect tens to hundreds of times a second, how many depending on the
# machine's load. So that the capture stays small (tens of KB), the script
# keeps the first KEEP connections (default 24) that the capture holds
# whole (SYN to FIN or RST, the server's GOAWAY in them: the run's last
# connections may be cut by the client's exit or the session's end), by
# their client ports (tcpdump -r with a port filter), and the key log's
# lines of those connections (by client random, as `audit h2 --keylog
# --format json` reads it). It fails when fewer were made.
#
# Run it as root (tcpdump needs CAP_NET_RAW) from anywhere in the
# repository, after `npm ci --prefix testdata/clients/grpcjs` for grpc-js:
#   ./testdata/make-tls-capture.sh NAME [AUDIT_BINARY]
# Without AUDIT_BINARY it builds ./cmd/audit into a scratch folder. Keys,
# timestamps and ports differ on every run, so the files are a sample, not
# a reproducible fixture. Read one with:
#   audit h2 --keylog testdata/tls-NAME.keylog testdata/tls-NAME.pcap.gz
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
name=${1:-}
duration=${DURATION_S:-1}
keep=${KEEP:-24}

me=make-tls-capture
. "$here/capture-lib.sh"
case "$name" in
grpcjs-tls13 | grpcjs-tls12)
	need node
	[ -d "$here/clients/grpcjs/node_modules/@grpc/grpc-js" ] || die "run npm ci --prefix testdata/clients/grpcjs first" 2
	;;
grpcgo) ;;
ccore) [ -x /usr/bin/python3 ] || die "/usr/bin/python3 not found (Debian's python3-grpcio)" 2 ;;
*) die "usage: $0 grpcjs-tls13|grpcjs-tls12|grpcgo|ccore [AUDIT_BINARY]" 2 ;;
esac
need go tcpdump gzip python3
audit_binary "${2:-}"
out_pcap="$here/tls-$name.pcap.gz"
out_keylog="$here/tls-$name.keylog"
server_keylog="$tmp/server.keylog"
client_keylog="$tmp/client.keylog"

"$audit" server --control_port=0 --retry_port=0 --retry_mode=goaway --keylog="$server_keylog" >"$tmp/server.log" 2>&1 &
server_pid=$!
started "$server_pid" INT
wait_for "$tmp/server.log" "retry port" "$server_pid"
control=$(port_of "$tmp/server.log" control) retry=$(port_of "$tmp/server.log" retry)
echo "control port $control, retry port $retry" >&2

tcpdump_start "$tmp/capture.pcap" "tcp port $retry" -s 0

ca="$here/tls/server.pem"
status=0
case "$name" in
grpcjs-tls13 | grpcjs-tls12)
	opts="--tls-keylog=$client_keylog"
	[ "$name" = grpcjs-tls12 ] && opts="$opts --tls-max-v1.2"
	NODE_OPTIONS="$opts" node "$here/clients/grpcjs/client.js" --server_host=127.0.0.1 --server_control_port="$control" \
		--server_retry_port="$retry" --ca_file="$ca" --duration_s="$duration" >"$tmp/client.out" 2>&1 || status=$?
	keylog=$client_keylog
	;;
grpcgo)
	"$audit" client --quiet --server_host=127.0.0.1 --server_control_port="$control" --server_retry_port="$retry" \
		--ca_file="$ca" --reissue --deadline="${duration}s" >"$tmp/client.out" 2>&1 || status=$?
	keylog=$server_keylog
	;;
ccore)
	/usr/bin/python3 "$here/clients/ccore_client.py" --server_host=127.0.0.1 --server_control_port="$control" \
		--server_retry_port="$retry" --ca_file="$ca" --duration_s="$duration" >"$tmp/client.out" 2>&1 || status=$?
	keylog=$server_keylog
	;;
esac
echo "$name: the client exited $status" >&2

tcpdump_stop
stop "$server_pid"

# The first $keep whole connections: their client ports (a BPF filter) and
# client randoms (the key log's lines to keep).
"$audit" h2 --keylog "$keylog" --format json "$tmp/capture.pcap" >"$tmp/h2.json" || true
python3 - "$tmp/h2.json" "$keep" "$keylog" "$tmp/filter" "$tmp/keylog" <<'PY'
import json, sys
rep, keep = json.load(open(sys.argv[1])), int(sys.argv[2])
whole = [c for c in rep["connections"] if c["syn"] and c["ended"] in ("fin", "rst")
         and any(g["dir"] == "server_to_client" and g["code"] == "NO_ERROR" for g in c.get("goaways") or [])]
if len(whole) < keep:
    sys.exit("make-tls-capture: %d whole connections, fewer than KEEP=%d: a longer DURATION_S" % (len(whole), keep))
whole = whole[:keep]
open(sys.argv[4], "w").write(" or ".join("tcp port %d" % int(c["client"].rsplit(":", 1)[1]) for c in whole))
randoms = {c["tls"]["client_random"] for c in whole}
with open(sys.argv[3]) as src, open(sys.argv[5], "w") as dst:
    for line in src:
        f = line.split()
        if len(f) == 3 and f[1] in randoms:
            dst.write(line)
PY
tcpdump -r "$tmp/capture.pcap" -w "$tmp/kept.pcap" "$(cat "$tmp/filter")" 2>/dev/null
gzip -n -9 <"$tmp/kept.pcap" >"$out_pcap"
cp "$tmp/keylog" "$out_keylog"
chmod 0644 "$out_keylog" # a test's secrets, of connections to a test certificate's key
echo "wrote $out_pcap ($(stat -c %s "$out_pcap") bytes) and $out_keylog ($(wc -l <"$out_keylog") lines)" >&2
"$audit" h2 --keylog "$out_keylog" "$out_pcap" | head -2 || true
