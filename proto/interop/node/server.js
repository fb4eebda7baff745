'use strict';
// A grpc-js server of test.v1.TestService (proto/testpb/v1/test.proto) with
// server reflection, for the bridge's interop tests (bridge/interop). It
// behaves as the Go implementation, proto/testpb/v1/server.go, and in
// addition echoes the request metadata of every unary call: each key
// beginning with "x-" comes back as header metadata "h-<key>" and trailer
// metadata "t-<key>", with the same values; header "interop-peer" is the
// client's address and port.
//
// Options, as flags or environment variables (a flag wins):
//   --host H                     INTEROP_HOST                     127.0.0.1
//   --port N                     INTEROP_PORT                     0 (a free port)
//   --compression gzip|none      INTEROP_COMPRESSION              none
//   --max-concurrent-streams N   INTEROP_MAX_CONCURRENT_STREAMS   0 (no limit)
//   --max-connection-age-ms N    INTEROP_MAX_CONNECTION_AGE_MS    0 (no limit)
//   --max-connection-age-grace-ms N INTEROP_MAX_CONNECTION_AGE_GRACE_MS 0 (no limit)
//   --keepalive-time-ms N        INTEROP_KEEPALIVE_TIME_MS        0 (grpc-js's default: none)
//   --keepalive-timeout-ms N     INTEROP_KEEPALIVE_TIMEOUT_MS     0 (grpc-js's default)
//   --max-message-bytes N        INTEROP_MAX_MESSAGE_BYTES        16777216
//   --proto-dir DIR              INTEROP_PROTO_DIR                ../.. (proto/)
// Once it listens it prints "listening HOST:PORT" on standard output. SIGTERM
// and SIGINT shut it down gracefully (calls in flight finish; a second
// signal forces it), then it exits 0.

const path = require('path');
const zlib = require('zlib');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const { ReflectionService } = require('@grpc/reflection');
const protobuf = require('protobufjs');

const defaults = {
  host: '127.0.0.1',
  port: '0',
  compression: 'none',
  'max-concurrent-streams': '0',
  'max-connection-age-ms': '0',
  'max-connection-age-grace-ms': '0',
  'keepalive-time-ms': '0',
  'keepalive-timeout-ms': '0',
  'max-message-bytes': String(16 << 20),
  'proto-dir': path.join(__dirname, '..', '..'),
};

function options(argv, env) {
  const opts = {};
  for (const name of Object.keys(defaults)) {
    const v = env['INTEROP_' + name.toUpperCase().replace(/-/g, '_')];
    opts[name] = v !== undefined && v !== '' ? v : defaults[name];
  }
  for (let i = 0; i < argv.length; i++) {
    let arg = argv[i];
    if (!arg.startsWith('--')) usage(`unexpected argument ${arg}`);
    arg = arg.slice(2);
    let value;
    const eq = arg.indexOf('=');
    if (eq >= 0) {
      value = arg.slice(eq + 1);
      arg = arg.slice(0, eq);
    } else {
      value = argv[++i];
    }
    if (!(arg in defaults) || value === undefined) usage(`bad flag --${arg}`);
    opts[arg] = value;
  }
  for (const name of Object.keys(defaults)) {
    if (name !== 'host' && name !== 'compression' && name !== 'proto-dir' && !/^\d+$/.test(opts[name])) {
      usage(`--${name} must be a whole number, got ${opts[name]}`);
    }
  }
  if (opts.compression !== 'gzip' && opts.compression !== 'none') usage('--compression must be gzip or none');
  return opts;
}

function usage(msg) {
  process.stderr.write(`server.js: ${msg}\n`);
  process.exit(2);
}

const opts = options(process.argv.slice(2), process.env);
const protoDir = path.resolve(opts['proto-dir']);
const loaderOptions = {
  keepCase: true,
  longs: String,
  enums: String,
  bytes: Buffer,
  defaults: false,
  oneofs: true,
  includeDirs: [protoDir, path.join(__dirname, '..', 'protos')],
};
const packageDefinition = protoLoader.loadSync('testpb/v1/test.proto', loaderOptions);
const testv1 = grpc.loadPackageDefinition(packageDefinition).test.v1;

