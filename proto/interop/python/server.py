#!/usr/bin/python3
"""A grpcio (gRPC C-core) server of test.v1.TestService, with server reflection.

For the bridge's interop tests (bridge/interop). It behaves as the Go
implementation, proto/testpb/v1/server.go, and in addition echoes the request
metadata of every unary call: each key beginning with "x-" comes back as
header metadata "h-<key>" and trailer metadata "t-<key>", with the same values;
header "interop-peer" is the client's address and port.

It needs Debian's python3-grpcio and python3-grpc-tools (run it with
/usr/bin/python3). The protoc inside Debian's grpc_tools (1.14) predates
proto3 `optional`, which test.proto uses, so the test service's
descriptors come from the descriptor set proto/testpb/test.protoset (made
by proto/gen.sh from test.proto): they are added to the default descriptor
pool and the service is served with generic handlers. At start-up
grpc_tools.protoc compiles the google.rpc status messages and the
reflection protocol (proto/interop/protos) into a temporary directory and
the generated code is imported. grpcio-reflection is not packaged by
Debian, so grpc.reflection.v1 and v1alpha ServerReflection are implemented
here, from the descriptor pool: list_services, file_by_filename,
file_containing_symbol, file_containing_extension and
all_extension_numbers_of_type; every file is sent with its transitive
dependencies.

Options, as flags or environment variables (a flag wins):
  --host H                        INTEROP_HOST                        127.0.0.1
  --port N                        INTEROP_PORT                        0 (a free port)
  --compression gzip|none         INTEROP_COMPRESSION                 none
  --max-concurrent-streams N      INTEROP_MAX_CONCURRENT_STREAMS      0 (no limit)
  --max-connection-age-ms N       INTEROP_MAX_CONNECTION_AGE_MS       0 (no limit)
  --max-connection-age-grace-ms N INTEROP_MAX_CONNECTION_AGE_GRACE_MS 0 (no limit)
  --keepalive-time-ms N           INTEROP_KEEPALIVE_TIME_MS           0 (C-core's default)
  --keepalive-timeout-ms N        INTEROP_KEEPALIVE_TIMEOUT_MS        0 (C-core's default)
  --max-message-bytes N           INTEROP_MAX_MESSAGE_BYTES           16777216
  --max-metadata-bytes N          INTEROP_MAX_METADATA_BYTES          65536 (C-core's default: 8192)
  --reflection on|off             INTEROP_REFLECTION                  on
  --protoset FILE                 INTEROP_PROTOSET                    ../../testpb/test.protoset
Once it listens it prints "listening HOST:PORT" on standard output. SIGTERM
and SIGINT shut it down gracefully (calls in flight get 5 seconds to
finish), then it exits 0.
"""

import argparse
import importlib
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from concurrent import futures

import grpc
from grpc_tools import protoc

HERE = os.path.dirname(os.path.abspath(__file__))
INTEROP = os.path.dirname(HERE)

OPTIONS = [
    # flag, default, type
    ("host", "127.0.0.1", str),
    ("port", 0, int),
    ("compression", "none", str),
    ("max-concurrent-streams", 0, int),
    ("max-connection-age-ms", 0, int),
    ("max-connection-age-grace-ms", 0, int),
    ("keepalive-time-ms", 0, int),
    ("keepalive-timeout-ms", 0, int),
    ("max-message-bytes", 16 << 20, int),
    ("max-metadata-bytes", 64 << 10, int),
    ("reflection", "on", str),
    ("protoset", os.path.join(os.path.dirname(INTEROP), "testpb", "test.protoset"), str),
]


def parse_options(argv):
    p = argparse.ArgumentParser(description="grpcio server of test.v1.TestService for the bridge's interop tests")
    for flag, default, typ in OPTIONS:
        env = os.environ.get("INTEROP_" + flag.upper().replace("-", "_"), "")
        p.add_argument("--" + flag, type=typ, default=typ(env) if env != "" else default)
    opts = p.parse_args(argv)
    if opts.compression not in ("gzip", "none"):
        p.error("--compression must be gzip or none")
    if opts.reflection not in ("on", "off"):
        p.error("--reflection must be on or off")
    return opts


