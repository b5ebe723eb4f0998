#!/usr/bin/python3
"""Concurrent Starts from one process: gRPC C-core via python3-grpcio.

  concurrent_starts.py --server_control_port P --server_retry_port R [--threads 8] [--connects 3]

Each of --threads threads opens its own insecure channel to the control
port, calls Start, connects to the retry port --connects times 1 s apart
(plain TCP: connect, wait for the server's close, close), then calls Stop.
C-core shares one subchannel (one TCP connection) between the channels of
a process with the same target, so every Start reaches the server from one
ip:port, as a real multi-threaded client's do. Prints one JSON line per
thread, in the order the threads end:

  {"thread": 0, "start": "OK", "stop": "OK", "passed": true, "backoff_ms": [1000, 1001]}

Exit 0 when every Start and Stop succeeded, 1 otherwise. Run it with
/usr/bin/python3 (docs/spec.md §6.1), from any directory: it imports
reconnect_client.py, beside it.
"""

import argparse
import json
import socket
import sys
import threading
import time

import grpc

# The message codecs of the interop client beside this file.
from reconnect_client import START, STOP, decode_reconnect_info


def one(n, args, out, lock):
    control = "%s:%d" % (args.server_host, args.server_control_port)
    res = {"thread": n, "start": "", "stop": ""}
    with grpc.insecure_channel(control) as ch:
        start = ch.unary_unary(START, request_serializer=lambda b: b, response_deserializer=lambda b: {})
        stop = ch.unary_unary(STOP, request_serializer=lambda b: b, response_deserializer=decode_reconnect_info)
        try:
            start(b"", timeout=args.timeout_s)
            res["start"] = "OK"
        except grpc.RpcError as err:
            res["start"] = "%s: %s" % (err.code().name, err.details())
        if res["start"] == "OK":
            for k in range(args.connects):
                if k:
                    time.sleep(1)
                with socket.create_connection((args.server_host, args.server_retry_port), timeout=args.timeout_s) as s:
                    s.recv(1)  # the server closes at once: EOF
            try:
                res.update(stop(b"", timeout=args.timeout_s))
                res["stop"] = "OK"
            except grpc.RpcError as err:
                res["stop"] = "%s: %s" % (err.code().name, err.details())
    with lock:
        out.append(res)
        print(json.dumps(res, sort_keys=True), flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server_host", default="127.0.0.1")
    ap.add_argument("--server_control_port", type=int, required=True)
    ap.add_argument("--server_retry_port", type=int, required=True)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--connects", type=int, default=3)
    ap.add_argument("--timeout_s", type=float, default=60)
    args = ap.parse_args()
    out, lock = [], threading.Lock()
    threads = [threading.Thread(target=one, args=(n, args, out, lock)) for n in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return 0 if all(r["start"] == "OK" and r["stop"] == "OK" for r in out) else 1


if __name__ == "__main__":
    sys.exit(main())
