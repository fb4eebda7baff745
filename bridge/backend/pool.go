package backend

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/attributes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// A pool is the set of addresses of one backend, and the one balancer of
// both call paths: a resolver loop keeps the set (every ResolveInterval,
// and at once when an address's connection fails or sends GOAWAY), health
// watches and the outlier detector take addresses out of the rotation, and
// the picker (pick.go) chooses one address per call, whether the direct
// client makes it or grpc-go (whose ClientConn gets the same set through
// a manual resolver, and the pool as its balancer: balancer.go). An
// address removed from the set drains: its calls in flight finish, on
// both paths, no new ones go to it.
type pool struct {
	name   string
	target target
	opts   poolOptions
	log    *slog.Logger
	dns    *net.Resolver
	// manual feeds grpc-go's ClientConn, the pool in its state's
	// attributes; nil when the ClientConn resolves the target itself
	// (opaque targets).
	manual *manual.Resolver
	epoch  time.Time // the start of the pool's clock (now)

	view    atomic.Pointer[view] // what a pick reads, rebuilt at every change
	rr      atomic.Uint32        // round robin's turn
	latency atomic.Int64         // the recent time unary calls take to be answered, in ns (see sample)

	// ctx is the pool's lifetime, ended by close: the loop's, and the
	// health watches'.
	ctx        context.Context
	stop       context.CancelFunc
	resolveNow chan struct{}
	wg         sync.WaitGroup // the loop, health watches, drains and connects

	mu         sync.Mutex
	addrs      []*address // the current set, sorted
	draining   []*address // removed, with calls still in flight
	resolved   bool       // a resolution has succeeded
	resolveErr string     // why the last resolution failed; "" when it did not
	changed    chan struct{}
	closed     bool
}

// poolOptions configure a pool.
type poolOptions struct {
	Balance         string
	ResolveInterval time.Duration
	// HealthCheck watches grpc.health.v1.Health on grpc-go's connection
	// to each address, for HealthService.
	HealthCheck   bool
	HealthService string
	// Direct makes one unary client per address, for the direct path.
	Direct  bool
	Unary   unary.Options
	Outlier Outlier
	// StallAfter is how long, at least, an address whose unary calls are
	// waiting may go without answering any before the picker passes it
	// over (see stalled); 0 means defaultStallAfter.
	StallAfter time.Duration
}

// poolKey is the key of the pool in the attributes of the resolver state
// of its ClientConn, where its balancer finds it.
type poolKey struct{}

func newPool(name string, t target, opts poolOptions, log *slog.Logger) *pool {
	if opts.Balance == "" {
		opts.Balance = LeastRequest
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = defaultStallAfter
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &pool{name: name, target: t, opts: opts, log: log, dns: t.resolver(), epoch: time.Now(),
		ctx: ctx, stop: cancel, resolveNow: make(chan struct{}, 1), changed: make(chan struct{})}
	p.view.Store(&view{changed: p.changed})
	return p
}

// now is the time on the pool's clock, in nanoseconds: monotonic.
func (p *pool) now() int64 { return int64(time.Since(p.epoch)) }

// start resolves the target once and starts the loop that keeps the set.
func (p *pool) start() {
	p.resolve(p.ctx)
	p.wg.Go(func() { p.loop(p.ctx) })
}

// loop re-resolves the target every ResolveInterval, at once when asked
// (at most once a second), and after a failure with a backoff.
func (p *pool) loop(ctx context.Context) {
	if p.target.kind != named {
		return
	}
	failures, last := 0, time.Now()
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		wait := p.opts.ResolveInterval
		if p.resolveFailed() {
			failures++
			wait = min(time.Second<<min(failures-1, 5), 30*time.Second)
			if p.opts.ResolveInterval > 0 {
				wait = min(wait, p.opts.ResolveInterval)
			}
		} else {
			failures = 0
		}
		var tick <-chan time.Time
		if wait > 0 {
			t.Reset(wait - time.Since(last))
			tick = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-tick:
		case <-p.resolveNow:
			t.Stop()
			if d := time.Second - time.Since(last); d > 0 { // at most one resolution a second
				select {
				case <-ctx.Done():
					return
				case <-time.After(d):
				}
			}
		}
		last = time.Now()
		p.resolve(ctx)
	}
}

func (p *pool) resolveFailed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.resolveErr != ""
}

// refresh asks the loop to resolve again now.
func (p *pool) refresh() {
	select {
	case p.resolveNow <- struct{}{}:
	default:
	}
}

// resolve resolves the target and installs the set it finds. A failure,
// or no address, keeps the set as it is.
func (p *pool) resolve(ctx context.Context) {
	addrs, err := p.target.resolve(ctx, p.dns)
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		p.mu.Lock()
		p.resolveErr = err.Error()
		kept := len(p.addrs)
		p.rebuildLocked()
		p.mu.Unlock()
		p.log.Warn("cannot resolve the backend's address: keeping the addresses it had", "backend", p.name,
			"target", p.target.String(), "addresses", kept, "error", err)
		return
	}
	p.install(addrs)
}

