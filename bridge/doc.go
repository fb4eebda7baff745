// Package bridge serves JSON-RPC 2.0 over HTTP and WebSocket in front of
// gRPC backends. It is the HTTP face and the assembly point: it does not
// read configuration or walk descriptors; it is given a Catalog of methods
// and a gRPC connection (New, Update), and serves them (ServeHTTP).
//
// The packages below it, each with one job, imports pointing down only
// (.ci/run holds the rule):
//
//	bridge            routes, the front door, headers -> Exchange
//	bridge/ws         GET /ws: connections, frames, streams (Sinks)
//	bridge/live       streams of POST / answered live (SSE, NDJSON)
//	bridge/auth       who calls and what they may call: identities (static
//	                  tokens, certificates, JWTs by their claims), a Guard
//	  idp             one identity provider's JWTs: its key set, the checks
//	bridge/observe    metrics and the access log: a Guard, and refusals
//	bridge/dispatch   the engine: a parsed message + an Exchange -> the reply;
//	                  the stream engine (OpenStream, Pump into a Sink, Outbox)
//	bridge/wire       the JSON-RPC wire: Parse, replies, notifications, errors
//	bridge/backend    Invoker (grpc-go | direct), statuses, Conn (a backend's
//	                  addresses, health, outlier detection, and the one
//	                  picker of both paths: grpc-go's balancer too)
//	  internal/unary  the bridge's own HTTP/2 client
//	bridge/h1         serve's front: a lean HTTP/1.1 server for plain POST /
//	                  requests, handing every other connection to net/http
//	bridge/explorer   GET /explorer: the API explorer page (static, embedded)
//	bridge/mcp        /mcp and stdio: the methods as MCP tools (mcp.Engine)
//	bridge/ratelimit  the rate limit's decision (Limiter): Local, per process
//	  redislimit      a Limiter shared by replicas through Redis (GCRA),
//	                  with Local as its fallback; cmd wires it
//
// The files of this package, each with one job: options.go (Options and
// their one defaults pass, the values from config/defaults), server.go
// (New, Update, Handle), http.go (routes, probes, GET /openrpc.json),
// front.go (the front door: its admission steps in order, each with its
// refusal and count; POST / through them, serveRPC; and answer, the part
// of it after the body that MCP shares), lifecycle.go (Drain, then Shutdown: drain, the front
// servers, the WebSockets), live.go (POST / up to package live: the
// form a request offers), origin.go (the Host,
// Origin and CORS rules), challenge.go (the auth types, the Bearer
// challenge), resource.go (the protected resource metadata of RFC 9728,
// which every 401 names), exchange.go (the one place headers become an
// Exchange: metadata, identity, trace context, timeout),
// metadata.go (which headers travel as metadata, and their size),
// deadline.go (the timeout headers), limits.go (the front door's state:
// slots, rate limiters, counts), tally.go (counts per client or
// connection), compress.go (gzip both ways), observe.go (the metrics'
// types), ws.go (GET /ws up to the upgrade, and the ws.Front of its
// frames), mcp_engine.go (/mcp: the mcp.Engine, whose tool calls run
// through answer), readiness.go (the probes' details).
//
// # One unary call over POST /
//
//	http.go      ServeHTTP → origin.go checkOrigin (rules; front.go
//	             refuseOrigin: 403)
//	front.go     front (request id; authenticate: 401) → serveRPC →
//	             readBody (startReading: 429; 413, 408) → answer:
//	             wire.Parse, the body's one look (-32700, -32600) →
//	             exchangeOf (exchange.go fill: metadata, timeout; 400,
//	             431) → enter (429) → admit (rate limit: 429) → run
//	             (capturing the response metadata when response headers
//	             are configured)
//	dispatch     Run → single: prepare (resolve; Guard.Allow: auth;
//	             params → backend.Call) → execute (deadline; Invoker.Invoke)
//	backend      direct: internal/unary writes the frames and reads the reply;
//	             grpc-go: rawCodec passes the wire bytes; Status for failures
//	dispatch     finish (result or error) → settle (MaxResponseBytes;
//	             Guard.Done: observe, metrics and the log line); Run
//	             returns the reply and the call's ResponseMetadata
//	front.go     writeReply: writeCapture (those response headers) → 200
//	             or 204
//
// # One batch
//
// The same walk to dispatch.Run, then batch: every member is prepared once,
// in order; unary members of a direct backend start in Groups that leave in
// one write, the others run on BatchParallelism workers; each finishes and
// settles like a single call against the batch's shared budget, and the
// replies are joined in member order.
//
// # One stream answered live over POST /
//
// The walk of a unary call through answer's admit; then
//
//	live.go      liveOf (a single call with an id whose Accept asks for
//	             text/event-stream or NDJSON) → serveLive
//	bridge/live  Serve: Exchange.Streams is the request's stream;
//	             Front.Run (the engine's) on the handler's goroutine
//	dispatch     Run → single: prepare (guards; Streams.Stream: Live for
//	             a server or bidi stream, the one place a call is live;
//	             params) → execute (deadline: StreamTimeout) → live
//	             (live.go): Opener.Open, OpenStream (stream.go), Pump:
//	             Waiter.Wait for room (Outbox, outbox.go: stream_buffer,
//	             ..._bytes, SLOW_CLIENT after slow_client_timeout), each
//	             response to Sink.Send → finish ({"messages": N} or the
//	             error) → settle (Guard.Done: the log line, at the end)
//	bridge/live  Open started the writer, the stream's one goroutine:
//	             the 200 and its head, each message framed (SSE event,
//	             NDJSON line) and flushed, keepalives while idle, and the
//	             reply last, which Serve gives it; a call answered before
//	             its stream opened comes back to serveLive, written as any
//
// # One WebSocket stream
//
//	http.go      ServeHTTP → front → ws.go serveWS (fill, 431, connection
//	             counts) → ws.Server.Serve (upgrade)
//	ws/conn.go   serve: per frame wire.Parse once, slots → frame.go
//	             dispatch (rpc.stream.* frames in the reader, in order;
//	             others in a goroutine, after ws.Front's in-flight slot and
//	             rate limit) → ws.Front.Run (ws.go)
//	dispatch     Run → prepare → Exchange.Streams.Stream (the frame's:
//	             Detach) → Detacher.Detach
//	ws/stream.go open: dispatch's OpenStream (stream.go; its sender feeds
//	             rpc.stream.send's messages, Next), then recv (Pump into
//	             the stream: rpc.stream.message into its Outbox, then
//	             rpc.stream.end) and pump (writes the Outbox to the socket)
//	ws/control.go answers rpc.stream.send, close and cancel
//	             (Detacher.Control).
//
// # One MCP tool call
//
//	http.go      ServeHTTP → origin.go checkOrigin (403) → serveMCP
//	mcp_engine.go serveMCP: front (authenticate: 401), the body-read slot
//	             (429) → the SDK's handler (bridge/mcp)
//	mcp          tools/call → call.go handler: the JSON-RPC request of the
//	             tool → Engine.Call (or Stream)
//	mcp_engine.go run: the caller serveMCP stored (its front door's
//	             exchange) → answer
//	front.go     answer: wire.Parse → exchangeOf → enter → admit → run, as
//	             for POST /; a refusal comes back as its JSON-RPC error
//	dispatch     Run, as for POST /
//	mcp          call.go result: the reply as the tool's result
//
// # The lifecycle
//
// lifecycle.go: Drain (readiness 503, Connection: close, live streams
// ended), then Shutdown(ctx, fronts...): the front servers stop accepting
// and finish their requests (MCP sessions closed as they stop accepting),
// while the WebSocket connections close as their calls end. cmd's serve
// drains, waits shutdown_delay, then calls Shutdown with its front server.
package bridge
