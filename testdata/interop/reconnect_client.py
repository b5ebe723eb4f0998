#!/usr/bin/python3
"""A second, independent reconnect interop client: gRPC C-core via python3-grpcio.

It runs the steps of docs/spec.md §1 against any ReconnectService server
(`audit server` or the C++ reference) and prints one JSON line:

  {"passed": true, "backoff_ms": [1000, 1721, ...], "retry_status": "DEADLINE_EXCEEDED", ...}

Exit 0 when the retry RPC ended in DEADLINE_EXCEEDED and the server said
passed, 1 when not, 2 when nothing could be judged (Start or Stop failed).

Debian's python3-grpcio has no protoc plugin, so the two tiny messages are
encoded by hand (proto3 varints, docs/spec.md §2). Run it with
/usr/bin/python3: a python3 earlier on PATH may lack grpc (docs/spec.md §6).
"""

import argparse
import json
import sys
import time

import grpc

START = "/grpc.testing.ReconnectService/Start"
STOP = "/grpc.testing.ReconnectService/Stop"
SERVER_NAME_OVERRIDE = "foo.test.google.fr"


def encode_varint(v):
    v &= (1 << 64) - 1  # a negative int32 is sign-extended to ten bytes
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def decode_varint(buf, i):
    v, shift = 0, 0
    while True:
        if i >= len(buf) or shift >= 70:
            raise ValueError("truncated or overlong varint")
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def as_int32(v):
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def encode_reconnect_params(max_reconnect_backoff_ms):
    """ReconnectParams{int32 max_reconnect_backoff_ms = 1}; 0 encodes to nothing."""
    if max_reconnect_backoff_ms == 0:
        return b""
    return b"\x08" + encode_varint(max_reconnect_backoff_ms)


def decode_empty(_buf):
    # Not None: grpcio reads a None response as a failed deserialization.
    return {}


def encode_empty(_msg):
    return b""


def decode_reconnect_info(buf):
    """ReconnectInfo{bool passed = 1; repeated int32 backoff_ms = 2}."""
    passed, backoff_ms = False, []
    i = 0
    while i < len(buf):
        key, i = decode_varint(buf, i)
        field, wire = key >> 3, key & 7
        if wire == 0:
            v, i = decode_varint(buf, i)
            if field == 1:
                passed = v != 0
            elif field == 2:
                backoff_ms.append(as_int32(v))
        elif wire == 2:
            n, i = decode_varint(buf, i)
            chunk, i = buf[i:i + n], i + n
            if len(chunk) != n:
                raise ValueError("truncated field %d" % field)
            if field == 2:  # packed, the proto3 default
                j = 0
                while j < len(chunk):
                    v, j = decode_varint(chunk, j)
                    backoff_ms.append(as_int32(v))
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError("wire type %d of field %d" % (wire, field))
    return {"passed": passed, "backoff_ms": backoff_ms}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--server_host", default="127.0.0.1",
                    help="127.0.0.1 by default: C-core tries ::1 and 127.0.0.1 for localhost")
    ap.add_argument("--server_control_port", type=int, required=True)
    ap.add_argument("--server_retry_port", type=int, required=True)
    ap.add_argument("--max_reconnect_backoff_ms", type=int, default=0,
                    help="sent in Start and set as grpc.max_reconnect_backoff_ms (0 = default)")
    ap.add_argument("--initial_reconnect_backoff_ms", type=int, default=0,
                    help="grpc.initial_reconnect_backoff_ms (0 = C-core's default, 1000)")
    ap.add_argument("--deadline_s", type=float, default=540.0,
                    help="deadline of the wait-for-ready RPC on the retry port")
    args = ap.parse_args()

    host = args.server_host
    if ":" in host and not host.startswith("["):
        host = "[%s]" % host
    control_target = "%s:%d" % (host, args.server_control_port)
    retry_target = "%s:%d" % (host, args.server_retry_port)
    params = encode_reconnect_params(args.max_reconnect_backoff_ms)

    def fail(what, err):
        print(json.dumps({"error": "%s %s: %s" % (what, control_target, err)}))
        return 2

    with grpc.insecure_channel(control_target) as control:
        start = control.unary_unary(START, request_serializer=lambda b: b,
                                    response_deserializer=decode_empty)
        stop = control.unary_unary(STOP, request_serializer=encode_empty,
                                   response_deserializer=decode_reconnect_info)
        try:
            start(params, timeout=args.deadline_s)
        except grpc.RpcError as err:
            return fail("start on control port", err.code().name)

        options = [("grpc.ssl_target_name_override", SERVER_NAME_OVERRIDE)]
        if args.max_reconnect_backoff_ms > 0:
            options.append(("grpc.max_reconnect_backoff_ms", args.max_reconnect_backoff_ms))
        if args.initial_reconnect_backoff_ms > 0:
            options.append(("grpc.initial_reconnect_backoff_ms", args.initial_reconnect_backoff_ms))
        began = time.monotonic()
        retry_status = "OK"
        with grpc.secure_channel(retry_target, grpc.ssl_channel_credentials(), options) as retry:
            call = retry.unary_unary(START, request_serializer=lambda b: b,
                                     response_deserializer=decode_empty)
            try:
                call(params, timeout=args.deadline_s, wait_for_ready=True)
            except grpc.RpcError as err:
                retry_status = err.code().name
        took = time.monotonic() - began

        try:
            info = stop(None, timeout=10)
        except grpc.RpcError as err:
            return fail("stop on control port", err.code().name)

    info.update({
        "retry_status": retry_status,
        "retry_seconds": round(took, 3),
        "grpc_version": grpc.__version__,
    })
    print(json.dumps(info, sort_keys=True))
    return 0 if info["passed"] and retry_status == "DEADLINE_EXCEEDED" else 1


if __name__ == "__main__":
    sys.exit(main())