// install makes addrs the set: new addresses are connected, removed ones
// drain.
func (p *pool) install(addrs []string) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.resolveErr, p.resolved = "", true
	var added, removed []string
	next := make([]*address, 0, len(addrs))
	for _, a := range addrs {
		i := slices.IndexFunc(p.addrs, func(x *address) bool { return x.addr == a })
		if i >= 0 {
			next = append(next, p.addrs[i])
			continue
		}
		next = append(next, p.newAddress(a))
		added = append(added, a)
	}
	var gone []*address
	for _, old := range p.addrs {
		if !slices.Contains(next, old) {
			old.draining.Store(true)
			if old.back != nil {
				old.back.Stop()
			}
			gone = append(gone, old)
			removed = append(removed, old.addr)
		}
	}
	first := p.addrs == nil
	p.addrs = next
	p.draining = append(p.draining, gone...)
	for _, a := range p.addrs {
		if a.client != nil {
			a.client.SetNoWait(len(p.addrs) > 1)
		}
	}
	p.rebuildLocked()
	p.mu.Unlock()

	for _, a := range gone {
		p.wg.Go(func() { p.drain(a) })
	}
	if p.manual != nil && (first || len(added) > 0 || len(removed) > 0) {
		// Not under mu: the balancer reads the set at once (sync).
		p.manual.UpdateState(p.resolverState(addrs))
	}
	p.connect()
	switch {
	case first:
		p.log.Info("backend addresses", "backend", p.name, "target", p.target.String(), "addresses", addrs, "balance", p.opts.Balance)
	case len(added) > 0 || len(removed) > 0:
		p.log.Info("backend addresses changed", "backend", p.name, "added", added, "removed", removed, "addresses", len(addrs))
	}
}

// resolverState is the state grpc-go's ClientConn gets of the set addrs:
// its endpoints, and the pool for its balancer.
func (p *pool) resolverState(addrs []string) resolver.State {
	eps := make([]resolver.Endpoint, len(addrs))
	for i, a := range addrs {
		eps[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
	}
	return resolver.State{Endpoints: eps, Attributes: attributes.New(poolKey{}, p)}
}

// newAddress makes the address a, with its direct client.
func (p *pool) newAddress(a string) *address {
	na := &address{addr: a}
	if p.opts.Direct {
		o := p.opts.Unary
		if o.Authority == "" {
			// As the one client of the target had it: the TLS server name,
			// else the target's host:port, whichever address is dialed.
			//lint:ignore SA1019 deprecated for grpc.WithAuthority, but still what grpc-go's channel uses
			o.Authority = cmp.Or(o.Creds.Info().ServerName, p.target.authority)
		}
		o.OnState = func(s unary.State) { p.stateChanged(na, s) }
		o.OnAnswer = func() { na.quiet.Store(p.now()) }
		network, addr := dialAddress(a)
		c, err := unary.New(network, addr, o)
		if err != nil { // cannot be: a was checked when the target was
			p.log.Error("cannot make a client of the backend's address", "backend", p.name, "address", a, "error", err)
		} else {
			na.client = c
			c.SetNoWait(true)
		}
	}
	return na
}

// stateChanged takes a new state of a's client, with its lock held: a
// connection that failed or drains has the target resolved again.
func (p *pool) stateChanged(a *address, s unary.State) {
	if was := unary.State(a.state.Swap(int32(s))); was == unary.Ready && s != unary.Ready && s != unary.Shutdown && !a.draining.Load() {
		p.refresh()
	}
	p.mu.Lock()
	p.rebuildLocked()
	if s == unary.Idle && !p.closed {
		p.wg.Go(p.connect) // not under the client's lock
	}
	p.mu.Unlock()
}

// connect has the addresses that should have connections dial them, on
// both paths: all of them, or with pick_first those up to the first that
// works.
func (p *pool) connect() {
	p.mu.Lock()
	addrs := slices.Clone(p.addrs)
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return
	}
	for _, a := range addrs {
		up := false
		if a.client != nil {
			s := a.client.State()
			if s == unary.Idle {
				a.client.Connect()
				s = a.client.State()
			}
			up = s == unary.Ready || s == unary.Connecting
		}
		if s := a.sub.Load(); s != nil {
			st := s.connectivity()
			if st == connectivity.Idle {
				s.sc.Connect()
				st = connectivity.Connecting
			}
			if a.client == nil {
				up = st == connectivity.Ready || st == connectivity.Connecting
			}
		}
		if p.opts.Balance == PickFirst && up {
			return
		}
	}
}

// drain closes a, removed from the set, once its calls in flight have
// ended, on both paths (grpc-go's SubConn of a was shut down gracefully by
// the balancer: its calls finish).
func (p *pool) drain(a *address) {
	// Calls that picked it just before it left may still be starting.
	time.Sleep(100 * time.Millisecond)
	for a.inFlight.Load() > 0 {
		select {
		case <-p.ctx.Done():
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	if a.client != nil {
		a.client.Close()
	}
	p.mu.Lock()
	p.draining = slices.DeleteFunc(p.draining, func(x *address) bool { return x == a })
	p.mu.Unlock()
}

// close stops the loop and closes every address.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	all := slices.Concat(p.addrs, p.draining)
	for _, a := range all {
		if a.back != nil {
			a.back.Stop()
		}
	}
	p.rebuildLocked()
	p.mu.Unlock()
	p.stop()
	for _, a := range all {
		a.draining.Store(true)
		if a.client != nil {
			a.client.Close()
		}
	}
	p.wg.Wait()
}

// all returns the addresses of the set.
func (p *pool) all() []*address {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.addrs)
}

// String names the pool in errors.
func (p *pool) String() string { return fmt.Sprintf("backend %q", p.name) }
