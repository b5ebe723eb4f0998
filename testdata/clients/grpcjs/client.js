#!/usr/bin/env node
// A grpc-js client of the retry port, the Node stack of docs/spec.md §4.2.
//
// It opens a channel to the retry port with the backoff channel options of
// docs/spec.md §4.3 and keeps a wait-for-ready RPC outstanding for
// --duration_s (an RPC that ends early is made again, so the channel always
// has a reason to reconnect), then prints one JSON line:
//
//   {"client":"grpc-js","version":"1.14.7","states":[...],"subchannel":[...],"rpcs":[...],...}
//
// "states" are the channel's connectivity states, "subchannel" the
// subchannel's (read from grpc-js's own "subchannel" trace, so that each
// connection attempt shows as a move to CONNECTING even while the channel
// stays in TRANSIENT_FAILURE), each with its wall-clock time in ms since the
// Unix epoch. With --server_control_port it also runs the interop steps of
// docs/spec.md §1.3: Start before the retry channel, Stop after it, and
// Stop's answer goes into the line ("passed", "backoff_ms").
//
// A port that lets connections succeed and drops them can make a client
// reconnect hundreds of times a second: each list keeps its first
// MAX_EVENTS entries, and "counts" has the totals.
//
// Exit 0 once the line is printed, 2 when Start or Stop failed or a flag is
// wrong (the line then holds "error").
'use strict';

// The trace must be on before grpc-js reads the environment, at require.
if (!process.env.GRPC_NODE_TRACE && !process.env.GRPC_TRACE) {
  process.env.GRPC_NODE_TRACE = 'subchannel';
}
const fs = require('fs');
const net = require('net');
const grpc = require('@grpc/grpc-js');
const grpcVersion = require('@grpc/grpc-js/package.json').version;

const MAX_EVENTS = 1000;

const START = '/grpc.testing.ReconnectService/Start';
const STOP = '/grpc.testing.ReconnectService/Stop';

const FLAGS = {
  server_host: '127.0.0.1',
  server_control_port: '0',
  server_retry_port: '',
  max_reconnect_backoff_ms: '0',
  initial_reconnect_backoff_ms: '0',
  min_reconnect_backoff_ms: '0',
  use_tls: 'true',
  ca_file: '',
  server_host_override: 'foo.test.google.fr',
  duration_s: '540',
  local_address: '',
};

const USAGE = `usage: client.js --server_retry_port=PORT [--server_control_port=PORT]
  [--server_host=127.0.0.1] [--duration_s=540] [--use_tls=true|false]
  [--ca_file=PEM] [--server_host_override=foo.test.google.fr]
  [--max_reconnect_backoff_ms=MS] [--initial_reconnect_backoff_ms=MS]
  [--min_reconnect_backoff_ms=MS (not a grpc-js option: reported as ignored)]
  [--local_address=IP (the source address of the retry port's connections)]
A zero backoff flag leaves grpc-js's default.`;

function parseFlags(argv) {
  const f = Object.assign({}, FLAGS);
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    if (a === '-h' || a === '--help') {
      process.stdout.write(USAGE + '\n');
      process.exit(0);
    }
    if (!a.startsWith('--')) throw new Error(`argument ${a}: not a flag`);
    a = a.slice(2);
    let name = a;
    let value;
    const eq = a.indexOf('=');
    if (eq >= 0) {
      name = a.slice(0, eq);
      value = a.slice(eq + 1);
    } else if (i + 1 < argv.length) {
      value = argv[++i];
    } else {
      throw new Error(`--${name}: needs a value`);
    }
    if (!(name in FLAGS)) throw new Error(`--${name}: unknown flag`);
    f[name] = value;
  }
  const intFlag = (name, min) => {
    const v = Number(f[name]);
    if (!Number.isInteger(v) || v < min) throw new Error(`--${name} ${f[name]}: must be an integer ≥ ${min}`);
    return v;
  };
  const duration = Number(f.duration_s);
  if (!(duration > 0)) throw new Error(`--duration_s ${f.duration_s}: must be positive`);
  if (f.use_tls !== 'true' && f.use_tls !== 'false') throw new Error(`--use_tls ${f.use_tls}: must be true or false`);
  if (f.server_retry_port === '') throw new Error('--server_retry_port: required');
  return {
    host: f.server_host,
    controlPort: intFlag('server_control_port', 0),
    retryPort: intFlag('server_retry_port', 1),
    maxBackoffMS: intFlag('max_reconnect_backoff_ms', 0),
    initialBackoffMS: intFlag('initial_reconnect_backoff_ms', 0),
    minBackoffMS: intFlag('min_reconnect_backoff_ms', 0),
    useTLS: f.use_tls === 'true',
    caFile: f.ca_file,
    hostOverride: f.server_host_override,
    durationMS: duration * 1000,
    localAddress: f.local_address,
  };
}

