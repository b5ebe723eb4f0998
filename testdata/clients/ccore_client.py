#!/usr/bin/python3
"""A gRPC C-core client of the retry port, through Debian's python3-grpcio (or any Python with grpcio: the Google Cloud CLI's has 1.71).

It opens a channel to the retry port with the backoff channel arguments of
docs/spec.md §4.3 (grpc.min_reconnect_backoff_ms is C-core's minimum connect
timeout) and keeps a wait-for-ready RPC outstanding for --duration_s (an RPC
that ends early is made again, so the channel always has a reason to
reconnect), then prints one JSON line:

  {"client": "c-core", "version": "1.51.1", "states": [...], "subchannel": [...], "rpcs": [...], ...}

"states" are the channel's connectivity states; "subchannel" holds C-core's
own "subchannel" trace of the retry port: each failed attempt ("connect
failed", with the error and the backoff C-core drew) and each end of a
backoff. Times are wall-clock ms since the Unix epoch, taken when the line
is read. With --server_control_port it also runs the interop steps of
docs/spec.md §1.3: Start before the retry channel, Stop after it, and Stop's
answer goes into the line ("passed", "backoff_ms").

A port that lets connections succeed and drops them can make a client
reconnect hundreds of times a second: each list keeps its first MAX_EVENTS
entries, and "counts" has the totals.

Exit 0 once the line is printed, 2 when Start or Stop failed or a flag is
wrong (the line then holds "error"). Run it with /usr/bin/python3: a python3
earlier on PATH may lack grpc (docs/spec.md §6.1).
"""

import argparse
import json
import os
import re
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "interop"))
import reconnect_client as wire  # noqa: E402  the hand-encoded messages of docs/spec.md §2

MAX_EVENTS = 1000

START = "/grpc.testing.ReconnectService/Start"
STOP = "/grpc.testing.ReconnectService/Stop"

# One line of C-core 1.51's subchannel trace, e.g.
#   I1201 17:03:49.625541935 23318 subchannel.cc:908] subchannel 0x43de0a0
#   {address=ipv4:127.0.0.1:34329, args={...}}: connect failed (...), backing off for 1446 ms
SUBCHANNEL_LINE = re.compile(r"subchannel\.cc:\d+\]\s+subchannel \S+ \{address=(\S+?), .*\}: (.*)$")
CONNECT_FAILED = re.compile(r"^connect failed \((.*)\), backing off for (-?\d+) ms$")
BACKOFF_ELAPSED = "backoff delay elapsed, reporting IDLE"
INFO_LINE = re.compile(r"^I\d{4} ")


class Counted:
    """A list that keeps its first MAX_EVENTS items and counts them all."""

    def __init__(self):
        self.items, self.count = [], 0

    def add(self, item):
        self.count += 1
        if len(self.items) < MAX_EVENTS:
            self.items.append(item)


class TraceReader:
    """Reads C-core's log from file descriptor 2 and keeps the retry port's
    subchannel events; every other line goes on to the real stderr.

    C-core logs with gpr_log to fd 2 and Python offers no hook, so fd 2 is a
    pipe while the client runs; close() puts the real stderr back.
    """

    def __init__(self, retry_port, drop_info):
        self.suffix = ":%d" % retry_port
        # INFO lines are there only because the trace needed INFO: drop them.
        self.drop_info = drop_info
        self.events = Counted()
        self.real = os.dup(2)
        r, w = os.pipe()
        os.dup2(w, 2)
        os.close(w)
        self.thread = threading.Thread(target=self._read, args=(r,), daemon=True)
        self.thread.start()

    def _read(self, r):
        with os.fdopen(r, "rb") as pipe:
            for raw in pipe:
                now = time.time() * 1000
                line = raw.decode("utf-8", "replace").rstrip("\n")
                m = SUBCHANNEL_LINE.search(line)
                if not m:
                    if not (self.drop_info and INFO_LINE.match(line)):
                        os.write(self.real, raw)
                    continue
                if not m.group(1).endswith(self.suffix):
                    continue  # the control channel's subchannel
                what = m.group(2)
                f = CONNECT_FAILED.match(what)
                if f:
                    self.events.add({"event": "connect_failed", "unix_ms": now,
                                     "error": f.group(1), "backoff_ms": int(f.group(2))})
                elif what == BACKOFF_ELAPSED:
                    self.events.add({"event": "backoff_elapsed", "unix_ms": now})

    def close(self):
        sys.stderr.flush()
        os.dup2(self.real, 2)  # the pipe's last writer goes: the reader sees its end
        self.thread.join(timeout=5)
        return self.events


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server_host", default="127.0.0.1",
                    help="127.0.0.1 by default: C-core tries ::1 and 127.0.0.1 for localhost (docs/spec.md §6.2)")
    ap.add_argument("--server_control_port", type=int, default=0,
                    help="when set, Start before and Stop after the retry channel")
    ap.add_argument("--server_retry_port", type=int, required=True)
    ap.add_argument("--max_reconnect_backoff_ms", type=int, default=0,
                    help="grpc.max_reconnect_backoff_ms, also sent in Start (0 = C-core's default)")
    ap.add_argument("--initial_reconnect_backoff_ms", type=int, default=0,
                    help="grpc.initial_reconnect_backoff_ms (0 = C-core's default, 1000)")
    ap.add_argument("--min_reconnect_backoff_ms", type=int, default=0,
                    help="grpc.min_reconnect_backoff_ms, C-core's minimum connect timeout (0 = its default, 20000)")
    ap.add_argument("--use_tls", choices=["true", "false"], default="true")
    ap.add_argument("--ca_file", default="", help="PEM roots for TLS (default: the system's)")
    ap.add_argument("--server_host_override", default="foo.test.google.fr",
                    help="grpc.ssl_target_name_override, the name TLS asks for")
    ap.add_argument("--duration_s", type=float, default=540.0,
                    help="how long a wait-for-ready RPC is kept outstanding on the retry port")
    ap.add_argument("--trace", choices=["true", "false"], default="true",
                    help="read C-core's subchannel trace into \"subchannel\"")
    args = ap.parse_args()
    for name in ("max_reconnect_backoff_ms", "initial_reconnect_backoff_ms", "min_reconnect_backoff_ms", "server_control_port"):
        if getattr(args, name) < 0:
            ap.error("--%s %d: must not be negative" % (name, getattr(args, name)))
    if args.duration_s <= 0:
        ap.error("--duration_s %g: must be positive" % args.duration_s)
    return args


