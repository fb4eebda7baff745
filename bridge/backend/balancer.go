package backend

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"google.golang.org/grpc/balancer"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// balancerName is the load balancing policy of a Conn's grpc-go
// ClientConn (its service config): the pool.
const balancerName = "grpc_jsonrpc_bridge_pool"

// serviceConfig makes the pool the balancer of a Conn's ClientConn.
const serviceConfig = `{"loadBalancingConfig":[{"` + balancerName + `":{}}]}`

// grpc-go finds balancers by name in a registry of its own, filled when
// the program starts: this is the one registration, of a builder without
// state. Each ClientConn's balancer finds its pool in the attributes of
// the resolver state its manual resolver gives it (resolverState).
func init() { balancer.Register(builder{}) }

type builder struct{}

func (builder) Name() string { return balancerName }

func (builder) Build(cc balancer.ClientConn, _ balancer.BuildOptions) balancer.Balancer {
	return &poolBalancer{cc: cc, subs: map[*address]*subConn{}}
}

// A poolBalancer is the balancer of a Conn's ClientConn: one SubConn per
// address of the pool's set, a picker that asks the pool (pick.go), and
// Done callbacks that end calls as the direct path ends its own (end:
// the calls in flight, the time signal, the outlier detector). grpc-go
// calls its methods one at a time.
type poolBalancer struct {
	cc   balancer.ClientConn
	p    *pool
	subs map[*address]*subConn
	stop context.CancelFunc // ends watch
}

// A subConn is grpc-go's connection to one address.
type subConn struct {
	sc    balancer.SubConn
	a     *address
	state atomic.Int32 // its connectivity.State
	err   atomic.Pointer[error]
	// unwatch ends the health watch on it; the balancer's.
	unwatch func()
}

func (s *subConn) connectivity() connectivity.State { return connectivity.State(s.state.Load()) }
func (s *subConn) ready() bool                      { return s.connectivity() == connectivity.Ready }

func (b *poolBalancer) UpdateClientConnState(s balancer.ClientConnState) error {
	p, _ := s.ResolverState.Attributes.Value(poolKey{}).(*pool)
	if p == nil || b.p != nil && p != b.p {
		return balancer.ErrBadResolverState
	}
	if b.p == nil {
		b.p = p
		ctx, cancel := context.WithCancel(p.ctx)
		b.stop = cancel
		p.mu.Lock()
		if !p.closed {
			p.wg.Go(func() { b.watch(ctx) })
		}
		p.mu.Unlock()
	}
	b.sync()
	return nil
}

// sync makes one SubConn for each address of the set, and shuts down
// those of the addresses that left it: their calls in flight finish.
func (b *poolBalancer) sync() {
	p := b.p
	set := p.all()
	for _, a := range set {
		if b.subs[a] != nil {
			continue
		}
		s := &subConn{a: a}
		//lint:ignore SA1019 deprecated for SubConns of several addresses: each of these has one
		sc, err := b.cc.NewSubConn([]resolver.Address{{Addr: a.addr}}, balancer.NewSubConnOptions{
			StateListener: func(st balancer.SubConnState) { b.changed(s, st) },
		})
		if err != nil {
			p.log.Error("cannot make a grpc-go connection to the backend's address", "backend", p.name, "address", a.addr, "error", err)
			continue
		}
		s.sc = sc
		b.subs[a] = s
		a.sub.Store(s)
	}
	for a, s := range b.subs {
		if !slices.Contains(set, a) {
			b.shutdown(s)
		}
	}
	p.connect()
}

func (b *poolBalancer) shutdown(s *subConn) {
	if s.unwatch != nil {
		s.unwatch()
		s.unwatch = nil
	}
	s.sc.Shutdown()
	delete(b.subs, s.a)
	s.a.sub.CompareAndSwap(s, nil)
}