// bindRetryConnections makes the retry port's connections come from
// cfg.localAddress. grpc-js has no option for a connection's source
// address, and on Linux every connection to 127.0.0.0/8 comes from
// 127.0.0.1 unless bound, so clients that share a host would be one peer
// to a capture (docs/spec.md §5.3). grpc-js opens each connection with
// net.connect(address, callback), address {host, port}: only those calls
// to the retry port get the local address.
function bindRetryConnections(cfg) {
  const connect = net.connect;
  net.connect = function (options, ...rest) {
    if (options && typeof options === 'object' && Number(options.port) === cfg.retryPort && !options.localAddress) {
      options = Object.assign({}, options, { localAddress: cfg.localAddress });
    }
    return connect.call(this, options, ...rest);
  };
}

// Wire encoding of docs/spec.md §2.1, by hand: proto3 varints.
function encodeVarint(v) {
  let n = BigInt.asUintN(64, BigInt(v)); // a negative int32 takes ten bytes
  const out = [];
  do {
    let b = Number(n & 0x7fn);
    n >>= 7n;
    if (n) b |= 0x80;
    out.push(b);
  } while (n);
  return Buffer.from(out);
}

function decodeVarint(buf, i) {
  let v = 0n;
  let shift = 0n;
  for (;;) {
    if (i >= buf.length || shift >= 70n) throw new Error('truncated or overlong varint');
    const b = buf[i++];
    v |= BigInt(b & 0x7f) << shift;
    shift += 7n;
    if (!(b & 0x80)) return [v, i];
  }
}

function encodeReconnectParams(maxBackoffMS) {
  if (maxBackoffMS === 0) return Buffer.alloc(0);
  return Buffer.concat([Buffer.from([0x08]), encodeVarint(maxBackoffMS)]);
}

function decodeReconnectInfo(buf) {
  let passed = false;
  const backoffMS = [];
  const int32 = (v) => Number(BigInt.asIntN(32, v));
  let i = 0;
  while (i < buf.length) {
    let key;
    [key, i] = decodeVarint(buf, i);
    const field = Number(key >> 3n);
    const wire = Number(key & 7n);
    if (wire === 0) {
      let v;
      [v, i] = decodeVarint(buf, i);
      if (field === 1) passed = v !== 0n;
      else if (field === 2) backoffMS.push(int32(v));
    } else if (wire === 2) {
      let n;
      [n, i] = decodeVarint(buf, i);
      const end = i + Number(n);
      if (end > buf.length) throw new Error(`truncated field ${field}`);
      if (field === 2) { // packed, the proto3 default
        let j = i;
        while (j < end) {
          let v;
          [v, j] = decodeVarint(buf, j);
          backoffMS.push(int32(v));
        }
      }
      i = end;
    } else if (wire === 1) {
      i += 8;
    } else if (wire === 5) {
      i += 4;
    } else {
      throw new Error(`wire type ${wire} of field ${field}`);
    }
  }
  return { passed, backoff_ms: backoffMS };
}

const raw = (b) => b;

function unary(client, method, req, deadline, waitForReady, decode) {
  return new Promise((resolve) => {
    const md = new grpc.Metadata(waitForReady ? { waitForReady: true } : {});
    client.makeUnaryRequest(method, raw, raw, req, md, { deadline }, (err, res) => {
      if (err) resolve({ err });
      else resolve({ res: decode(res) });
    });
  });
}

function hostPort(host, port) {
  return (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host) + ':' + port;
}

function codeName(code) {
  return Object.keys(grpc.status).find((k) => grpc.status[k] === code) || String(code);
}

// subchannelLine reads one line of grpc-js's "subchannel" trace, e.g.
// "... | subchannel | (2) 127.0.0.1:4001 CONNECTING -> TRANSIENT_FAILURE with error "...""
const subchannelLine = /\| subchannel \| \(\d+\) (\S+) ([A-Z_]+) -> ([A-Z_]+)(?: with error "(.*)")?$/;