def compile_protos(out):
    """Generates the Python code of the interop protos into out and imports it."""
    wkt = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    protos = os.path.join(INTEROP, "protos")
    jobs = [
        # include path, files: the reflection protocol is compiled from
        # protos/grpc so that its modules (reflection.v1...) do not clash
        # with the grpc package.
        ([protos], ["google/rpc/status.proto", "google/rpc/error_details.proto"]),
        ([os.path.join(protos, "grpc")], ["reflection/v1/reflection.proto", "reflection/v1alpha/reflection.proto"]),
    ]
    for includes, files in jobs:
        args = ["protoc"] + ["-I" + d for d in includes + [wkt]]
        args += ["--python_out=" + out, "--grpc_python_out=" + out] + files
        if protoc.main(args) != 0:
            sys.exit("server.py: protoc failed: " + " ".join(args))
    sys.path.insert(0, out)
    mods = {}
    for name in ["google.rpc.status_pb2", "google.rpc.error_details_pb2",
                 "reflection.v1.reflection_pb2", "reflection.v1.reflection_pb2_grpc",
                 "reflection.v1alpha.reflection_pb2", "reflection.v1alpha.reflection_pb2_grpc"]:
        mods[name] = importlib.import_module(name)
    return mods


def load_protoset(path):
    """Adds the files of the descriptor set at path to the default pool."""
    from google.protobuf import descriptor_pb2, descriptor_pool
    with open(path, "rb") as f:
        fds = descriptor_pb2.FileDescriptorSet.FromString(f.read())
    pool = descriptor_pool.Default()
    for fdp in fds.file:  # dependencies come first, as protoc writes them
        try:
            pool.FindFileByName(fdp.name)  # a well-known type the runtime has
        except KeyError:
            pool.Add(fdp)
    return pool


class Messages:
    """The message classes of the test service, by short name."""

    def __init__(self, pool):
        from google.protobuf import message_factory
        factory = message_factory.MessageFactory(pool)
        get = getattr(message_factory, "GetMessageClass", None) or factory.GetPrototype
        for name in ["AllTypes", "FailRequest", "CustomDetail", "SleepRequest", "CountRequest", "CountReply",
                     "StreamRequest", "StreamReply", "StreamItem", "StreamSummary"]:
            setattr(self, name, get(pool.FindMessageTypeByName("test.v1." + name)))
        self.Empty = get(pool.FindMessageTypeByName("google.protobuf.Empty"))
        self.pool = pool


def generic_handler(service_desc, messages, impl):
    """A grpc generic handler serving service_desc's methods with impl's."""
    from google.protobuf import descriptor_pb2
    handlers = {}
    for m in service_desc.methods:
        req = getattr(messages, m.input_type.name) if m.input_type.full_name != "google.protobuf.Empty" else messages.Empty
        mp = descriptor_pb2.MethodDescriptorProto()
        m.CopyToProto(mp)
        kind = {
            (False, False): grpc.unary_unary_rpc_method_handler,
            (False, True): grpc.unary_stream_rpc_method_handler,
            (True, False): grpc.stream_unary_rpc_method_handler,
            (True, True): grpc.stream_stream_rpc_method_handler,
        }[(mp.client_streaming, mp.server_streaming)]
        handlers[m.name] = kind(getattr(impl, m.name), request_deserializer=req.FromString,
                                response_serializer=lambda msg: msg.SerializeToString())
    return grpc.method_handlers_generic_handler(service_desc.full_name, handlers)


def status_code(n):
    for c in grpc.StatusCode:
        if c.value[0] == n:
            return c
    return grpc.StatusCode.UNKNOWN


def echo_metadata(context):
    """Sends h-<key> headers for the request's x- keys, and interop-peer, the
    client's address (which tells the connections apart); returns the t-<key>
    trailers."""
    header, trailer = [("interop-peer", context.peer())], []
    for key, value in context.invocation_metadata():
        if key.startswith("x-"):
            header.append(("h-" + key, value))
            trailer.append(("t-" + key, value))
    context.send_initial_metadata(tuple(header))
    return trailer