// Status details are encoded with protobufjs: google.rpc.Status and the
// error details, from the copies in proto/interop/protos.
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => {
  for (const dir of loaderOptions.includeDirs) {
    const p = path.join(dir, target);
    if (require('fs').existsSync(p)) return p;
  }
  return target;
};
root.loadSync(['testpb/v1/test.proto', 'google/rpc/status.proto', 'google/rpc/error_details.proto'], { keepCase: true });
const Status = root.lookupType('google.rpc.Status');

function anyOf(typeName, value) {
  const type = root.lookupType(typeName);
  return { type_url: 'type.googleapis.com/' + typeName, value: type.encode(type.fromObject(value)).finish() };
}

function detail(name) {
  switch (name) {
    case 'error_info':
      return anyOf('google.rpc.ErrorInfo', { reason: 'TEST', domain: 'test.v1' });
    case 'bad_request':
      return anyOf('google.rpc.BadRequest', { field_violations: [{ field: 'f_string', description: 'bad' }] });
    case 'custom':
      return anyOf('test.v1.CustomDetail', { reason: 'custom', retry_after_ms: 1500 });
    case 'unknown':
      return { type_url: 'type.googleapis.com/nobody.knows.This', value: Buffer.from([1, 2, 3]) };
    default:
      return null;
  }
}

// echoMetadata sends the header metadata of call: h-<key> for every
// request key beginning with x-, and interop-peer, the client's address
// (which tells the connections apart); it returns the trailer metadata,
// t-<key>.
function echoMetadata(call) {
  const header = new grpc.Metadata();
  const trailer = new grpc.Metadata();
  header.set('interop-peer', call.getPeer());
  const map = call.metadata.getMap();
  for (const key of Object.keys(map)) {
    if (!key.startsWith('x-')) continue;
    for (const v of call.metadata.get(key)) {
      header.add('h-' + key, v);
      trailer.add('t-' + key, v);
    }
  }
  call.sendMetadata(header);
  return trailer;
}

const counts = new Map();

function durationMs(d) {
  if (!d) return 0;
  return Number(d.seconds || 0) * 1000 + (d.nanos || 0) / 1e6;
}

const service = {
  Echo(call, callback) {
    const trailer = echoMetadata(call);
    callback(null, call.request, trailer);
  },
  Fail(call, callback) {
    const trailer = echoMetadata(call);
    const req = call.request;
    const code = req.code || 0;
    if (code === 0) {
      callback(null, {}, trailer);
      return;
    }
    const details = [];
    for (const name of req.details || []) {
      const d = detail(name);
      if (d === null) {
        callback({ code: grpc.status.INVALID_ARGUMENT, details: `unknown detail "${name}"`, metadata: trailer });
        return;
      }
      details.push(d);
    }
    if (details.length > 0) {
      const st = Status.encode(Status.fromObject({ code, message: req.message || '', details })).finish();
      trailer.set('grpc-status-details-bin', Buffer.from(st));
    }
    callback({ code, details: req.message || '', metadata: trailer });
  },
  Sleep(call, callback) {
    const trailer = echoMetadata(call);
    const ms = durationMs(call.request.duration);
    let done = false;
    const finish = (err) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (err) err.metadata = trailer;
      callback(err, err ? undefined : {}, trailer);
    };
    const timer = setTimeout(() => finish(null), ms);
    call.on('cancelled', () => finish({ code: grpc.status.CANCELLED, details: 'cancelled' }));
    const deadline = call.getDeadline();
    const left = deadline instanceof Date ? deadline.getTime() - Date.now() : Number(deadline) - Date.now();
    if (Number.isFinite(left) && left < ms) {
      setTimeout(() => finish({ code: grpc.status.DEADLINE_EXCEEDED, details: 'deadline exceeded' }), Math.max(left, 0));
    }
  },
  Count(call, callback) {
    const trailer = echoMetadata(call);
    const key = call.request.key || '';
    const n = (counts.get(key) || 0) + 1;
    counts.set(key, n);
    callback(null, { count: String(n) }, trailer);
  },
  Peek(call, callback) {
    const trailer = echoMetadata(call);
    callback(null, { count: String(counts.get(call.request.key || '') || 0) }, trailer);
  },
  Old(call, callback) {
    callback(null, {});
  },
  ServerStream(call) {
    const req = call.request;
    const payload = 'x'.repeat(Math.max(req.payload_size || 0, 0));
    const count = req.count || 0;
    const failCode = req.fail_code || 0;
    const failAfter = req.fail_after || 0;
    for (let i = 1; i <= count; i++) {
      if (failCode !== 0 && i > failAfter) break;
      call.write({ seq: i, payload });
    }
    if (failCode !== 0) {
      call.emit('error', { code: failCode, details: `failed after ${failAfter} messages` });
      return;
    }
    if (req.hold) {
      call.on('cancelled', () => {});
      return;
    }
    call.end();
  },
  ClientStream(call, callback) {
    const sum = { count: 0, texts: [] };
    let ended = false;
    call.on('data', (item) => {
      if (ended) return;
      if (item.fail_code) {
        ended = true;
        callback({ code: item.fail_code, details: `item ${item.seq || 0} failed` });
        return;
      }
      sum.count++;
      sum.texts.push(item.text || '');
    });
    call.on('end', () => {
      if (!ended) {
        ended = true;
        callback(null, sum);
      }
    });
  },
  BidiStream(call) {
    let ended = false;
    call.on('data', (item) => {
      if (ended) return;
      if (item.fail_code) {
        ended = true;
        call.emit('error', { code: item.fail_code, details: `item ${item.seq || 0} failed` });
        return;
      }
      call.write({ seq: item.seq || 0, text: item.text || '' });
    });
    call.on('end', () => {
      if (!ended) {
        ended = true;
        call.end();
      }
    });
  },
};

