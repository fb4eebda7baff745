package backend

import (
	"context"

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

// IsDirect reports whether inv is the bridge's own client, which starts
// calls in Groups.
func IsDirect(inv Invoker) bool {
	_, ok := inv.(direct)
	return ok
}

// direct makes calls through the bridge's own HTTP/2 client, one per
// address of the backend.
type direct struct{ p *pool }

func (d direct) Invoke(ctx context.Context, c *Call) error { return d.p.invoke(ctx, c) }

func (d direct) Start(ctx context.Context, g *Group, c *Call) bool {
	g.start(ctx, d.p, c)
	return true
}