class TestService:
    def __init__(self, mods, messages):
        self.pb = messages
        self.status_pb2 = mods["google.rpc.status_pb2"]
        self.details_pb2 = mods["google.rpc.error_details_pb2"]
        from google.protobuf import any_pb2
        self.any_pb2 = any_pb2
        self.lock = threading.Lock()
        self.counts = {}

    def _fail(self, context, trailer, code, message, details=()):
        md = list(trailer)
        if details:
            st = self.status_pb2.Status(code=code, message=message, details=details)
            md.append(("grpc-status-details-bin", st.SerializeToString()))
        context.set_trailing_metadata(tuple(md))
        context.abort(status_code(code), message)

    def _detail(self, name):
        a = self.any_pb2.Any()
        if name == "error_info":
            a.Pack(self.details_pb2.ErrorInfo(reason="TEST", domain="test.v1"))
        elif name == "bad_request":
            a.Pack(self.details_pb2.BadRequest(field_violations=[
                self.details_pb2.BadRequest.FieldViolation(field="f_string", description="bad")]))
        elif name == "custom":
            a.Pack(self.pb.CustomDetail(reason="custom", retry_after_ms=1500))
        elif name == "unknown":
            a.type_url = "type.googleapis.com/nobody.knows.This"
            a.value = b"\x01\x02\x03"
        else:
            return None
        return a

    def Echo(self, request, context):
        context.set_trailing_metadata(tuple(echo_metadata(context)))
        return request

    def Fail(self, request, context):
        trailer = echo_metadata(context)
        if request.code == 0:
            context.set_trailing_metadata(tuple(trailer))
            return self.pb.Empty()
        details = []
        for name in request.details:
            d = self._detail(name)
            if d is None:
                self._fail(context, trailer, grpc.StatusCode.INVALID_ARGUMENT.value[0], 'unknown detail "%s"' % name)
            details.append(d)
        self._fail(context, trailer, request.code, request.message, details)

    def Sleep(self, request, context):
        trailer = echo_metadata(context)
        context.set_trailing_metadata(tuple(trailer))
        d = request.duration
        if d.seconds < 0 or d.nanos < 0 or d.nanos >= 10**9:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "invalid duration")
        want = d.seconds + d.nanos / 1e9
        ended = threading.Event()
        context.add_callback(ended.set)
        left = context.time_remaining()
        if left is not None and left < want:
            if not ended.wait(max(left, 0)):
                context.abort(grpc.StatusCode.DEADLINE_EXCEEDED, "deadline exceeded")
        elif not ended.wait(want):
            return self.pb.Empty()
        context.abort(grpc.StatusCode.CANCELLED, "cancelled")

    def Count(self, request, context):
        context.set_trailing_metadata(tuple(echo_metadata(context)))
        with self.lock:
            n = self.counts.get(request.key, 0) + 1
            self.counts[request.key] = n
        return self.pb.CountReply(count=n)

    def Peek(self, request, context):
        context.set_trailing_metadata(tuple(echo_metadata(context)))
        with self.lock:
            return self.pb.CountReply(count=self.counts.get(request.key, 0))

    def Old(self, request, context):
        return self.pb.Empty()

    def ServerStream(self, request, context):
        payload = "x" * max(request.payload_size, 0)
        for i in range(1, request.count + 1):
            if request.fail_code != 0 and i > request.fail_after:
                break
            yield self.pb.StreamReply(seq=i, payload=payload)
        if request.fail_code != 0:
            context.abort(status_code(request.fail_code), "failed after %d messages" % request.fail_after)
        if request.hold:
            ended = threading.Event()
            context.add_callback(ended.set)
            ended.wait()
            context.abort(grpc.StatusCode.CANCELLED, "cancelled")

    def ClientStream(self, request_iterator, context):
        summary = self.pb.StreamSummary()
        for item in request_iterator:
            if item.fail_code != 0:
                context.abort(status_code(item.fail_code), "item %d failed" % item.seq)
            summary.count += 1
            summary.texts.append(item.text)
        return summary

    def BidiStream(self, request_iterator, context):
        for item in request_iterator:
            if item.fail_code != 0:
                context.abort(status_code(item.fail_code), "item %d failed" % item.seq)
            yield self.pb.StreamItem(seq=item.seq, text=item.text)


