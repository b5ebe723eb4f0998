#!/usr/bin/env bash
# hold.sh N: holds N connections to `audit server --retry_mode hang` in one
# session and prints the server's peak RSS and how many it held (its log's
# "not_held" counts the rest). The clients are another process (python3),
# so the server's descriptors and memory are its own. RELIABILITY.md,
# "Retry-port modes", quotes its figures. Needs bin/audit (make build) and
# /usr/bin/python3 with Debian's python3-grpcio; loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10000}
log=$(mktemp)
trap 'kill $srv 2>/dev/null || true; rm -f $log $log.out' EXIT
bin/audit server --retry_mode hang --control_port 0 --retry_port 0 >"$log.out" 2>"$log" &
srv=$!
for _ in $(seq 50); do grep -q "retry port" "$log.out" 2>/dev/null && break; sleep 0.1; done
control=$(sed -n 's/^control port .*:\([0-9]*\)$/\1/p' "$log.out")
retry=$(sed -n 's/^retry port .*:\([0-9]*\)$/\1/p' "$log.out")
/usr/bin/python3 - "$control" "$retry" "$n" "$srv" <<'PY'
import socket, sys, time, grpc
control, retry, n, pid = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ch = grpc.insecure_channel("127.0.0.1:" + control)
start = ch.unary_unary("/grpc.testing.ReconnectService/Start", request_serializer=lambda b: b, response_deserializer=lambda b: b)
stop = ch.unary_unary("/grpc.testing.ReconnectService/Stop", request_serializer=lambda b: b, response_deserializer=lambda b: b)
start(b"", timeout=10)
socks = []
t0 = time.time()
for i in range(n):
    s = socket.socket()
    s.connect(("127.0.0.1", retry))
    socks.append(s)
took = time.time() - t0
time.sleep(1)
rss = [l for l in open("/proc/%s/status" % pid) if l.startswith(("VmRSS", "VmHWM"))]
fds = len(__import__("os").listdir("/proc/%s/fd" % pid))
print("%d connections in %.1f s; server: %s, %d descriptors" % (n, took, ", ".join(x.split()[0] + " " + x.split()[1] + " kB" for x in rss), fds))
stop(b"", timeout=30)
for s in socks:
    s.close()
PY
sleep 0.5
grep -o 'attempts=[0-9]* dropped=[0-9]*\|not_held=[0-9]*\|verified_open_at_end=[0-9]*' "$log" | tr '\n' ' '; echo