// grpc-js 1.14 cannot compress the messages it sends. With --compression
// gzip the server compresses every response message with gzip and says so
// in grpc-encoding, whatever the client's grpc-accept-encoding lists, as a
// grpc-go server with grpc.RPCCompressor does.
function compressResponses() {
  const { BaseServerInterceptingCall } = require('@grpc/grpc-js/build/src/server-interceptors');
  const proto = BaseServerInterceptingCall.prototype;
  const sendMetadata = proto.sendMetadata;
  proto.sendMetadata = function (metadata) {
    const md = metadata ? metadata.clone() : new grpc.Metadata();
    md.set('grpc-encoding', 'gzip');
    return sendMetadata.call(this, md);
  };
  proto.serializeMessage = function (value) {
    const compressed = zlib.gzipSync(this.handler.serialize(value));
    const output = Buffer.allocUnsafe(compressed.byteLength + 5);
    output.writeUInt8(1, 0);
    output.writeUInt32BE(compressed.byteLength, 1);
    compressed.copy(output, 5);
    return output;
  };
}

function main() {
  const serverOptions = {
    'grpc.max_receive_message_length': Number(opts['max-message-bytes']),
    'grpc.max_send_message_length': Number(opts['max-message-bytes']),
  };
  const numeric = {
    'max-concurrent-streams': 'grpc.max_concurrent_streams',
    'max-connection-age-ms': 'grpc.max_connection_age_ms',
    'max-connection-age-grace-ms': 'grpc.max_connection_age_grace_ms',
    'keepalive-time-ms': 'grpc.keepalive_time_ms',
    'keepalive-timeout-ms': 'grpc.keepalive_timeout_ms',
  };
  for (const [flag, key] of Object.entries(numeric)) {
    const n = Number(opts[flag]);
    if (n > 0) serverOptions[key] = n;
  }
  if (opts.compression === 'gzip') compressResponses();

  const server = new grpc.Server(serverOptions);
  server.addService(testv1.TestService.service, service);
  new ReflectionService(packageDefinition).addToServer(server);
  const addr = opts.host.includes(':') ? `[${opts.host}]:${opts.port}` : `${opts.host}:${opts.port}`;
  server.bindAsync(addr, grpc.ServerCredentials.createInsecure(), (err, port) => {
    if (err) {
      process.stderr.write(`server.js: listen ${addr}: ${err.message}\n`);
      process.exit(1);
    }
    const host = opts.host.includes(':') ? `[${opts.host}]` : opts.host;
    process.stdout.write(`listening ${host}:${port}\n`);
  });

  let stopping = false;
  const stop = () => {
    if (stopping) {
      server.forceShutdown();
      process.exit(0);
    }
    stopping = true;
    server.tryShutdown(() => process.exit(0));
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

main();
