package backend

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// Balance policies: how a call picks one of a backend's addresses.
const (
	// LeastRequest picks the address with fewer calls in flight of two
	// drawn at random (with replacement), as Envoy's LEAST_REQUEST with
	// choice_count 2. The default.
	LeastRequest = "least_request"
	// RoundRobin takes the addresses in turn.
	RoundRobin = "round_robin"
	// PickFirst sends every call to the first address that works.
	PickFirst = "pick_first"
)

// Balances lists the policies, the default first.
func Balances() []string { return []string{LeastRequest, RoundRobin, PickFirst} }

// A pool is the set of addresses of one backend: a resolver loop keeps it
// (every ResolveInterval, and at once when an address's connection fails
// or sends GOAWAY), the direct path picks one of its ready addresses per
// call, and grpc-go's ClientConn gets the same list through a manual
// resolver. An address removed from the set drains: its calls in flight
// finish, no new ones go to it.
type pool struct {
	name   string
	target target
	opts   poolOptions
	log    *slog.Logger
	dns    *net.Resolver
	// manual feeds grpc-go's ClientConn; nil when the ClientConn resolves
	// the target itself (opaque targets, NewDirectConn).
	manual *manual.Resolver

	view  atomic.Pointer[view]                        // what a pick reads, rebuilt at every change
	byKey atomic.Pointer[map[netip.AddrPort]*address] // the addresses by IP and port, for grpc-go's stats
	rr    atomic.Uint32                               // round robin's turn

	resolveNow chan struct{}
	stop       context.CancelFunc
	wg         sync.WaitGroup // the loop, health watches and drains

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
	HealthCheck     bool
	HealthService   string
	// Direct makes one unary client per address, for the direct path.
	Direct bool
	Unary  unary.Options
	// Health dials the health watch of an address; nil turns it off.
	Health healthDialer
}

// A view is a snapshot of the pool for picking: built under mu at every
// change of the set, of an address's state or of its health, read by
// every call without a lock.
type view struct {
	// one is the only address when the set has one that may take calls
	// (healthy or unwatched): it is called as the bridge always called
	// its backend, waiting for a dial when it has no connection.
	one *address
	// ready are the addresses ready to take calls, in the set's order.
	ready []*address
	// changed is closed when the view is replaced.
	changed chan struct{}
}

// An address is one of a pool's.
type address struct {
	addr   string
	key    netip.AddrPort // for grpc-go's stats; invalid for opaque targets
	client *unary.Client  // nil without the direct path
	health atomic.Int32   // a health value, with health_check
	calls  atomic.Uint64  // calls sent to it, both paths
	// grpcConns and grpcInFlight count grpc-go's transports to it and
	// its calls in flight there.
	grpcConns, grpcInFlight atomic.Int32
	draining                atomic.Bool
	state                   atomic.Int32 // the client's last unary.State, for stateChanged
	// ctx ends the health watch, with stopHealth; nil without one.
	ctx        context.Context
	stopHealth context.CancelFunc
}

// Health values of an address.
const (
	healthUnknown int32 = iota // not known yet, or the watch failed
	healthServing
	healthNotServing
)

func newPool(name string, t target, opts poolOptions, log *slog.Logger) *pool {
	if opts.Balance == "" {
		opts.Balance = LeastRequest
	}
	p := &pool{name: name, target: t, opts: opts, log: log, dns: t.resolver(),
		resolveNow: make(chan struct{}, 1), changed: make(chan struct{})}
	p.view.Store(&view{changed: p.changed})
	return p
}

