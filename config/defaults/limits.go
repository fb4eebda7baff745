package defaults

import "time"

// Limits are the bounds of one request and of the backend calls it makes.
// They are declared once, here, for both that take them: bridge.Options
// embeds them (as bridge.Limits) and config.Settings too (as
// config.Limits, the keys max_body_bytes, max_batch_size,
// batch_parallelism, call_timeout, max_call_timeout and
// max_metadata_bytes). A zero field takes the default named beside it, the
// constant of this package of the same name (bridge.Default*).
type Limits struct {
	// MaxBodyBytes bounds a request body; larger ones get HTTP 413.
	// Zero means [MaxBodyBytes].
	MaxBodyBytes int64
	// MaxBatchSize bounds the members of a batch; a larger batch is
	// refused whole. Zero means [MaxBatchSize].
	MaxBatchSize int
	// BatchParallelism bounds how many members of one batch run at once.
	// Zero means [BatchParallelism].
	BatchParallelism int
	// CallTimeout is the deadline of every backend call. Zero means
	// [CallTimeout].
	CallTimeout time.Duration
	// MaxCallTimeout bounds the timeout a client may ask for with
	// bridge.GRPCTimeoutHeader or bridge.TimeoutHeader (Grpc-Timeout,
	// X-Request-Timeout). Zero (or a value below CallTimeout) means
	// CallTimeout: clients may only shorten it.
	MaxCallTimeout time.Duration
	// MaxMetadataBytes bounds the metadata the calls of one request (a
	// POST, or a WebSocket connection's upgrade request) would carry to
	// the backend, counted as HTTP/2 counts a header list (see
	// bridge.MetadataSize); a larger request is refused with HTTP 431
	// before anything is called. Zero means [MaxMetadataBytes].
	MaxMetadataBytes int64
}

// Streaming are the limits of streaming calls and WebSocket connections.
// They are declared once, here, for both that take them: bridge.Options
// embeds them (as bridge.Streaming) and config.Settings holds them (as
// config.Streaming, the keys max_stream_messages to ws_origin_patterns). A
// zero field takes the default named beside it, the constant of this
// package of the same name (bridge.Default*).
//
// WSPingInterval and StreamKeepalive are the two whose zero bridge.Options
// and the settings read apart: the settings' 0s turns them off (their
// defaults are set already), and the command passes it on as negative.
type Streaming struct {
	// MaxStreamMessages bounds the messages of one streamed result over
	// HTTP (and of any streaming call that is answered with one reply);
	// past it the call fails with RESOURCE_EXHAUSTED. Zero means
	// [MaxStreamMessages].
	MaxStreamMessages int
	// MaxStreamBytes bounds the JSON bytes of one streamed result over
	// HTTP, as MaxStreamMessages does. Zero means [MaxStreamBytes].
	MaxStreamBytes int64
	// WSMaxMessageBytes bounds one WebSocket frame from a client; a larger
	// one closes the connection with 1009. Zero means the bound of a
	// request body, Limits.MaxBodyBytes.
	WSMaxMessageBytes int64
	// StreamBuffer bounds the messages of one WebSocket stream that wait
	// to be written to the socket, and those sent with rpc.stream.send that
	// wait for the backend. Zero means [StreamBuffer].
	StreamBuffer int
	// StreamBufferBytes bounds the bytes of those messages as StreamBuffer
	// bounds their number, each way: a stream reads its next message from
	// the backend only while fewer wait for the socket, and a message sent
	// with rpc.stream.send that would take it past them is refused, unless
	// none waits. Zero means [StreamBufferBytes].
	StreamBufferBytes int64
	// WSBufferBytes bounds the bytes of the messages of all the streams of
	// one WebSocket connection as StreamBufferBytes bounds one stream's,
	// and the replies to its frames waiting to be written: a reply that
	// would take those past it, when others wait, is dropped and its
	// calls answered RESOURCE_EXHAUSTED (SLOW_CLIENT). Zero means
	// [WSBufferBytes].
	WSBufferBytes int64
	// SlowClientTimeout is how long a stream whose buffer, or whose
	// connection's (StreamBuffer, StreamBufferBytes, WSBufferBytes), is
	// full waits for the client to read before the stream is cancelled
	// with RESOURCE_EXHAUSTED. Zero means [SlowClientTimeout].
	SlowClientTimeout time.Duration
	// MaxStreamsPerConnection bounds the open streams of one WebSocket
	// connection. Zero means [MaxStreamsPerConnection].
	MaxStreamsPerConnection int
	// MaxCallsPerConnection bounds the calls of one WebSocket connection
	// being answered at once, each member of a batch counting one (a
	// batch larger than the bound counts as the bound); past it the
	// bridge stops reading the connection until calls are done. Zero
	// means [MaxCallsPerConnection].
	MaxCallsPerConnection int
	// WSPingInterval is how often the bridge pings an idle WebSocket
	// client; a pong, or the write of a frame, that takes longer closes
	// the connection. Zero means [WSPingInterval]; negative turns pings
	// and write timeouts off (in the settings, 0s does).
	WSPingInterval time.Duration
	// StreamKeepalive is how long a stream answered live over POST /
	// (Accept: text/event-stream or NDJSON; see docs/streaming.md) may
	// send nothing before the bridge sends a keepalive: an SSE comment, or
	// an empty NDJSON line, so that idle proxies keep the connection.
	// Zero means [StreamKeepalive]; negative turns keepalives off (in the
	// settings, 0s does).
	StreamKeepalive time.Duration
	// StreamTimeout is the deadline of a stream answered live over POST /
	// when the request asks for none (Grpc-Timeout, X-Request-Timeout;
	// these may then ask for up to the larger of it and
	// Limits.MaxCallTimeout). Zero means the call's deadline,
	// Limits.CallTimeout.
	StreamTimeout time.Duration
	// WSOriginPatterns is the older name of bridge.Options.CORSOrigins
	// (the key cors_origins): its entries join that list. An entry without
	// a scheme ("*.example.org", the form
	// websocket.AcceptOptions.OriginPatterns takes) matches the host[:port]
	// of an origin of any scheme.
	WSOriginPatterns []string
}
