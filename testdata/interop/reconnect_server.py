#!/usr/bin/python3
"""A third-party ReconnectService server: gRPC C-core via python3-grpcio.

It serves the interop test of docs/spec.md §1.2 the way the C++ reference
does, with nothing of this project in it, so that `audit` can be checked
against a server it did not write:

- the control port serves grpc.testing.ReconnectService (Start, Stop) over
  plaintext gRPC (h2c);
- the retry port is plain TCP: every connection is accepted and closed at
  once, nothing written, and its arrival time (time.time(), after accept)
  is noted while a session runs;
- Stop answers ReconnectInfo{passed, backoff_ms} with the reference's
  verifier (docs/spec.md §3): intervals in whole ms rounded down, E from
  1000 by x1.6 then capped, window E*(1-0.2)-100 <= b <= E*(1+0.2)+100, every
  interval appended, passed when all pass. As the reference, 0 or 1
  connection passes (docs/spec.md §4.1), and every connection counts,
  whatever its address. Unlike it, each Start's max_reconnect_backoff_ms is
  used (the reference latches the first one of the process).

It prints one JSON line once both ports listen:

  {"control_port": 40001, "retry_port": 40002}

and, on each Stop, a line {"stop": {"passed": ..., "backoff_ms": [...]}},
until SIGINT or SIGTERM. --control_port and --retry_port as the reference
server's (0 picks a free port). Debian's python3-grpcio has no protoc
plugin, so the two messages are encoded by hand (proto3 varints, docs/spec.md
§2). Run it with /usr/bin/python3 (docs/spec.md §6.1).
"""

import argparse
import concurrent.futures
import json
import math
import os
import signal
import socket
import sys
import threading
import time

import grpc

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reconnect_client as wire  # noqa: E402  the hand-encoded messages of docs/spec.md §2

SERVICE = "grpc.testing.ReconnectService"


def decode_reconnect_params(buf):
    """ReconnectParams{int32 max_reconnect_backoff_ms = 1}; Empty decodes to 0."""
    max_ms, i = 0, 0
    while i < len(buf):
        key, i = wire.decode_varint(buf, i)
        field, kind = key >> 3, key & 7
        if kind == 0:
            v, i = wire.decode_varint(buf, i)
            if field == 1:
                max_ms = wire.as_int32(v)
        elif kind == 2:
            n, i = wire.decode_varint(buf, i)
            i += n
        elif kind == 1:
            i += 8
        elif kind == 5:
            i += 4
        else:
            raise ValueError("wire type %d of field %d" % (kind, field))
    return max_ms


def encode_reconnect_info(info):
    """ReconnectInfo{bool passed = 1; repeated int32 backoff_ms = 2 (packed)}."""
    out = b""
    if info["passed"]:
        out += b"\x08\x01"
    if info["backoff_ms"]:
        packed = b"".join(wire.encode_varint(v) for v in info["backoff_ms"])
        out += b"\x12" + wire.encode_varint(len(packed)) + packed
    return out


def verify(times, max_ms):
    """The reference's Verify (docs/spec.md §3) over accept times in seconds."""
    cap = float(max_ms if max_ms > 0 else 120000)
    expected, passed, backoff_ms = 1000.0, True, []
    for k in range(1, len(times)):
        b = math.floor((times[k] - times[k - 1]) * 1000.0)
        backoff_ms.append(int(b))
        if not expected * (1 - 0.2) - 100 <= float(b) <= expected * (1 + 0.2) + 100:
            passed = False
        expected = min(expected * 1.6, cap)
    return {"passed": passed, "backoff_ms": backoff_ms}


class Service:
    def __init__(self):
        self.lock = threading.Lock()
        self.running = False
        self.max_ms = 0
        self.times = []

    def start(self, max_ms, _context):
        with self.lock:
            self.running, self.max_ms, self.times = True, max_ms, []
        return b""

    def stop(self, _request, _context):
        with self.lock:
            info = verify(self.times, self.max_ms)
            self.running, self.times = False, []
        print(json.dumps({"stop": info}, sort_keys=True), flush=True)
        return info

    def accepted(self, t):
        with self.lock:
            if self.running:
                self.times.append(t)


def serve_retry(listener, svc, done):
    while not done.is_set():
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        svc.accepted(time.time())
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--control_port", type=int, default=0)
    ap.add_argument("--retry_port", type=int, default=0)
    ap.add_argument("--host", default="127.0.0.1")
    args = ap.parse_args()

    svc = Service()
    handler = grpc.method_handlers_generic_handler(SERVICE, {
        "Start": grpc.unary_unary_rpc_method_handler(
            svc.start, request_deserializer=decode_reconnect_params,
            response_serializer=wire.encode_empty),
        "Stop": grpc.unary_unary_rpc_method_handler(
            svc.stop, request_deserializer=lambda b: b,
            response_serializer=encode_reconnect_info),
    })
    server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    control_port = server.add_insecure_port("%s:%d" % (args.host, args.control_port))
    if control_port == 0:
        print(json.dumps({"error": "control port %d: cannot listen" % args.control_port}), flush=True)
        return 2

    listener = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((args.host, args.retry_port))
    listener.listen(128)
    retry_port = listener.getsockname()[1]

    done = threading.Event()
    retry = threading.Thread(target=serve_retry, args=(listener, svc, done), daemon=True)
    retry.start()
    server.start()
    print(json.dumps({"control_port": control_port, "retry_port": retry_port}), flush=True)

    def stop(_sig, _frame):
        done.set()
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while not done.wait(0.1):
        pass
    try:
        listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept
    except OSError:
        pass
    listener.close()
    server.stop(1).wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