def target(host, port):
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    return "%s:%d" % (host, port)


def main():
    args = parse_args()
    trace = None
    if args.trace == "true":
        # C-core reads these once, when grpc is imported.
        os.environ.setdefault("GRPC_TRACE", "subchannel")
        drop_info = "GRPC_VERBOSITY" not in os.environ
        os.environ.setdefault("GRPC_VERBOSITY", "INFO")
        trace = TraceReader(args.server_retry_port, drop_info)
    import grpc

    out = {
        "client": "c-core",
        "version": grpc.__version__,
        "runtime": "python %d.%d.%d" % sys.version_info[:3],
        "retry_target": target(args.server_host, args.server_retry_port),
        "tls": args.use_tls == "true",
    }

    counts = {}

    def finish(code):
        if trace is not None:
            events = trace.close()
            out["subchannel"] = events.items
            counts["subchannel"] = events.count
        out["counts"] = counts
        print(json.dumps(out, sort_keys=True), flush=True)
        return code

    params = wire.encode_reconnect_params(args.max_reconnect_backoff_ms)
    control = None
    if args.server_control_port > 0:
        control_target = target(args.server_host, args.server_control_port)
        control = grpc.insecure_channel(control_target)
        try:
            control.unary_unary(START, request_serializer=lambda b: b,
                                response_deserializer=wire.decode_empty)(params, timeout=args.duration_s)
        except grpc.RpcError as err:
            control.close()
            out["error"] = "start on control port %s: %s: %s" % (control_target, err.code().name, err.details())
            return finish(2)

    options = []
    for name in ("initial_reconnect_backoff_ms", "max_reconnect_backoff_ms", "min_reconnect_backoff_ms"):
        if getattr(args, name) > 0:
            options.append(("grpc." + name, getattr(args, name)))
    if args.use_tls == "true":
        roots = None
        if args.ca_file:
            try:
                with open(args.ca_file, "rb") as f:
                    roots = f.read()
            except OSError as err:
                out["error"] = "--ca_file: %s" % err
                return finish(2)
        if args.server_host_override:
            options.append(("grpc.ssl_target_name_override", args.server_host_override))
        retry = grpc.secure_channel(out["retry_target"], grpc.ssl_channel_credentials(roots), options)
    else:
        retry = grpc.insecure_channel(out["retry_target"], options)
    out["options"] = dict(options)

    states = Counted()
    began = time.time()
    out["started_unix_ms"] = began * 1000
    retry.subscribe(lambda s: states.add({"state": s.name, "unix_ms": time.time() * 1000}),
                    try_to_connect=False)
    # Any method does (the reference calls Start on the retry port); an RPC
    # that fails before the deadline is made again. An answer ends them: a
    # retry port never gives one.
    call = retry.unary_unary(START, request_serializer=lambda b: b, response_deserializer=wire.decode_empty)
    end = began + args.duration_s
    rpcs = Counted()
    rpc_status = {}
    last = "NONE"
    while True:
        left = end - time.time()
        if left <= 0:
            break
        rpc = {"status": "OK"}
        try:
            call(params, timeout=left, wait_for_ready=True)
        except grpc.RpcError as err:
            rpc["status"] = err.code().name
            if err.code() != grpc.StatusCode.DEADLINE_EXCEEDED:
                rpc["error"] = err.details()
        rpc["unix_ms"] = time.time() * 1000
        rpcs.add(rpc)
        rpc_status[rpc["status"]] = rpc_status.get(rpc["status"], 0) + 1
        last = rpc["status"]
        if last == "OK":
            break
    out["retry_ms"] = round((time.time() - began) * 1000, 3)
    out["retry_status"] = last
    out["rpcs"] = rpcs.items
    retry.close()
    out["states"] = list(states.items)
    counts.update({"states": states.count, "rpcs": rpcs.count, "rpc_status": rpc_status})

    if control is not None:
        try:
            info = control.unary_unary(STOP, request_serializer=wire.encode_empty,
                                       response_deserializer=wire.decode_reconnect_info)(None, timeout=10)
        except grpc.RpcError as err:
            out["error"] = "stop on control port %s: %s: %s" % (control_target, err.code().name, err.details())
            return finish(2)
        finally:
            control.close()
        out.update(info)
    return finish(0)


if __name__ == "__main__":
    sys.exit(main())
