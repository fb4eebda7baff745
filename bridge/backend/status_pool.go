package backend

import (
	"slices"
	"time"

	"google.golang.org/grpc/connectivity"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// AddressStatus is one address of a backend, as /readyz shows it.
type AddressStatus struct {
	Address string `json:"address"`
	// State is ready, connecting, down, not_serving (with health_check),
	// ejected (by outlier detection, until EjectedUntil) or draining
	// (removed from the set, calls still in flight).
	State string `json:"state"`
	// InFlight are the calls and streams on the address now, both call
	// paths, reflection included.
	InFlight int `json:"in_flight"`
	// EjectedUntil is when an ejected address comes back into the
	// rotation.
	EjectedUntil *time.Time `json:"ejected_until,omitempty"`
	// Calls are the calls sent to the address since it joined the set,
	// Ejections the times outlier detection ejected it.
	Calls     uint64 `json:"-"`
	Ejections uint64 `json:"-"`
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
	grpcState := d.ClientConn.GetState()
	// Under mu, as the view is rebuilt: what a pick sees.
	p.mu.Lock()
	defer p.mu.Unlock()
	st := AddressesStatus{Addresses: make([]AddressStatus, 0, len(p.addrs)+len(p.draining)), ResolveError: p.resolveErr}
	for _, a := range slices.Concat(p.addrs, p.draining) {
		as := AddressStatus{Address: a.addr, State: p.stateOf(a, grpcState), InFlight: int(a.inFlight.Load()),
			Calls: a.calls.Load(), Ejections: a.ejected.Load()}
		if until := a.until.Load(); until != 0 && as.State == "ejected" {
			t := p.epoch.Add(time.Duration(until)).Truncate(time.Millisecond).UTC()
			as.EjectedUntil = &t
		}
		st.Addresses = append(st.Addresses, as)
	}
	return st
}

// stateOf is the state of a as /readyz and the metrics name it: that of
// the connection its unary calls take (the direct client's, or grpc-go's
// SubConn), unless it drains, is ejected or not serving.
func (p *pool) stateOf(a *address, grpcState connectivity.State) string {
	health := a.health.Load()
	switch {
	case a.draining.Load():
		return "draining"
	case a.isEjected():
		return "ejected"
	case p.opts.HealthCheck && health == healthNotServing:
		return "not_serving"
	}
	var st string
	switch s := a.sub.Load(); {
	case a.client != nil:
		switch a.client.State() {
		case unary.Ready:
			st = "ready"
		case unary.Down, unary.Shutdown:
			return "down"
		default:
			return "connecting"
		}
	case s != nil:
		switch s.connectivity() {
		case connectivity.Ready:
			st = "ready"
		case connectivity.TransientFailure, connectivity.Shutdown:
			return "down"
		default:
			return "connecting"
		}
	case grpcState == connectivity.Ready: // an opaque target: grpc-go's alone
		return "ready"
	case grpcState == connectivity.TransientFailure:
		return "down"
	default:
		return "connecting"
	}
	if p.opts.HealthCheck && health != healthServing {
		return "connecting" // the first health answer is under way
	}
	return st
}
