package backend

import (
	"context"
	"sync"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// A Call is one unary call, or one server-streaming call answered with all
// its messages, as both invokers make it: the method path, the request's
// wire bytes and metadata in; the response's wire bytes, the backend's
// metadata (with Capture) and what the response took of its budget out.
// Calls are pooled: take them with GetCall and give them back with PutCall.
type Call = unary.Call

// A Group starts calls that leave together and are waited for at once
// (see Invoker.Start): the calls picked for the same address leave in one
// write. Its zero value is ready; it may be used again after Wait
// returns.
type Group struct {
	g     unary.Group
	p     *pool
	calls []started
}

// started is a call of a Group on the address it was sent to.
type started struct {
	c     *Call
	a     *address // nil once ended
	start int64
}

// maxPicks bounds the addresses a call that was never sent tries.
const maxPicks = 4

func (g *Group) start(ctx context.Context, p *pool, c *Call) {
	a, err := p.pick(ctx)
	if err != nil {
		c.Err = err
		return
	}
	g.p = p
	g.calls = append(g.calls, started{c: c, a: a, start: p.begin(a, true)})
	g.g.Start(ctx, a.client, c)
}

// Wait writes the frames of g's calls and waits until all have ended; when
// ctx is done first it ends the others with its status. Each call's end
// is counted on its address (pool.end); a call that was never sent is
// tried again on another address, up to maxPicks in all, unless the
// backend has one address (whose client retries it itself).
func (g *Group) Wait(ctx context.Context) {
	g.g.Wait(ctx)
	p := g.p
	if p == nil {
		return
	}
	sample := len(g.calls) == 1 // a batch's members wait for one another
	for attempt := 1; ; attempt++ {
		again := false
		for i := range g.calls {
			s := &g.calls[i]
			a, c := s.a, s.c
			if a == nil {
				continue
			}
			p.end(a, true, sample, s.start, p.directOutcome(c))
			s.a = nil
			if c.Err == nil || !c.Unsent() || ctx.Err() != nil || attempt == maxPicks || p.view.Load().one == a {
				continue
			}
			next, err := p.pick(ctx)
			if err != nil {
				continue // it keeps its error: never sent
			}
			s.a, s.start = next, p.begin(next, true)
			g.g.Start(ctx, next.client, c)
			again = true
		}
		if !again {
			break
		}
		g.g.Wait(ctx)
	}
	clear(g.calls)
	g.calls, g.p = g.calls[:0], nil
}

// Statuses of the calls whose Budget, Limit or MaxMessages ended them.
var (
	ErrOverBudget      = unary.ErrOverBudget
	ErrTooManyMessages = unary.ErrTooManyMessages
)

// maxPooled keeps one huge call from pinning its buffers forever.
const maxPooled = 1 << 20

var callPool = sync.Pool{New: func() any { return new(Call) }}

// GetCall returns an empty call from the pool, its buffers kept.
func GetCall() *Call {
	c := callPool.Get().(*Call)
	c.Request, c.Response = c.Request[:0], c.Response[:0]
	return c
}

// PutCall gives c back to the pool; c must not be used afterwards.
func PutCall(c *Call) {
	if cap(c.Request) > maxPooled || cap(c.Response) > maxPooled {
		return
	}
	c.Metadata, c.Header, c.Trailer, c.Err = nil, nil, nil, nil
	c.Capture, c.Remote = false, false
	c.Stream, c.MaxMessages, c.Budget, c.Limit, c.Reserved = false, 0, nil, 0, 0
	callPool.Put(c)
}

// GiveBack gives back what the response of c took of its budget, as a
// call that failed or was refused must.
func GiveBack(c *Call) {
	if c.Budget != nil {
		c.Budget.Add(c.Reserved)
	}
	c.Budget, c.Reserved = nil, 0
}

// take takes n more bytes of the budget of c, as the direct client does
// for each message: from Budget when shared, within Limit otherwise.
func take(c *Call, n int64) bool {
	if c.Limit > 0 && c.Reserved+n > c.Limit {
		return false
	}
	if b := c.Budget; b != nil && n > 0 {
		if b.Add(-n) < 0 {
			b.Add(n)
			return false
		}
	}
	c.Reserved += n
	return true
}
