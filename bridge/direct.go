package bridge

import (
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"

	lean "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/internal/unary"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// A DirectConn is a backend connection whose unary calls go through the
// bridge's own HTTP/2 client instead of grpc-go's: the calling goroutine
// writes the frames, concurrent calls share writes, and a batch's calls
// leave in one write. Server-streaming calls answered in one reply take
// it too. Other streaming calls, reflection and the connection's state
// stay with the *grpc.ClientConn it embeds, which must have been created
// for the same target.
type DirectConn struct {
	*grpc.ClientConn
	lean    *lean.Client
	stop    context.CancelFunc // ends watch
	watched chan struct{}      // closed when watch has returned
}

// DirectOptions configure the direct path of a DirectConn.
type DirectOptions struct {
	// Creds secure the connection, as the ClientConn's; nil means
	// plaintext.
	Creds credentials.TransportCredentials
	// MaxRecvMsgSize bounds a response message; 0 means 4 MiB, as
	// grpc-go's default.
	MaxRecvMsgSize int
	// Logger receives connection events at debug level; nil discards them.
	Logger *slog.Logger
	// KeepaliveTime, KeepaliveTimeout and KeepalivePermitWithoutStream
	// are grpc-go's keepalive.ClientParameters; a zero KeepaliveTime
	// turns keepalive off.
	KeepaliveTime                time.Duration
	KeepaliveTimeout             time.Duration
	KeepalivePermitWithoutStream bool
}

// ErrUnsupportedTarget is returned by NewDirectConn for a target that
// needs grpc-go's name resolution (a resolver scheme other than dns,
// passthrough, unix, ipv4 and ipv6, or several addresses); such a backend
// is called through grpc-go alone.
var ErrUnsupportedTarget = lean.ErrUnsupportedTarget

// NewDirectConn returns cc with a direct path for unary calls to target.
func NewDirectConn(cc *grpc.ClientConn, target string, opts DirectOptions) (*DirectConn, error) {
	c, err := lean.New(target, lean.Options{Creds: opts.Creds, MaxRecvMsgSize: opts.MaxRecvMsgSize, Logger: opts.Logger,
		KeepaliveTime: opts.KeepaliveTime, KeepaliveTimeout: opts.KeepaliveTimeout, KeepalivePermitWithoutStream: opts.KeepalivePermitWithoutStream})
	if err != nil {
		return nil, err
	}
	c.Connect() // so that the first call does not wait for a dial
	ctx, cancel := context.WithCancel(context.Background())
	d := &DirectConn{ClientConn: cc, lean: c, stop: cancel, watched: make(chan struct{})}
	go d.watch(ctx)
	return d, nil
}

// watch ends the direct client's backoff whenever grpc-go's connection to
// the same backend becomes ready: after a long outage the direct path
// backs off longer than grpc-go's (whose backoff the bridge caps at a
// few seconds), and must not keep failing calls once the backend is back.
func (d *DirectConn) watch(ctx context.Context) {
	defer close(d.watched)
	for {
		s := d.ClientConn.GetState()
		if s == connectivity.Ready {
			d.lean.ResetBackoff()
		}
		if !d.ClientConn.WaitForStateChange(ctx, s) {
			return
		}
	}
}

// Close closes both paths.
func (d *DirectConn) Close() error {
	d.stop()
	<-d.watched
	d.lean.Close()
	return d.ClientConn.Close()
}

// directOf is the direct path of conn, or nil.
func directOf(conn grpc.ClientConnInterface) *lean.Client {
	if d, ok := conn.(*DirectConn); ok {
		return d.lean
	}
	return nil
}

var callPool = sync.Pool{New: func() any { return new(lean.Call) }}

func getCall() *lean.Call { return callPool.Get().(*lean.Call) }

func putCall(c *lean.Call) {
	if cap(c.Request) > maxPooled || cap(c.Response) > maxPooled {
		return
	}
	c.Metadata, c.Header, c.Trailer, c.Err = nil, nil, nil, nil
	c.Stream, c.MaxMessages, c.Budget, c.Limit, c.Reserved = false, 0, nil, 0, 0
	callPool.Put(c)
}

// answer holds the wire bytes of a backend's response until the reply is
// written, in the pooled object they came in.
type answer struct {
	frame *frame
	call  *lean.Call
}

func (a answer) bytes() []byte {
	switch {
	case a.call != nil:
		return a.call.Response
	case a.frame != nil:
		return a.frame.b
	}
	return nil // no answer: the call failed
}

// reserved is what the response took of its reply's budget.
func (a answer) reserved() int64 {
	switch {
	case a.call != nil:
		return a.call.Reserved
	case a.frame != nil:
		return a.frame.n
	}
	return 0
}

func (a answer) release() {
	if a.call != nil {
		putCall(a.call)
	} else if a.frame != nil {
		putFrame(a.frame)
	}
}

// outgoingMD is the metadata ctx carries to the backend. Calls that came
// through the front door find it in their exchange, without a copy.
func outgoingMD(ctx context.Context) metadata.MD {
	if x := exchangeFrom(ctx); x != nil && x.md != nil {
		return x.md
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	return md
}

// newCall is a pooled call of h carrying r's params and the metadata md,
// or the params' error.
func newCall(h *handle, r *wire.Request, md metadata.MD) (*lean.Call, *mapping.Error) {
	call := getCall()
	var e *mapping.Error
	if call.Request, e = h.codec.AppendRequest(call.Request[:0], r.Params); e != nil {
		putCall(call)
		return nil, e
	}
	call.Method, call.Metadata, call.Capture = h.path, md, false
	return call, nil
}

// invokeDirect makes the call of r through h's direct path; its response
// takes its length of budget as soon as its prefix arrives (see invoke).
func (s *Server) invokeDirect(ctx context.Context, t *table, h *handle, r *wire.Request, budget *atomic.Int64) (answer, *mapping.Error) {
	call, e := newCall(h, r, outgoingMD(ctx))
	if e != nil {
		return answer{}, e
	}
	s.budgetCall(call, budget)
	c, _ := ctx.Value(captureKey{}).(*captured)
	call.Capture = c != nil
	ctx, cancel := context.WithTimeout(ctx, s.callTimeout(ctx))
	defer cancel()
	err := h.direct.Invoke(ctx, call)
	if c != nil {
		c.header, c.trailer = call.Header, call.Trailer
	}
	if err != nil {
		e := s.directError(ctx, t, h, call, err)
		putCall(call)
		return answer{}, e
	}
	return answer{call: call}, nil
}

// budgetCall makes the response of call take its length of budget (nil
// for a single call: MaxResponseBytes) as soon as it is known.
func (s *Server) budgetCall(call *lean.Call, budget *atomic.Int64) {
	if budget != nil {
		call.Budget = budget
	} else {
		call.Limit = s.opts.MaxResponseBytes
	}
}

// directError maps the failure err of call, which gives back what it took
// of its budget: errOverBudget when its response did not fit.
func (s *Server) directError(ctx context.Context, t *table, h *handle, call *lean.Call, err error) *mapping.Error {
	giveBack(call)
	if errors.Is(err, lean.ErrOverBudget) {
		return errOverBudget
	}
	return s.statusError(ctx, h, err, call.Remote, t.resolver)
}

// giveBack gives back what the response of call took of its budget.
func giveBack(call *lean.Call) {
	if call.Budget != nil {
		call.Budget.Add(call.Reserved)
	}
	call.Budget, call.Reserved = nil, 0
}

// startedCall is a batch member started on a direct path, to be finished
// once its Group has been waited for.
type startedCall struct {
	r     *wire.Request
	h     *handle
	call  *lean.Call
	began time.Time
}

// startDirect starts r in g when it is a unary call whose method has a
// direct path, the caller may call it and its params transcode; it
// returns false for any other request, which then runs the ordinary way.
func (s *Server) startDirect(ctx context.Context, t *table, r *wire.Request, md metadata.MD, budget *atomic.Int64, g *lean.Group, sc *startedCall) bool {
	if r.Invalid != nil || t == nil {
		return false
	}
	h := t.methods[string(r.Method)]
	if h == nil || h.direct == nil || h.kind != unary {
		return false
	}
	if _, e := s.authorize(ctx, t, r); e != nil {
		return false
	}
	call, e := newCall(h, r, md)
	if e != nil {
		return false // the ordinary way answers the params' error
	}
	call.Budget = budget
	*sc = startedCall{r: r, h: h, call: call}
	if s.observing() {
		sc.began = s.startCall()
	}
	g.Start(ctx, h.direct, call)
	return true
}

// finishDirect appends the reply of a started call whose Group has been
// waited for, and records it as call does; callCtx is the context the call
// ran with.
func (s *Server) finishDirect(ctx, callCtx context.Context, t *table, sc *startedCall, budget *atomic.Int64) (out []byte) {
	r, h, call := sc.r, sc.h, sc.call
	defer putCall(call)
	o := outcome{h: h}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("panic while handling a call", "method", h.name, "panic", p, "stack", string(debug.Stack()))
			out = nil
			if !r.Notification() {
				out = wire.AppendError(out, r.ID, wire.Internal)
			}
		}
	}()
	var e *mapping.Error
	if call.Err != nil {
		if e = s.directError(callCtx, t, h, call, call.Err); e == errOverBudget {
			o.overBudget, e = true, s.overBudget(budget)
		}
		o.code = e.Code
	}
	o.reserved = call.Reserved
	return s.settle(ctx, s.appendReply(nil, r, h, call.Response, e), 0, r, o, budget, sc.began)
}
