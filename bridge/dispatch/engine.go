package dispatch

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Options are the engine's share of the bridge's options, every field set
// (package bridge fills in the defaults).
type Options struct {
	BatchParallelism  int           // members of one batch running at once
	CallTimeout       time.Duration // deadline of a call whose Exchange asks for none
	MaxCallTimeout    time.Duration // bound of the timeout an Exchange asks for
	StreamTimeout     time.Duration // deadline of a stream answered live that asks for none; 0: CallTimeout
	MaxResponseBytes  int64         // bound of a single reply, and of a batch's replies together
	MaxStreamMessages int           // bound of the messages of a stream answered in one reply
	MaxStreamBytes    int64         // bound of the JSON bytes of such a stream
	EmitUnpopulated   bool
	Document          mapping.DocumentInfo
	Logger            *slog.Logger
	// Guards are bound to every table Update installs, in order: each
	// call is allowed by all of them, and told to them once done.
	Guards []Binder
}

// An Engine answers JSON-RPC messages by calling gRPC backends. It knows
// no transport: a transport parses a message (wire.Parse), describes
// where it came from in an Exchange, and hands both to Run.
type Engine struct {
	conn  grpc.ClientConnInterface
	opts  Options
	table atomic.Pointer[Table] // nil until the first Update
	bare  []Guard               // the guards bound to no table, for calls before it
}

// New returns an Engine calling through conn (nil when every Catalog is a
// Router that routes every method).
func New(conn grpc.ClientConnInterface, opts Options) *Engine {
	e := &Engine{conn: conn, opts: opts}
	for _, b := range opts.Guards {
		e.bare = append(e.bare, b.Bind(nil))
	}
	return e
}

// Update prepares every method of c for calls and binds the guards to
// them, then swaps the table in at once: calls that started before keep
// the table they started with.
func (e *Engine) Update(c Catalog) { e.table.Store(e.newTable(c)) }

// Table returns the current table, nil before the first Update.
func (e *Engine) Table() *Table { return e.table.Load() }

// An Exchange is what a transport learned about the message it hands to
// Run: who sent it and what its calls carry. Run does not change it.
type Exchange struct {
	RequestID string
	// Caller is the authenticated identity, nil with authentication off
	// or for a message that did not come through a transport's front door.
	Caller Caller
	// Metadata is sent with every backend call: forwarded headers,
	// identity, request id, trace context.
	Metadata metadata.MD
	// Timeout is the deadline the client asked for, uncapped: deadline
	// holds it to Options.MaxCallTimeout (0 means none was asked for).
	Timeout time.Duration
	// Streams is the transport's end of the calls of streaming methods
	// (sink.go): how each is answered and where its messages go; nil
	// answers every stream in one reply (POST / asking for no live form).
	Streams Streams
}

// A Caller is an authenticated identity.
type Caller interface{ Name() string }

// ResponseMetadata is the backend's response metadata of one call: its
// headers and trailers, which Run returns for a single call when asked
// to capture them. The zero value is none (nothing asked, a batch, or a
// call that reached no backend).
type ResponseMetadata struct {
	Header, Trailer metadata.MD
}

// A Record is what the engine tells Guards of one finished call.
type Record struct {
	Name         []byte       // the method name as the client sent it
	Method       *Method      // nil when the name matched none
	Code         mapping.Code // the reply's code: 0 for a result
	Began        time.Time    // zero unless a Guard is a Timer
	Notification bool
	Invalid      bool // the request was not a valid request object
	// Live is true for a stream answered live (Mode Live) once it
	// opened, and Messages counts the messages it sent.
	Live     bool
	Messages int
}

// A Guard is asked before each call runs and told once its reply is
// made. Package bridge's authorisation and its metrics and access log are
// Guards.
type Guard interface {
	// Begin is told of every call, before anything of it runs.
	Begin(x *Exchange)
	// Allow decides whether the call of the method named name (m, nil
	// when the name matched none) may run; an error is its reply instead.
	Allow(x *Exchange, name []byte, m *Method) *mapping.Error
	// Done is told of every call once its reply is made, in the reverse
	// order of Options.Guards.
	Done(ctx context.Context, x *Exchange, rec Record)
}

// A Binder makes the Guard of one table, when Update installs it: state
// per method (allow bits, metric handles) is prepared there. New binds a
// nil table too, for the calls that come before the first Update.
type Binder interface {
	Bind(t *Table) Guard
}

// A Lister is a Guard that hides methods from some callers: rpc.discover
// answers the document it returns, which lists what x's caller may call,
// or its error. Before discovery (t nil) it only checks the caller.
type Lister interface {
	Document(x *Exchange, t *Table) ([]byte, *mapping.Error)
}

// A Timer is a Guard that needs Record.Began: without one, a call does
// not read the clock.
type Timer interface {
	Timed() bool
}

// deadline is the context of a call of x, the one place a call's deadline
// is set: the timeout x asks for, up to MaxCallTimeout, or CallTimeout,
// from when the call starts; a stream answered live (live) may ask for up
// to the larger of MaxCallTimeout and StreamTimeout, and has StreamTimeout
// when it asks for none. The calls of a batch that start together (a
// Group) share it.
func (e *Engine) deadline(ctx context.Context, x *Exchange, live bool) (context.Context, context.CancelFunc) {
	d, limit := e.opts.CallTimeout, e.opts.MaxCallTimeout
	if live {
		limit = max(limit, e.opts.StreamTimeout)
		if e.opts.StreamTimeout > 0 {
			d = e.opts.StreamTimeout
		}
	}
	if x.Timeout > 0 {
		d = x.Timeout
		if limit > 0 {
			d = min(d, limit)
		}
	}
	return context.WithTimeout(ctx, d)
}