// start resolves the target once and starts the loop that keeps the set.
func (p *pool) start() {
	ctx, cancel := context.WithCancel(context.Background())
	p.stop = cancel
	p.resolve(ctx)
	p.wg.Go(func() { p.loop(ctx) })
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
		if p.failed() {
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

func (p *pool) failed() bool {
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
	var fresh []*address
	next := make([]*address, 0, len(addrs))
	for _, a := range addrs {
		i := slices.IndexFunc(p.addrs, func(x *address) bool { return x.addr == a })
		if i >= 0 {
			next = append(next, p.addrs[i])
			continue
		}
		na := p.newAddress(a)
		next = append(next, na)
		fresh = append(fresh, na)
		added = append(added, a)
	}
	var gone []*address
	for _, old := range p.addrs {
		if !slices.Contains(next, old) {
			old.draining.Store(true)
			gone = append(gone, old)
			removed = append(removed, old.addr)
		}
	}
	first := p.addrs == nil
	p.addrs = next
	p.draining = append(p.draining, gone...)
	p.indexLocked()
	for _, a := range p.addrs {
		if a.client != nil {
			a.client.SetNoWait(len(p.addrs) > 1)
		}
	}
	p.rebuildLocked()
	p.mu.Unlock()

	for _, a := range fresh {
		if a.stopHealth != nil {
			p.wg.Go(func() { p.watchHealth(a) })
		}
	}
	for _, a := range gone {
		p.wg.Go(func() { p.drain(a) })
	}
	if p.manual != nil && (len(added) > 0 || len(removed) > 0) {
		p.manual.UpdateState(resolver.State{Endpoints: endpoints(addrs)})
	}
	p.connect()
	switch {
	case first:
		p.log.Info("backend addresses", "backend", p.name, "target", p.target.String(), "addresses", addrs, "balance", p.opts.Balance)
	case len(added) > 0 || len(removed) > 0:
		p.log.Info("backend addresses changed", "backend", p.name, "added", added, "removed", removed, "addresses", len(addrs))
	}
}

func endpoints(addrs []string) []resolver.Endpoint {
	out := make([]resolver.Endpoint, len(addrs))
	for i, a := range addrs {
		out[i] = resolver.Endpoint{Addresses: []resolver.Address{{Addr: a}}}
	}
	return out
}

// newAddress makes the address a, with its direct client.
func (p *pool) newAddress(a string) *address {
	na := &address{addr: a}
	if ap, err := netip.ParseAddrPort(a); err == nil {
		na.key = ap
	}
	if p.opts.HealthCheck && p.opts.Health != nil {
		na.ctx, na.stopHealth = context.WithCancel(context.Background())
	}
	if p.opts.Direct {
		o := p.opts.Unary
		if p.target.kind != opaque && o.Authority == "" {
			// As the one client of the target had it: the TLS server name,
			// else the target's host:port, whichever address is dialed.
			//lint:ignore SA1019 deprecated for grpc.WithAuthority, but still what grpc-go's channel uses
			o.Authority = cmp.Or(o.Creds.Info().ServerName, p.target.authority)
		}
		o.OnState = func(s unary.State) { p.stateChanged(na, s) }
		c, err := unary.New(a, o)
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
	closed := p.closed
	if s == unary.Idle && !closed {
		p.wg.Go(p.connect) // not under the client's lock
	}
	p.mu.Unlock()
}

// connect has the addresses that should have a connection dial one: all
// of them, or with pick_first those up to the first that works.
func (p *pool) connect() {
	p.mu.Lock()
	addrs := slices.Clone(p.addrs)
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return
	}
	for _, a := range addrs {
		if a.client == nil {
			continue
		}
		s := a.client.State()
		if s == unary.Idle {
			a.client.Connect()
			s = a.client.State()
		}
		if p.opts.Balance == PickFirst && (s == unary.Ready || s == unary.Connecting) {
			return
		}
	}
}

// rebuildLocked makes the view of the pool as it is now.
func (p *pool) rebuildLocked() {
	v := &view{changed: make(chan struct{})}
	for _, a := range p.addrs {
		if a.client != nil && a.client.State() == unary.Ready && p.serving(a) {
			v.ready = append(v.ready, a)
		}
	}
	if len(p.addrs) == 1 && p.addrs[0].client != nil && p.serving(p.addrs[0]) && !p.closed {
		// One address: called as the bridge always called its backend.
		v.one = p.addrs[0]
	}
	close(p.changed)
	p.changed = v.changed
	p.view.Store(v)
}

// serving reports whether a may take calls as far as its health goes.
func (p *pool) serving(a *address) bool {
	return !p.opts.HealthCheck || a.health.Load() == healthServing
}

// errNoAddress is the status of calls when no address can take them.
var errNoAddress = status.Error(codes.Unavailable, "transport: no address of the backend is ready")

// maxPicks bounds the addresses a call that was never sent tries.
const maxPicks = 4

// pick returns the address a call goes to: by the policy among those
// ready; when none is, it waits while some are connecting, and fails at
// once when every one is down or not serving.
func (p *pool) pick(ctx context.Context) (*address, error) {
	for {
		v := p.view.Load()
		if v.one != nil {
			return v.one, nil
		}
		if n := uint32(len(v.ready)); n > 0 {
			return p.choose(v.ready, n), nil
		}
		if err := p.waitable(); err != nil {
			return nil, err
		}
		select {
		case <-v.changed:
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded")
			}
			return nil, status.Error(codes.Canceled, "context canceled")
		}
	}
}

// take picks the address a call goes to, as pick, and counts the call
// among the address's calls (jsonrpc_bridge_backend_address_calls_total).
func (p *pool) take(ctx context.Context) (*address, error) {
	a, err := p.pick(ctx)
	if err == nil {
		a.calls.Add(1)
	}
	return a, err
}

func (p *pool) choose(ready []*address, n uint32) *address {
	switch p.opts.Balance {
	case PickFirst:
		return ready[0]
	case RoundRobin:
		return ready[p.rr.Add(1)%n]
	}
	if n == 1 {
		return ready[0]
	}
	r := rand.Uint64()
	a, b := ready[uint32(r)%n], ready[uint32(r>>32)%n]
	if b.client.InFlight() < a.client.InFlight() {
		return b
	}
	return a
}

// waitable returns nil when some address may soon take calls (it is
// connecting, or its health is not known yet), else the status calls fail
// with at once: the last dial's failure when there is one.
func (p *pool) waitable() error {
	p.mu.Lock()
	closed, resolved, resolveErr := p.closed, p.resolved, p.resolveErr
	addrs := slices.Clone(p.addrs)
	p.mu.Unlock()
	switch {
	case closed:
		return errClosedPool
	case !resolved && resolveErr != "":
		return errNoAddress
	case !resolved:
		return nil // the first resolution is under way
	}
	var last error
	for _, a := range addrs {
		if a.client == nil {
			continue
		}
		h := a.health.Load()
		switch a.client.State() {
		case unary.Idle, unary.Connecting:
			if !p.opts.HealthCheck || h != healthNotServing {
				return nil
			}
		case unary.Ready:
			if p.opts.HealthCheck && h == healthUnknown {
				return nil
			}
		case unary.Down:
			if err := a.client.Err(); err != nil { // not under mu: the client's lock comes first
				last = err
			}
		}
	}
	if last != nil {
		return last
	}
	return errNoAddress
}

var errClosedPool = status.Error(codes.Unavailable, "transport: the client is closed")

// invoke makes c on a picked address; a call that was never sent goes to
// another.
func (p *pool) invoke(ctx context.Context, c *Call) error {
	for attempt := 1; ; attempt++ {
		a, err := p.take(ctx)
		if err != nil {
			c.Err = err
			return err
		}
		err = a.client.Invoke(ctx, c)
		if err == nil || attempt == maxPicks || !c.Unsent() || ctx.Err() != nil || p.view.Load().one == a {
			return err
		}
	}
}

// drain closes a, removed from the set, once its calls in flight have
// ended.
func (p *pool) drain(a *address) {
	if a.stopHealth != nil {
		a.stopHealth()
	}
	// Calls that picked it just before it left may still be queueing.
	time.Sleep(100 * time.Millisecond)
	for a.client != nil && a.client.InFlight() > 0 {
		time.Sleep(50 * time.Millisecond)
	}
	if a.client != nil {
		a.client.Close()
	}
	p.mu.Lock()
	p.draining = slices.DeleteFunc(p.draining, func(x *address) bool { return x == a })
	p.indexLocked()
	p.mu.Unlock()
}

// close stops the loop and closes every address.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	all := slices.Concat(p.addrs, p.draining)
	p.rebuildLocked()
	p.mu.Unlock()
	if p.stop != nil {
		p.stop()
	}
	for _, a := range all {
		a.draining.Store(true)
		if a.stopHealth != nil {
			a.stopHealth()
		}
		if a.client != nil {
			a.client.Close()
		}
	}
	p.wg.Wait()
}

// lookup returns the address of the set (or draining) at ap, or nil.
func (p *pool) lookup(ap netip.AddrPort) *address {
	if !ap.IsValid() {
		return nil
	}
	if m := p.byKey.Load(); m != nil {
		return (*m)[ap]
	}
	return nil
}

// indexLocked rebuilds the index of lookup.
func (p *pool) indexLocked() {
	m := make(map[netip.AddrPort]*address, len(p.addrs)+len(p.draining))
	for _, a := range slices.Concat(p.draining, p.addrs) {
		if a.key.IsValid() {
			m[a.key] = a
		}
	}
	p.byKey.Store(&m)
}

// all returns the addresses of the set.
func (p *pool) all() []*address {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.addrs)
}

// String names the pool in errors.
func (p *pool) String() string { return fmt.Sprintf("backend %q", p.name) }
