package bridge

import (
	"context"
	"log/slog"
	"net/http"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/live"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/observe"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ws"
)

// Server answers JSON-RPC 2.0 requests by calling a gRPC backend. It is an
// http.Handler; its zero value is not usable, call New.
type Server struct {
	// gzipRPC and gzipDocument serve POST / and GET /openrpc.json with
	// replies compressed for the clients that ask (compress.go).
	gzipRPC, gzipDocument http.Handler

	engine *dispatch.Engine
	opts   Options
	log    *slog.Logger
	md     metadataRules
	ws     *ws.Server // GET /ws
	guard  *guard     // in-flight count, rate limiters, draining
	// observer records calls (as a Guard of the engine) and refusals.
	observer observe.Observer
	// origins are the Host and Origin checks and the CORS answers.
	origins *originRules
	mcp     mcpState    // the MCP server, made on first use (mcp_engine.go)
	lives   live.Server // the streams answered live over POST / (live.go), which Drain ends
}

// A Catalog is one discovered snapshot of the backend's methods; a
// Router one whose methods live on several backends (see package
// dispatch).
type (
	Catalog = dispatch.Catalog
	Router  = dispatch.Router
)

// New returns a Server that calls the backend through conn. It answers
// calls with code 14 (UNAVAILABLE) until Update gives it a Catalog. conn
// may be nil when every Catalog routes its methods (see Router).
func New(conn grpc.ClientConnInterface, opts Options) *Server {
	opts = opts.withDefaults()
	s := &Server{opts: opts, log: opts.Logger, md: newMetadataRules(opts.Metadata), guard: newGuard(opts)}
	var guards []dispatch.Binder
	if opts.Auth != nil {
		guards = append(guards, auth.Binder{Auth: opts.Auth,
			Render: func(c dispatch.Catalog) []byte { return s.engine.RenderDocument(c) }})
	}
	if s.observer = (observe.Observer{Metrics: opts.Metrics, Log: opts.AccessLog}); s.observer.On() {
		guards = append(guards, s.observer)
	}
	s.engine = dispatch.New(conn, dispatch.Options{
		BatchParallelism:  opts.BatchParallelism,
		CallTimeout:       opts.CallTimeout,
		MaxCallTimeout:    opts.MaxCallTimeout,
		StreamTimeout:     opts.StreamTimeout,
		MaxResponseBytes:  opts.MaxResponseBytes,
		MaxStreamMessages: opts.MaxStreamMessages,
		MaxStreamBytes:    opts.MaxStreamBytes,
		EmitUnpopulated:   opts.EmitUnpopulated,
		Document:          opts.Document,
		Logger:            opts.Logger,
		Guards:            guards,
	})
	s.ws = ws.New(ws.Options{
		MaxBatchSize:            opts.MaxBatchSize,
		MaxMessageBytes:         opts.WSMaxMessageBytes,
		MaxCallsPerConnection:   opts.MaxCallsPerConnection,
		MaxStreamsPerConnection: opts.MaxStreamsPerConnection,
		StreamBuffer:            opts.StreamBuffer,
		StreamBufferBytes:       opts.StreamBufferBytes,
		WSBufferBytes:           opts.WSBufferBytes,
		SlowClientTimeout:       opts.SlowClientTimeout,
		PingInterval:            opts.WSPingInterval,
		Logger:                  opts.Logger,
	}, wsFront{s}, s.engine)
	s.lives.Init(live.Options{
		StreamBuffer:      opts.StreamBuffer,
		StreamBufferBytes: opts.StreamBufferBytes,
		SlowClientTimeout: opts.SlowClientTimeout,
		Keepalive:         max(opts.StreamKeepalive, 0), // negative: none
		ReplyTimeout:      opts.ReplyTimeout,
		Logger:            opts.Logger,
	}, liveFront{s}) // past admit, a live call needs the engine alone
	s.origins = newOriginRules(opts)
	s.compressible()
	return s
}

// Update prepares every method of c for calls and then swaps it in at
// once: calls that started before keep the table they started with.
func (s *Server) Update(c Catalog) {
	s.engine.Update(c)
	s.mcpUpdated(c)
}

// Ready reports whether the backend's methods have been discovered.
func (s *Server) Ready() bool { return s.engine.Table() != nil }

// Handle answers one JSON-RPC message (a request or a batch) that came
// through no front door: no identity (with authentication on, it may call
// nothing), no limits of the front door; the outgoing metadata of ctx go
// to the backend. It appends the reply to dst and returns it; a result of
// the same length as dst means there is nothing to reply.
func (s *Server) Handle(ctx context.Context, body, dst []byte) []byte {
	var msg wire.Message
	if e := wire.Parse(body, s.opts.MaxBatchSize, &msg); e != nil {
		return wire.AppendError(dst, wire.NullID, e)
	}
	x := &noExchange // read only: Run does not change an Exchange
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		x = &dispatch.Exchange{Metadata: md}
	}
	reply, _ := s.run(ctx, &msg, x, dst, false)
	return reply
}

// noExchange is the Exchange of the messages of Handle that carry no
// metadata.
var noExchange dispatch.Exchange

// run runs msg, which the caller's rate limit admitted, with x; with
// capture, a single call's reply comes with the backend's response
// metadata (dispatch.Engine.Run).
func (s *Server) run(ctx context.Context, msg *wire.Message, x *dispatch.Exchange, dst []byte, capture bool) ([]byte, dispatch.ResponseMetadata) {
	if msg.Batch {
		s.opts.Metrics.Batch(msg.Len())
	}
	return s.engine.Run(ctx, msg, x, dst, capture)
}

// BackendDialOptions are options for grpc.NewClient of the connection to
// a backend of a Server made with opts: a fixed flow-control window per
// stream of StreamBufferBytes, at most 1 MiB (and at least 64 KiB,
// grpc-go's least), instead of grpc-go's dynamic one, which may grow to
// 16 MiB. A WebSocket stream the bridge stops reading for want of room
// (see package ws) then holds at most that much more in the transport
// before the backend is held back. The connection's window, which grpc-go
// does not tie to reading, is 16 MiB.
func BackendDialOptions(opts Options) []grpc.DialOption {
	opts = opts.withDefaults()
	w := int32(min(max(opts.StreamBufferBytes, 64<<10), 1<<20))
	return []grpc.DialOption{grpc.WithInitialWindowSize(w), grpc.WithInitialConnWindowSize(16 << 20)}
}

// liveFront is the engine as package live runs it: a call answered
// before its stream opens is written as any of POST /, with the
// backend's response headers (live.Front).
type liveFront struct{ s *Server }

func (f liveFront) Run(ctx context.Context, msg *wire.Message, x *dispatch.Exchange, dst []byte) ([]byte, dispatch.ResponseMetadata) {
	return f.s.engine.Run(ctx, msg, x, dst, f.s.md.capture())
}