async function main() {
  let cfg;
  try {
    cfg = parseFlags(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(USAGE + '\n');
    return [2, { client: 'grpc-js', error: e.message }];
  }

  const counts = { subchannel: 0, states: 0, rpcs: 0, rpc_status: {} };
  const keep = (list, what, e) => {
    counts[what]++;
    if (list.length < MAX_EVENTS) list.push(e);
  };
  const subchannel = [];
  grpc.setLogVerbosity(grpc.logVerbosity.DEBUG);
  grpc.setLogger({
    error: (...args) => {
      const line = args.join(' ');
      const m = subchannelLine.exec(line);
      if (m) {
        // The control channel's subchannel is traced too; only the retry
        // port's attempts are kept.
        if (!m[1].endsWith(':' + cfg.retryPort)) return;
        const e = { state: m[3], unix_ms: Date.now() };
        if (m[4] !== undefined) e.error = m[4];
        keep(subchannel, 'subchannel', e);
      } else if (!line.includes(' | subchannel | ')) {
        process.stderr.write(line + '\n');
      }
    },
  });

  const out = {
    client: 'grpc-js',
    version: grpcVersion,
    runtime: 'node ' + process.version,
    retry_target: hostPort(cfg.host, cfg.retryPort),
    tls: cfg.useTLS,
  };
  if (cfg.localAddress !== '') {
    bindRetryConnections(cfg);
    out.local_address = cfg.localAddress;
  }
  const params = encodeReconnectParams(cfg.maxBackoffMS);
  const fail = (what, err) => {
    const grpcCode = typeof err.code === 'number' ? codeName(err.code) + ': ' : '';
    out.error = `${what}: ${grpcCode}${err.details || err.message}`;
    return [2, out];
  };

  let control = null;
  if (cfg.controlPort > 0) {
    const target = hostPort(cfg.host, cfg.controlPort);
    control = new grpc.Client(target, grpc.credentials.createInsecure());
    const r = await unary(control, START, params, Date.now() + cfg.durationMS, false, () => ({}));
    if (r.err) {
      control.close();
      return fail(`start on control port ${target}`, r.err);
    }
  }

  const options = {};
  if (cfg.initialBackoffMS > 0) options['grpc.initial_reconnect_backoff_ms'] = cfg.initialBackoffMS;
  if (cfg.maxBackoffMS > 0) options['grpc.max_reconnect_backoff_ms'] = cfg.maxBackoffMS;
  let creds = grpc.credentials.createInsecure();
  if (cfg.useTLS) {
    let ca = null;
    if (cfg.caFile !== '') {
      try {
        ca = fs.readFileSync(cfg.caFile);
      } catch (e) {
        return fail(`--ca_file ${cfg.caFile}`, e);
      }
    }
    creds = grpc.credentials.createSsl(ca);
    if (cfg.hostOverride !== '') options['grpc.ssl_target_name_override'] = cfg.hostOverride;
  }
  out.options = options;
  // grpc-js has no minimum connect timeout: an attempt ends only when the
  // connection fails (docs/spec.md §4.3 names the C-core option).
  if (cfg.minBackoffMS > 0) out.ignored = { 'grpc.min_reconnect_backoff_ms': cfg.minBackoffMS };

  const began = Date.now();
  const end = began + cfg.durationMS;
  out.started_unix_ms = began;
  const retry = new grpc.Client(out.retry_target, creds, options);
  const channel = retry.getChannel();
  const states = [];
  let watching = true;
  const watch = (last) => {
    if (!watching) return;
    channel.watchConnectivityState(last, end + 1000, (err) => {
      if (err || !watching) return;
      const s = channel.getConnectivityState(false);
      keep(states, 'states', { state: grpc.connectivityState[s], unix_ms: Date.now() });
      watch(s);
    });
  };
  const first = channel.getConnectivityState(false);
  keep(states, 'states', { state: grpc.connectivityState[first], unix_ms: began });
  watch(first);

  // Any method does (the reference calls Start on the retry port); an RPC
  // that fails before the deadline is made again. An answer ends them: a
  // retry port never gives one.
  const rpcs = [];
  let last = 'NONE';
  while (Date.now() < end) {
    const r = await unary(retry, START, params, end, true, () => ({}));
    const e = { status: r.err ? codeName(r.err.code) : 'OK', unix_ms: Date.now() };
    if (r.err && r.err.code !== grpc.status.DEADLINE_EXCEEDED) e.error = r.err.details;
    keep(rpcs, 'rpcs', e);
    counts.rpc_status[e.status] = (counts.rpc_status[e.status] || 0) + 1;
    last = e.status;
    if (!r.err) break;
  }
  watching = false;
  out.retry_ms = Date.now() - began;
  out.retry_status = last;
  out.rpcs = rpcs;
  out.states = states;
  out.subchannel = subchannel;
  out.counts = counts;
  retry.close();

  if (control !== null) {
    const r = await unary(control, STOP, Buffer.alloc(0), Date.now() + 10000, false, decodeReconnectInfo);
    control.close();
    if (r.err) return fail(`stop on control port ${hostPort(cfg.host, cfg.controlPort)}`, r.err);
    Object.assign(out, r.res);
  }
  return [0, out];
}

// Exit once the line is out, not before (a long line to a pipe is written
// asynchronously), and not later: grpc-js's timers (backoff, watches)
// would keep the process alive a while.
function emit([code, out]) {
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(code));
}

main().then(emit, (e) => emit([2, { client: 'grpc-js', error: String((e && e.stack) || e) }]));
