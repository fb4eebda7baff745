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
// The files of this package, each with one job:
//
//	options.go     Options and their one defaults pass (values: config/defaults)
//	server.go      New, Update, Handle; run, the engine's one door (and
//	               liveFront, the engine as package live runs it)
//	http.go        ServeHTTP's routes, the probes, GET /openrpc.json
//	origin.go      the Host, Origin and CORS rules (checkOrigin)
//	front.go       the front door: its admission steps in order, each with
//	               its refusal and count (refuse, refused); steps 1 to 4
//	               (front, authenticate, startReading, readBody); serveRPC
//	answer.go      steps 5 to 7 and the engine (answer: wire.Parse once,
//	               exchangeOf, enter, admit, run), shared by POST / and MCP;
//	               liveOf, the live form a request offers
//	exchange.go    the one place headers become an Exchange (exchangeOf,
//	               fill: metadata, identity, trace context, timeout)
//	metadata.go    which headers travel as metadata, and their size
//	deadline.go    the timeout headers
//	reply.go       the replies' writers: writeReply (and the backend's
//	               response headers, writeCapture), JSON, pooled buffers
//	challenge.go   the auth types, the Bearer challenge of a 401
//	resource.go    the protected resource metadata of RFC 9728
//	limits.go      the front door's state: slots, rate limiters, counts
//	tally.go       counts per client or connection (clientKey)
//	compress.go    gzip both ways
//	live.go        POST / handed to package live (serveLive)
//	ws.go          GET /ws up to the upgrade: its connection slots
//	ws_front.go    the front door of each WebSocket frame (ws.Front)
//	mcp_http.go    /mcp's route: steps 1 to 4, then the SDK's handler
//	mcp_engine.go  the mcp.Engine: a tool call through answer; progress
//	lifecycle.go   Drain, then Shutdown
//	observe.go     the metrics' types
//	readiness.go   the probes' details
//
// # How to read a walk
//
// Each walk below follows one request on its success path, file by file,
// in the order the flow first enters each file, and gives each file one
// line: all the flow does there, calls that return to it included. A
// line may name a function of another file it calls; that file's own
// line says what happens in it (a small helper is only named). A method
// of an interface that a file below calls back (a Sink's Send, a
// Streams' Stream, a Guard's Allow) is on the line of the file that
// implements it. A refusal leaves the walk at the step that refuses;
// front.go lists what each step answers.
//
// # One unary call over POST /
//
//	http.go          ServeHTTP: origin.go's checkOrigin (step 1; 403), then
//	                 the route: front.go's front and serveRPC (a client
//	                 that accepts gzip: through compress.go's handler)
//	front.go         front: the request id, authenticate (step 2, auth's
//	                 Authenticate: 401 with challenge.go's challenge, 503);
//	                 serveRPC: 405 unless POST; readBody (413 by
//	                 Content-Length; tally.go's clientKey and startReading,
//	                 step 3: 429; compress.go's bodyReader; step 4: 413,
//	                 415, 400, 408); answer; once it returns, writeReply
//	answer.go        answer: wire.Parse, the body's one look (one call or a
//	                 batch); exchangeOf (5); enter (6: 429); a parse error
//	                 (-32700, -32600) is answered here, without admit;
//	                 admit (7: the rate limiter, 429); liveOf (no live
//	                 form); server.go's run
//	exchange.go      exchangeOf, fill: the forwarded metadata (metadata.go:
//	                 400, 431), the timeout asked (deadline.go: 400),
//	                 identity, request id, trace context, x-forwarded-for
//	server.go        run: dispatch.Engine.Run
//	dispatch         call.go: Run → single: begin (Guard.Begin); prepare
//	                 (the Table's method; Guard.Allow; params →
//	                 backend.Call through mapping's Codec); execute
//	                 (engine.go's deadline, capped once; Invoker.Invoke);
//	                 finish (the result through mapping, or the error);
//	                 settle (MaxResponseBytes; Guard.Done)
//	auth             guard.go: Allow (may the caller call the method)
//	observe          observer.go: Begin (calls in flight), Done (the
//	                 metrics and the access log line)
//	backend          direct: internal/unary writes the frames and reads the
//	                 reply; grpc-go: rawCodec passes the wire bytes; the
//	                 pool's picker on both; Status for failures
//	reply.go         writeReply: the backend's response headers
//	                 (writeCapture), then 200, or 204 for notifications,
//	                 within ReplyTimeout
//
// # One batch
//
// The same walk to dispatch.Run, then batch (call.go): every member is
// prepared once, in order; unary members of a direct backend start in
// Groups of at most BatchParallelism, in which the calls picked for one
// address leave in one write; the others run on BatchParallelism
// workers; each finishes and settles like a single call against the
// batch's shared budget (budget.go), and the replies are joined in member
// order for reply.go to write.
//
// # One stream answered live over POST /
//
//	http.go          ServeHTTP, as for a unary call
//	front.go         front and serveRPC, as for a unary call, but answer
//	                 comes back with the live form and no reply: serveLive
//	answer.go        answer as for a unary call up to admit; liveOf (a
//	                 single call with an id whose Accept asks for
//	                 text/event-stream, application/x-ndjson or
//	                 application/jsonl: live/form.go's Accept) returns
//	                 before run
//	exchange.go      exchangeOf, fill, as for a unary call
//	live.go          serveLive: the message to package live; a call the
//	                 engine answers before its stream opens comes back to
//	                 serveRPC, which writes it as any (reply.go)
//	live/server.go   Serve: the request's stream is Exchange.Streams;
//	                 Front.Run on the handler's goroutine; the reply, once
//	                 the engine returns, handed to the stream's writer
//	server.go        liveFront.Run: dispatch.Engine.Run, with the response
//	                 headers captured as run does for POST /
//	dispatch         call.go: Run → single → prepare (Streams.Stream)
//	                 → execute (engine.go's deadline: StreamTimeout) →
//	                 live.go's live: Opener.Open, then stream.go's
//	                 OpenStream (grpc-go's NewStream, the requests, the
//	                 half-close) and Pump (Waiter.Wait for room in the
//	                 Outbox, outbox.go: stream_buffer, ..._bytes,
//	                 SLOW_CLIENT after slow_client_timeout; each response
//	                 to Sink.Send) → finish ({"messages": N} or the error)
//	                 → settle (Guard.Done: the log line, at the end)
//	live/stream.go   the stream: Stream (Live for a server or bidi stream:
//	                 the one place a call is live), Open (the writer
//	                 starts, the stream's one goroutine: the 200 and its
//	                 head), Send (into its Outbox), Wait; write: each
//	                 message framed (form.go: SSE event, NDJSON line) and
//	                 flushed, keepalives while idle, the reply last
//
// # One WebSocket stream
//
//	http.go          ServeHTTP: checkOrigin, then front.go's front and
//	                 ws.go's serveWS
//	front.go         front: the request id, authenticate (401, 503)
//	ws.go            serveWS: 405 unless GET, 426 without the upgrade
//	                 headers; exchangeOf (exchange.go: the Exchange of
//	                 every frame; 400, 431), openWS (the connection slots:
//	                 tally.go; 429) → ws.Server.Serve, with auth's Hold
//	exchange.go      exchangeOf, fill, as for POST /
//	ws/conn.go       Serve: shutdown.go's conns.add (503 once shutting
//	                 down), the upgrade, hold (1008 once the credentials no
//	                 longer hold); serve (shutdown.go's keepAlive: pings):
//	                 per frame wire.Parse once, the connection's call slots
//	ws/frame.go      dispatch: rpc.stream.* frames in the reader, in order
//	                 (ws.Front's Admit, Run); others: Enter in the reader,
//	                 then in a goroutine Admit → Run; reply (bounded by
//	                 ws_buffer_bytes), which marks a new stream's reply
//	                 written
//	ws_front.go      wsFront: Enter (answer.go's takeSlot: the in-flight
//	                 slot; a refusal counted), Admit (answer.go's admit:
//	                 the rate limit), Run (server.go's run)
//	dispatch         call.go: Run → single → prepare (Streams.Stream: the
//	                 frame's, Detach) → Detacher.Detach → settle
//	                 (Guard.Done: the stream's opening)
//	ws/stream.go     Stream (Detach), Detach → open: dispatch's OpenStream
//	                 (stream.go; its sender takes rpc.stream.send's
//	                 messages, Next); once frame.go's reply with the
//	                 stream's id is written, recv (Pump into the stream:
//	                 rpc.stream.message into its Outbox, outbox.go, then
//	                 rpc.stream.end) and pump (the Outbox to the socket);
//	                 Control (Detacher's) → control.go
//	ws/control.go    control: rpc.stream.send, close and cancel
//
// # One MCP tool call
//
//	http.go          ServeHTTP: checkOrigin (403), then mcp_http.go's
//	                 serveMCP
//	mcp_http.go      serveMCP: 404 when MCP is off; front.go's front; the
//	                 caller kept for the request's tool calls; for a
//	                 request with a body, startReading (429) and
//	                 body_timeout; mcp_engine.go's MCP (made on first
//	                 use) and its Handler
//	front.go         front (the request id; authenticate: 401, 503),
//	                 startReading
//	mcp_engine.go    MCP: the mcp.Server of the Catalog; then, as the SDK
//	                 calls back its mcp.Engine: Owner (the session's
//	                 caller), Hold, InsufficientScope (403), May (the
//	                 tools it may list and call); Call (or Stream, whose
//	                 messages go to mcpProgress) → run: the caller
//	                 serveMCP kept, 413 over max_body_bytes, answer.go's
//	                 answer; a refusal becomes its JSON-RPC error (refused)
//	mcp              server.go: Handler (the SDK's Streamable HTTP, which
//	                 reads the body under max_body_bytes; the session
//	                 bound to its caller) → tools/call → call.go's handler:
//	                 the JSON-RPC request of the tool → Engine.Call;
//	                 result: the reply as the tool's result
//	answer.go        answer: wire.Parse → exchangeOf → enter → admit →
//	                 server.go's run, as for POST /
//	exchange.go      exchangeOf, fill, as for POST /
//	server.go        run
//	dispatch         Run, as for POST /
//
// # The lifecycle
//
// lifecycle.go: Drain sets the bridge draining (http.go then answers
// /readyz 503 and closes HTTP/1 connections after their reply) and ends
// the live streams with DRAINING (live/server.go's Drain); then
// Shutdown(ctx, fronts...): the front servers stop accepting
// and finish their requests (MCP sessions closed as they stop accepting),
// while the WebSocket connections close as their calls end. cmd's serve
// drains, waits shutdown_delay, then calls Shutdown with its front server.
package bridge
