package backend

import (
	"context"
	"sync"

	"google.golang.org/grpc"
)

// An Invoker makes the calls of one backend connection. Both kinds below
// fill a Call the same way: its response, its captured metadata, what it
// took of its budget, and Remote when its error is the backend's own
// status (see Status).
type Invoker interface {
	// Invoke makes c and returns nil or its status error, by the deadline
	// of ctx.
	Invoke(ctx context.Context, c *Call) error
	// Start starts c in g, to be waited for with g.Wait, after which
	// c.Err holds its outcome; it returns false, starting nothing, when
	// the invoker cannot (then Invoke c).
	Start(ctx context.Context, g *Group, c *Call) bool
}

// For returns the Invoker of conn: the bridge's own HTTP/2 client when
// conn is a *Conn with the direct path, grpc-go's otherwise.
func For(conn grpc.ClientConnInterface) Invoker {
	if d, ok := conn.(*Conn); ok && d.direct {
		return direct{d.pool}
	}
	return grpcGo{conn}
}

// direct makes calls through the bridge's own HTTP/2 client, one per
// address of the backend: a single call as a Group of one, so that the
// picking, the counts and the retry of unsent calls are a batch's.
type direct struct{ p *pool }

var groups = sync.Pool{New: func() any { return new(Group) }}

func (d direct) Invoke(ctx context.Context, c *Call) error {
	g := groups.Get().(*Group)
	g.start(ctx, d.p, c)
	g.Wait(ctx)
	groups.Put(g)
	return c.Err
}

func (d direct) Start(ctx context.Context, g *Group, c *Call) bool {
	g.start(ctx, d.p, c)
	return true
}