class Reflection:
    """grpc.reflection ServerReflection from the default descriptor pool."""

    def __init__(self, pb2, services):
        from google.protobuf import descriptor_pb2, descriptor_pool
        self.pb2 = pb2
        self.services = services
        self.pool = descriptor_pool.Default()
        self.descriptor_pb2 = descriptor_pb2

    def _serialize(self, fd):
        p = self.descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(p)
        return p.SerializeToString()

    def _files(self, fd):
        """fd and its transitive dependencies, fd first."""
        out, seen, todo = [], set(), [fd]
        while todo:
            f = todo.pop(0)
            if f.name in seen:
                continue
            seen.add(f.name)
            out.append(self._serialize(f))
            todo.extend(f.dependencies)
        return self.pb2.FileDescriptorResponse(file_descriptor_proto=out)

    def _answer(self, req):
        pb2 = self.pb2
        resp = pb2.ServerReflectionResponse(valid_host=req.host, original_request=req)
        kind = req.WhichOneof("message_request")
        try:
            if kind == "list_services":
                resp.list_services_response.CopyFrom(pb2.ListServiceResponse(
                    service=[pb2.ServiceResponse(name=s) for s in self.services]))
            elif kind == "file_by_filename":
                resp.file_descriptor_response.CopyFrom(self._files(self.pool.FindFileByName(req.file_by_filename)))
            elif kind == "file_containing_symbol":
                fd = self.pool.FindFileContainingSymbol(req.file_containing_symbol)
                resp.file_descriptor_response.CopyFrom(self._files(fd))
            elif kind == "file_containing_extension":
                msg = self.pool.FindMessageTypeByName(req.file_containing_extension.containing_type)
                ext = self.pool.FindExtensionByNumber(msg, req.file_containing_extension.extension_number)
                resp.file_descriptor_response.CopyFrom(self._files(ext.file))
            elif kind == "all_extension_numbers_of_type":
                msg = self.pool.FindMessageTypeByName(req.all_extension_numbers_of_type)
                resp.all_extension_numbers_response.CopyFrom(pb2.ExtensionNumberResponse(
                    base_type_name=msg.full_name,
                    extension_number=sorted(e.number for e in self.pool.FindAllExtensions(msg))))
            else:
                resp.error_response.CopyFrom(pb2.ErrorResponse(
                    error_code=grpc.StatusCode.UNIMPLEMENTED.value[0], error_message="unknown request"))
        except KeyError as e:
            resp.error_response.CopyFrom(pb2.ErrorResponse(
                error_code=grpc.StatusCode.NOT_FOUND.value[0], error_message="not found: %s" % e))
        return resp

    def ServerReflectionInfo(self, request_iterator, context):
        for req in request_iterator:
            yield self._answer(req)


def main():
    opts = parse_options(sys.argv[1:])
    gen = tempfile.mkdtemp(prefix="interop-python-")
    try:
        mods = compile_protos(gen)
    finally:
        # the generated modules are imported: the files are no longer needed
        shutil.rmtree(gen, ignore_errors=True)

    options = [
        ("grpc.max_receive_message_length", opts.max_message_bytes),
        ("grpc.max_send_message_length", opts.max_message_bytes),
        ("grpc.max_metadata_size", opts.max_metadata_bytes),
    ]
    for flag, key in [("max_concurrent_streams", "grpc.max_concurrent_streams"),
                      ("max_connection_age_ms", "grpc.max_connection_age_ms"),
                      ("max_connection_age_grace_ms", "grpc.max_connection_age_grace_ms"),
                      ("keepalive_time_ms", "grpc.keepalive_time_ms"),
                      ("keepalive_timeout_ms", "grpc.keepalive_timeout_ms")]:
        if getattr(opts, flag) > 0:
            options.append((key, getattr(opts, flag)))
    if opts.keepalive_time_ms > 0:
        options += [("grpc.keepalive_permit_without_calls", 1), ("grpc.http2.max_pings_without_data", 0)]
    compression = grpc.Compression.Gzip if opts.compression == "gzip" else grpc.Compression.NoCompression

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=64), options=options, compression=compression)
    pool = load_protoset(opts.protoset)
    messages = Messages(pool)
    server.add_generic_rpc_handlers((generic_handler(
        pool.FindServiceByName("test.v1.TestService"), messages, TestService(mods, messages)),))
    services = ["test.v1.TestService"]
    if opts.reflection == "on":
        for v in ("v1", "v1alpha"):
            pb2 = mods["reflection.%s.reflection_pb2" % v]
            grpc_mod = mods["reflection.%s.reflection_pb2_grpc" % v]
            services.append("grpc.reflection.%s.ServerReflection" % v)
            grpc_mod.add_ServerReflectionServicer_to_server(Reflection(pb2, services), server)
    host = "[%s]" % opts.host if ":" in opts.host else opts.host
    port = server.add_insecure_port("%s:%d" % (host, opts.port))
    if port == 0:
        sys.exit("server.py: cannot listen on %s:%d" % (host, opts.port))

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    server.start()
    print("listening %s:%d" % (host, port), flush=True)
    while not stop.wait(0.2):
        pass
    server.stop(grace=5).wait()
    # grpcio's threads may linger: leave at once
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
