package backend

import (
	"google.golang.org/grpc/connectivity"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// AddressStatus is one address of a backend, as /readyz shows it.
type AddressStatus struct {
	Address string `json:"address"`
	// State is ready, connecting, down, not_serving (with health_check)
	// or draining (removed from the set, calls still in flight).
	State string `json:"state"`
	// InFlight are the calls on the address now, both call paths.
	InFlight int `json:"in_flight"`
	// Calls are the calls sent to the address since it joined the set.
	Calls uint64 `json:"-"`
}

// AddressesStatus is a snapshot of a backend's addresses.
type AddressesStatus struct {
	Addresses []AddressStatus `json:"addresses"`
	// ResolveError is why the last resolution failed, the set being kept;
	// empty after one that succeeded.
	ResolveError string `json:"resolve_error,omitempty"`
}

// Addresses returns the backend's addresses, the draining ones last.
func (d *Conn) Addresses() AddressesStatus {
	p := d.pool
	p.mu.Lock()
	addrs, draining, resolveErr := p.addrs, p.draining, p.resolveErr
	p.mu.Unlock()
	st := AddressesStatus{Addresses: make([]AddressStatus, 0, len(addrs)+len(draining)), ResolveError: resolveErr}
	grpcState := d.ClientConn.GetState()
	for _, a := range append(addrs[:len(addrs):len(addrs)], draining...) {
		st.Addresses = append(st.Addresses, AddressStatus{Address: a.addr, State: p.stateOf(a, grpcState),
			InFlight: a.inFlight(), Calls: a.calls.Load()})
	}
	return st
}

func (a *address) inFlight() int {
	n := int(a.grpcInFlight.Load())
	if a.client != nil {
		n += a.client.InFlight()
	}
	return n
}

// stateOf is the state of a as /readyz and the metrics name it.
func (p *pool) stateOf(a *address, grpcState connectivity.State) string {
	switch {
	case a.draining.Load():
		return "draining"
	case p.opts.HealthCheck && a.health.Load() == healthNotServing:
		return "not_serving"
	case a.client != nil:
		switch a.client.State() {
		case unary.Ready:
			if p.opts.HealthCheck && a.health.Load() != healthServing {
				return "connecting"
			}
			return "ready"
		case unary.Down, unary.Shutdown:
			return "down"
		}
		return "connecting"
	case a.grpcConns.Load() > 0:
		return "ready"
	case grpcState == connectivity.TransientFailure:
		return "down"
	}
	return "connecting"
}
