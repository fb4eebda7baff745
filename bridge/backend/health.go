package backend

import (
	"context"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

// A healthDialer opens the connection the health of one address is
// watched on.
type healthDialer func(addr string) (*grpc.ClientConn, error)

// healthRetry is the wait before a failed health watch starts again.
const healthRetry = time.Second

// watchHealth watches grpc.health.v1.Health/Watch on a for the pool's
// health_service until a.ctx ends, as grpc-go's client health checking
// does: SERVING puts a in the rotation, anything else takes it out, and
// so does a watch that fails; a backend without the health service
// (UNIMPLEMENTED) counts as serving.
func (p *pool) watchHealth(a *address) {
	cc, err := p.opts.Health(a.addr)
	if err != nil {
		p.log.Error("cannot watch the health of a backend address", "backend", p.name, "address", a.addr, "error", err)
		p.setHealth(a, healthServing)
		return
	}
	defer cc.Close()
	hc := healthpb.NewHealthClient(cc)
	for a.ctx.Err() == nil {
		err := p.watchOnce(a, hc)
		if a.ctx.Err() != nil {
			return
		}
		if status.Code(err) == codes.Unimplemented {
			p.log.Warn("the backend address has no health service: health checking is off for it",
				"backend", p.name, "address", a.addr)
			p.setHealth(a, healthServing)
			<-a.ctx.Done()
			return
		}
		p.setHealth(a, healthNotServing)
		p.log.Debug("the health watch of a backend address failed", "backend", p.name, "address", a.addr, "error", err)
		select {
		case <-a.ctx.Done():
		case <-time.After(healthRetry):
		}
	}
}

// watchOnce reads one Watch stream until it fails.
func (p *pool) watchOnce(a *address, hc healthpb.HealthClient) error {
	ctx, cancel := context.WithCancel(a.ctx)
	defer cancel()
	s, err := hc.Watch(ctx, &healthpb.HealthCheckRequest{Service: p.opts.HealthService}, grpc.WaitForReady(true))
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
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
	old := a.health.Swap(h)
	if old == h {
		return
	}
	switch {
	case h == healthServing && old == healthNotServing:
		p.log.Info("backend address serving again", "backend", p.name, "address", a.addr)
	case h == healthNotServing:
		p.log.Info("backend address not serving: out of the rotation", "backend", p.name, "address", a.addr)
	}
	p.mu.Lock()
	p.rebuildLocked()
	p.mu.Unlock()
}
