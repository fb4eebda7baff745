package dispatch

import (
	"context"
	"errors"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// discoverMethod is the OpenRPC service discovery method.
const discoverMethod = "rpc.discover"

// reservedPrefix starts the names the JSON-RPC specification keeps for the
// protocol's own methods.
const reservedPrefix = "rpc."

// call is one request on its way through prepare, execute and finish.
type call struct {
	req wire.Request // a copy: nothing of the call points into its message
	rec Record
	bc  *backend.Call   // the backend call, once prepared
	msg []proto.Message // the request messages of a client or bidi stream over HTTP
	// collected is the JSON of a client or bidi stream's responses, res
	// what it took of its budget.
	collected []byte
	res       reservation
	err       *mapping.Error // the call's error, once it failed
	over      bool           // its response did not fit in its budget
	mode      Mode           // how a call of a streaming method is answered
	sink      Sink           // where its messages go as they arrive, if anywhere
	// capture asks for the backend's response metadata (a single call's,
	// when Run is asked to), which md holds once the call ran.
	capture bool
	md      ResponseMetadata
}

// Run answers msg, which the transport received with x, and appends the
// reply to dst; a result as long as dst means there is nothing to reply
// (notifications only). With capture, the reply to a single call (not a
// batch) comes with the backend's response metadata of the call, for a
// transport that returns them (POST /'s response headers); without, or
// for a call that reached no backend, the metadata are the zero value.
func (e *Engine) Run(ctx context.Context, msg *wire.Message, x *Exchange, dst []byte, capture bool) ([]byte, ResponseMetadata) {
	t := e.table.Load()
	if !msg.Batch {
		return e.single(ctx, t, x, &msg.Single, dst, capture)
	}
	return e.batch(ctx, t, x, msg.Members, dst), ResponseMetadata{}
}

// single runs one call: prepare, execute, finish, then settle.
func (e *Engine) single(ctx context.Context, t *Table, x *Exchange, r *wire.Request, dst []byte, capture bool) ([]byte, ResponseMetadata) {
	c := call{req: *r, capture: capture}
	e.begin(t, x, &c)
	start := len(dst)
	out := e.safely(&c, dst, func(dst []byte) []byte {
		dst, ready := e.prepare(ctx, t, x, &c, nil, dst)
		if !ready {
			return dst
		}
		e.execute(ctx, t, x, &c)
		return e.finish(&c, dst)
	})
	return e.settle(ctx, t, x, &c, out, start, nil), c.md
}

// batch runs the members of a batch and appends the array of their
// replies in member order; when every member is a notification it
// appends nothing. Every member is prepared once, in order. The unary
// calls whose invoker starts them (Invoker.Start: the direct path's)
// start in Groups of at most BatchParallelism, whose frames leave
// together and whose waiter wakes once; the other calls run on at most
// BatchParallelism workers. Every call's deadline runs from when it
// starts (see deadline; a Group's from its first member's try); the
// replies share the budget of MaxResponseBytes.
func (e *Engine) batch(ctx context.Context, t *Table, x *Exchange, reqs []wire.Request, dst []byte) []byte {
	budget := e.newBudget()
	calls := make([]call, len(reqs))
	replies := make([][]byte, len(reqs))
	var (
		rest    []int
		g       backend.Group
		started = make([]int, 0, min(len(reqs), e.opts.BatchParallelism))
		gctx    context.Context
		gcancel context.CancelFunc
	)
	flush := func() {
		if len(started) == 0 {
			return
		}
		g.Wait(gctx)
		for _, i := range started {
			c := &calls[i]
			if err := c.bc.Err; err != nil {
				c.err = e.callError(gctx, t, c, err)
			}
			out := e.safely(c, nil, func(dst []byte) []byte { return e.finish(c, dst) })
			replies[i] = e.settle(ctx, t, x, c, out, 0, budget)
		}
		gcancel()
		gctx, started = nil, started[:0]
	}
	for i := range reqs {
		c := &calls[i]
		c.req = reqs[i]
		e.begin(t, x, c)
		ready := false
		out := e.safely(c, nil, func(dst []byte) []byte {
			dst, ready = e.prepare(ctx, t, x, c, budget, dst)
			return dst
		})
		switch {
		case !ready:
			replies[i] = e.settle(ctx, t, x, c, out, 0, budget)
			continue
		case c.bc != nil && !c.bc.Stream && c.rec.Method.invoker != nil:
			if gctx == nil {
				gctx, gcancel = e.deadline(ctx, x, false)
			}
			if c.rec.Method.invoker.Start(gctx, &g, c.bc) {
				if started = append(started, i); len(started) == cap(started) {
					flush()
				}
				continue
			}
		}
		rest = append(rest, i)
	}
	flush()
	if gctx != nil {
		gcancel() // made for a Group that no invoker started
	}

	var next atomic.Int64
	work := func() {
		for {
			n := int(next.Add(1) - 1)
			if n >= len(rest) {
				return
			}
			c := &calls[rest[n]]
			out := e.safely(c, nil, func(dst []byte) []byte {
				e.execute(ctx, t, x, c)
				return e.finish(c, dst)
			})
			replies[rest[n]] = e.settle(ctx, t, x, c, out, 0, budget)
		}
	}
	var wg sync.WaitGroup
	for range min(len(rest), e.opts.BatchParallelism) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()

	size := 2
	for _, rep := range replies {
		size += len(rep) + 1
	}
	start := len(dst)
	dst = append(slices.Grow(dst, size), '[')
	for i, rep := range replies {
		replies[i] = nil // for the collector, once copied
		if len(rep) == 0 {
			continue
		}
		if len(dst) > start+1 {
			dst = append(dst, ',')
		}
		dst = append(dst, rep...)
	}
	if len(dst) == start+1 {
		return dst[:start] // only notifications: nothing to reply
	}
	return append(dst, ']')
}

// guards are the guards of t, or those bound to no table before the
// first discovery.
func (e *Engine) guards(t *Table) []Guard {
	if t == nil {
		return e.bare
	}
	return t.guards
}

// begin tells the guards that c begins, and reads the clock for them.
func (e *Engine) begin(t *Table, x *Exchange, c *call) {
	gs := e.guards(t)
	if len(gs) == 0 {
		return
	}
	for _, g := range gs {
		if tm, ok := g.(Timer); ok && tm.Timed() {
			c.rec.Began = time.Now()
			break
		}
	}
	for _, g := range gs {
		g.Begin(x)
	}
}

// prepare readies c for execute: it resolves the method, asks the guards,
// asks the transport how a call of a streaming method is answered
// (Exchange.Streams), and encodes the params into a backend call. A call
// that needs no backend call (invalid, rpc.discover, refused, unknown,
// bad params, the stream methods, a stream the transport detaches) is
// answered here: ready is false and the reply is appended to dst.
func (e *Engine) prepare(ctx context.Context, t *Table, x *Exchange, c *call, budget *atomic.Int64, dst []byte) (_ []byte, ready bool) {
	r := &c.req
	c.rec.Name, c.rec.Notification = r.Method, r.Notification()
	if r.Invalid != nil {
		c.rec.Invalid = true
		c.err, c.rec.Code = r.Invalid, r.Invalid.Code
		return wire.AppendError(dst, wire.NullID, r.Invalid), false
	}
	if string(r.Method) == discoverMethod {
		return e.discover(t, x, c, dst), false
	}
	m := t.Lookup(r.Method)
	c.rec.Method = m
	for _, g := range e.guards(t) {
		if err := g.Allow(x, r.Method, m); err != nil {
			return e.fail(c, dst, err), false
		}
	}
	if wire.IsStreamMethod(r.Method) {
		d, ok := x.Streams.(Detacher)
		if !ok {
			return e.fail(c, dst, wsOnly(r.Method)), false
		}
		var out []byte
		out, c.rec.Code = d.Control(*r, dst)
		return out, false
	}
	switch {
	case t == nil:
		return e.fail(c, dst, wire.NotDiscovered), false
	case m == nil:
		return e.fail(c, dst, methodNotFound(t, r.Method)), false
	case m.Kind != Unary && x.Streams != nil && !r.Notification():
		c.mode, c.sink = x.Streams.Stream(m, *r)
		if c.mode == Detach {
			var out []byte
			out, c.rec.Code = x.Streams.(Detacher).Detach(ctx, t, m, *r, dst)
			return out, false
		}
	}
	if c.mode == Live || m.Kind == ClientStream || m.Kind == BidiStream || c.sink != nil {
		var err *mapping.Error
		if c.msg, err = RequestMessages(m, r.Params); err != nil {
			return e.fail(c, dst, err), false
		}
		if c.mode != Live {
			c.res = e.reservation(budget)
		}
		return dst, true
	}
	bc := backend.GetCall()
	var err *mapping.Error
	if bc.Request, err = m.Codec.AppendRequest(bc.Request, r.Params); err != nil {
		backend.PutCall(bc)
		return e.fail(c, dst, err), false
	}
	bc.Method, bc.Metadata, bc.Capture = m.Path, x.Metadata, c.capture
	if budget != nil {
		bc.Budget = budget
	} else {
		bc.Limit = e.opts.MaxResponseBytes
	}
	if m.Kind == ServerStream {
		bc.Stream, bc.MaxMessages = true, e.opts.MaxStreamMessages
	}
	c.bc = bc
	return dst, true
}

// execute makes the backend call of a prepared c, within its deadline.
func (e *Engine) execute(ctx context.Context, t *Table, x *Exchange, c *call) {
	ctx, cancel := e.deadline(ctx, x, c.mode == Live)
	defer cancel()
	m := c.rec.Method
	if c.mode == Live {
		c.rec.Live = true
		c.rec.Messages, c.err = e.live(ctx, t, x, m, c.msg, c.sink)
		return
	}
	if c.bc == nil {
		var got *ResponseMetadata // grpc-go's to fill: on the heap, and only when asked
		if c.capture {
			got = new(ResponseMetadata)
		}
		c.collected, c.err = e.collect(ctx, t, x, m, c.msg, c.sink, &c.res, got)
		if got != nil {
			c.md = *got
		}
		if c.err == errOverBudget {
			c.err, c.over = nil, true
		}
		return
	}
	err := m.invoker.Invoke(ctx, c.bc)
	if c.capture {
		c.md = ResponseMetadata{Header: c.bc.Header, Trailer: c.bc.Trailer}
	}
	if err != nil {
		c.err = e.callError(ctx, t, c, err)
	}
}

// callError is the error of c, whose backend call failed with err: the
// budget's refusal (c.over), the stream's bound, or the status to answer.
func (e *Engine) callError(ctx context.Context, t *Table, c *call, err error) *mapping.Error {
	backend.GiveBack(c.bc)
	switch {
	case errors.Is(err, backend.ErrOverBudget):
		c.over = true
		return nil
	case errors.Is(err, backend.ErrTooManyMessages):
		return e.tooManyMessages()
	}
	return mapping.StatusError(backend.Status(ctx, e.opts.Logger, c.rec.Method.Name, err, c.bc.Remote), t.Resolver)
}

// finish appends the reply of c, which execute ran; a notification gets
// none.
func (e *Engine) finish(c *call, dst []byte) []byte {
	switch {
	case c.over:
		return dst // settle answers it
	case c.err != nil:
		return e.fail(c, dst, c.err)
	case c.req.Notification():
		return dst
	}
	if c.mode == Live {
		return wire.AppendLiveResult(dst, c.req.ID, c.rec.Messages)
	}
	m := c.rec.Method
	start := len(dst)
	dst = wire.AppendResultHead(dst, c.req.ID)
	var err error
	switch {
	case c.bc == nil:
		dst = append(dst, c.collected...)
	case c.bc.Stream:
		var e2 *mapping.Error
		if dst, e2 = e.appendMessages(dst, m, c.bc); e2 != nil {
			return e.fail(c, dst[:start], e2)
		}
	default:
		dst, err = m.Codec.AppendResultWire(dst, c.bc.Response)
	}
	if err != nil {
		e.opts.Logger.Error("cannot encode a result", "method", m.Name, "error", err)
		return e.fail(c, dst[:start], wire.Internal)
	}
	return append(dst, '}')
}

// fail records e as the outcome of c and appends its error reply; a
// notification gets none.
func (e *Engine) fail(c *call, dst []byte, err *mapping.Error) []byte {
	c.err, c.rec.Code = err, err.Code
	if c.req.Notification() {
		return dst
	}
	return wire.AppendError(dst, c.req.ID, err)
}

// settle holds the reply of c, appended to out at start, to its budget
// (see capReply), tells the guards, and gives the backend call back.
func (e *Engine) settle(ctx context.Context, t *Table, x *Exchange, c *call, out []byte, start int, budget *atomic.Int64) []byte {
	out, c.rec.Code = e.capReply(out, start, c, budget)
	gs := e.guards(t)
	for i := len(gs) - 1; i >= 0; i-- {
		gs[i].Done(ctx, x, c.rec)
	}
	if c.bc != nil {
		backend.PutCall(c.bc)
		c.bc = nil
	}
	return out
}

// safely runs f, a phase of c appending to dst; a panic in it becomes
// -32603 for c (nothing for a notification) and a log line.
func (e *Engine) safely(c *call, dst []byte, f func([]byte) []byte) (out []byte) {
	start := len(dst)
	defer func() {
		if p := recover(); p != nil {
			e.opts.Logger.Error("panic while handling a call", "method", string(c.req.Method), "panic", p, "stack", string(debug.Stack()))
			c.over = false
			out = e.fail(c, dst[:start], wire.Internal)
		}
	}()
	return f(dst)
}

// discover answers rpc.discover with the document the caller may see.
func (e *Engine) discover(t *Table, x *Exchange, c *call, dst []byte) []byte {
	r := &c.req
	if r.Notification() {
		return dst
	}
	doc, err := e.document(t, x)
	switch {
	case err != nil:
		return e.fail(c, dst, err)
	case len(r.Params) > 2 && !isEmptyStructure(r.Params):
		return e.fail(c, dst, &mapping.Error{Code: mapping.CodeInvalidParams, Message: wire.MsgInvalidParams + ": rpc.discover takes no params"})
	case doc == nil:
		return e.fail(c, dst, wire.Internal)
	}
	return wire.AppendResult(dst, r.ID, doc)
}

// Document returns the OpenRPC document the caller of x may see (nil when
// it cannot be rendered), or the error to answer instead: before
// discovery, or when the caller may see none.
func (e *Engine) Document(x *Exchange) ([]byte, *mapping.Error) {
	return e.document(e.table.Load(), x)
}

func (e *Engine) document(t *Table, x *Exchange) ([]byte, *mapping.Error) {
	for _, g := range e.guards(t) {
		if l, ok := g.(Lister); ok {
			doc, err := l.Document(x, t)
			if err != nil {
				return nil, err
			}
			if t != nil {
				return doc, nil
			}
			break
		}
	}
	if t == nil {
		return nil, wire.NotDiscovered
	}
	return t.Document(), nil
}

// isEmptyStructure reports whether b, a JSON object or array, has no members.
func isEmptyStructure(b []byte) bool {
	i := wire.SkipSpace(b, 1)
	return i < len(b) && (b[i] == '}' || b[i] == ']')
}

func methodNotFound(t *Table, name []byte) *mapping.Error {
	reason := ""
	if n := string(name); strings.HasPrefix(n, reservedPrefix) && t.byName["."+n] != nil {
		reason = "names beginning with rpc. are reserved by JSON-RPC; this method is served as ." + n
	}
	return wire.MethodNotFound(name, reason)
}

// wsOnly answers a stream method called where there are no streams.
func wsOnly(method []byte) *mapping.Error {
	return wire.MethodNotFound(method, "the rpc.stream methods work only on WebSocket connections (GET /ws)")
}
