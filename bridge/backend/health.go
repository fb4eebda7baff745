package backend

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// healthRetry is the wait before a failed health watch starts again.
const healthRetry = time.Second

// A healthWatch watches the health of one address on grpc-go's
// connection to it, while that connection is ready: a producer of its
// SubConn (grpc-go builds it on the SubConn's transport, and closes it
// when the SubConn's state changes), so that one watch per address serves
// both call paths.
type healthWatch struct {
	p *pool
	a *address
}

func (h healthWatch) Build(sc any) (balancer.Producer, func()) {
	cc, ok := sc.(grpc.ClientConnInterface)
	ctx, cancel := context.WithCancel(h.p.ctx)
	if !ok {
		return nil, cancel
	}
	h.p.mu.Lock()
	if !h.p.closed {
		h.p.wg.Go(func() { h.p.watchHealth(ctx, h.a, healthpb.NewHealthClient(cc)) })
	}
	h.p.mu.Unlock()
	return nil, cancel
}

// watchHealth watches grpc.health.v1.Health/Watch on a for the pool's
// health_service until ctx ends, as grpc-go's client health checking
// does: SERVING puts a in the rotation, anything else takes it out, and
// so does a watch that fails; a backend without the health service
// (UNIMPLEMENTED) counts as serving.
func (p *pool) watchHealth(ctx context.Context, a *address, hc healthpb.HealthClient) {
	for ctx.Err() == nil {
		err := p.watchOnce(ctx, a, hc)
		if ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			if !a.noHealth.Swap(true) {
				p.log.Warn("the backend address has no health service: health checking is off for it",
					"backend", p.name, "address", a.addr)
			}
			p.setHealth(a, healthServing)
			return
		}
		p.setHealth(a, healthNotServing)
		p.log.Debug("the health watch of a backend address failed", "backend", p.name, "address", a.addr, "error", err)
		select {
		case <-ctx.Done():
		case <-time.After(healthRetry):
		}
	}
}

// watchOnce reads one Watch stream until it fails.
func (p *pool) watchOnce(ctx context.Context, a *address, hc healthpb.HealthClient) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: p.opts.HealthService})
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err() // the connection left: its health is unknown again
		}
		if m.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			p.setHealth(a, healthServing)
		} else {
			p.setHealth(a, healthNotServing)
		}
	}
}

// setHealth records the health of a and rebuilds the view when it changed.
func (p *pool) setHealth(a *address, h int32) {
	p.mu.Lock()
	old := a.health.Swap(h)
	if old != h {
		p.rebuildLocked()
	}
	p.mu.Unlock()
	switch {
	case old == h:
	case h == healthServing && old == healthNotServing:
		p.log.Info("backend address serving again", "backend", p.name, "address", a.addr)
	case h == healthNotServing:
		p.log.Info("backend address not serving: out of the rotation", "backend", p.name, "address", a.addr)
	}
}
