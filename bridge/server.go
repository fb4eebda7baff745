package bridge

import (
	"context"
	"io"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
)

// Defaults for the zero values of Options.
const (
	DefaultMaxBodyBytes     = 4 << 20
	DefaultMaxBatchSize     = 100
	DefaultBatchParallelism = 16
	DefaultCallTimeout      = 30 * time.Second
)

// Options are the limits and behaviour of a Server, fixed at construction.
// A zero field takes the default named beside it.
type Options struct {
	// MaxBodyBytes bounds a request body; larger ones get HTTP 413.
	// Zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxBatchSize bounds the members of a batch; a larger batch is
	// refused whole. Zero means DefaultMaxBatchSize.
	MaxBatchSize int
	// BatchParallelism bounds how many members of one batch run at once.
	// Zero means DefaultBatchParallelism.
	BatchParallelism int
	// CallTimeout is the deadline of every backend call. Zero means
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// EmitUnpopulated makes results carry fields that hold their zero
	// value. False (the default) leaves them out, as protojson does.
	EmitUnpopulated bool
	// Logger receives the bridge's logs; nil discards them.
	Logger *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.MaxBatchSize <= 0 {
		o.MaxBatchSize = DefaultMaxBatchSize
	}
	if o.BatchParallelism <= 0 {
		o.BatchParallelism = DefaultBatchParallelism
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return o
}

// Server answers JSON-RPC 2.0 requests by calling a gRPC backend. It is an
// http.Handler; its zero value is not usable, call New.
type Server struct {
	conn  grpc.ClientConnInterface
	opts  Options
	log   *slog.Logger
	table atomic.Pointer[table] // nil until the first Update
}

// New returns a Server that calls the backend through conn. It answers
// calls with code 14 (UNAVAILABLE) until Update gives it a Catalog.
func New(conn grpc.ClientConnInterface, opts Options) *Server {
	opts = opts.withDefaults()
	return &Server{conn: conn, opts: opts, log: opts.Logger}
}

// Update prepares every method of c for calls and then swaps it in at
// once: calls that started before keep the table they started with.
func (s *Server) Update(c Catalog) {
	s.table.Store(newTable(c, s.opts))
}

// Ready reports whether the backend's methods have been discovered.
func (s *Server) Ready() bool { return s.table.Load() != nil }

// Handle answers one JSON-RPC message (a request or a batch) read from any
// transport. It appends the reply to dst and returns it; a result of the
// same length as dst means there is nothing to reply.
func (s *Server) Handle(ctx context.Context, body, dst []byte) []byte {
	return s.handle(ctx, s.table.Load(), body, dst)
}