// changed takes a new state of s: a connection ready gets its health
// watched, and tells the direct client of the same address that it is
// back; one that failed or drained has the target resolved again.
func (b *poolBalancer) changed(s *subConn, st balancer.SubConnState) {
	p, a := b.p, s.a
	if st.ConnectionError != nil {
		s.err.Store(&st.ConnectionError)
	}
	if s.unwatch != nil {
		s.unwatch()
		s.unwatch = nil
	}
	p.mu.Lock()
	was := connectivity.State(s.state.Swap(int32(st.ConnectivityState)))
	if st.ConnectivityState != connectivity.Ready && p.opts.HealthCheck {
		a.health.Store(healthUnknown) // until a watch on a new connection answers
	}
	p.rebuildLocked()
	if st.ConnectivityState == connectivity.Idle && !p.closed {
		p.wg.Go(p.connect)
	}
	p.mu.Unlock()
	if st.ConnectivityState == connectivity.Ready {
		if p.opts.HealthCheck {
			_, s.unwatch = s.sc.GetOrBuildProducer(healthWatch{p, a})
		}
		if c := a.client; c != nil && c.State() == unary.Down {
			c.ResetBackoff() // the address is back
			c.Connect()
		}
	}
	if was == connectivity.Ready && st.ConnectivityState != connectivity.Ready && st.ConnectivityState != connectivity.Shutdown && !a.draining.Load() {
		p.refresh()
	}
}

// watch gives grpc-go a new picker, and the ClientConn's state, at every
// change of the pool's view: calls waiting for an address pick again.
func (b *poolBalancer) watch(ctx context.Context) {
	p := b.p
	for {
		v := p.view.Load()
		b.cc.UpdateState(balancer.State{ConnectivityState: p.grpcState(v), Picker: &picker{p}})
		select {
		case <-v.changed:
		case <-ctx.Done():
			return
		}
	}
}

func (b *poolBalancer) ResolverError(error) {} // the pool keeps the set it has

func (b *poolBalancer) UpdateSubConnState(balancer.SubConn, balancer.SubConnState) {} // StateListener's

func (b *poolBalancer) ExitIdle() {
	if b.p != nil {
		b.p.connect()
	}
}

func (b *poolBalancer) Close() {
	if b.stop != nil {
		b.stop()
	}
	for _, s := range b.subs {
		b.shutdown(s)
	}
	if b.p != nil {
		b.p.mu.Lock()
		b.p.rebuildLocked()
		b.p.mu.Unlock()
	}
}

// grpcState is the state of the ClientConn of p whose view is v.
func (p *pool) grpcState(v *view) connectivity.State {
	switch {
	case len(v.grpc) > 0:
		return connectivity.Ready
	case p.grpcWaitable() == nil:
		return connectivity.Connecting
	}
	return connectivity.TransientFailure
}

// A picker picks the SubConn of grpc-go's calls and streams by the
// pool's picker, and ends them in Done as the direct path ends its own.
type picker struct{ p *pool }

func (pk *picker) Pick(info balancer.PickInfo) (balancer.PickResult, error) {
	p := pk.p
	v := p.view.Load()
	if len(v.grpc) == 0 {
		if err := p.grpcWaitable(); err != nil {
			return balancer.PickResult{}, err
		}
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	a := p.choose(v.grpc)
	s := a.sub.Load()
	if s == nil { // shut down since the view was made: the next view has it not
		return balancer.PickResult{}, balancer.ErrNoSubConnAvailable
	}
	o, _ := info.Ctx.Value(originKey{}).(*Origin)
	unaryCall := o != nil && o.unary
	start := p.begin(a, unaryCall)
	return balancer.PickResult{SubConn: s.sc, Done: func(di balancer.DoneInfo) {
		p.end(a, unaryCall, true, start, p.grpcOutcome(di, unaryCall))
	}}, nil
}

// grpcWaitable is waitable for grpc-go's path: nil when some address may
// soon take calls (connecting, its health not known yet), else the error
// calls fail with at once (Unavailable, grpc-go makes it; calls that wait
// for ready wait): the last connection failure when there is one.
func (p *pool) grpcWaitable() error {
	addrs, err := p.settled()
	if addrs == nil {
		return err
	}
	wait, err := p.wait(addrs, grpcLink)
	switch {
	case wait:
		return nil
	case err != nil:
		return errors.New("transport: no address of the backend is ready: " + err.Error())
	}
	return errors.New("transport: no address of the backend is ready")
}

// grpcLink is the state of grpc-go's SubConn of a, and why it failed.
func grpcLink(a *address) (linkState, error) {
	s := a.sub.Load()
	if s == nil {
		return linkMaking, nil
	}
	switch s.connectivity() {
	case connectivity.Idle, connectivity.Connecting:
		return linkConnecting, nil
	case connectivity.Ready:
		return linkReady, nil
	case connectivity.TransientFailure:
		if e := s.err.Load(); e != nil {
			return linkDown, *e
		}
		return linkDown, nil
	}
	return linkNone, nil
}
