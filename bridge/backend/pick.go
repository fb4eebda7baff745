package backend

import (
	"cmp"
	"context"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// Balance policies: how a call picks one of a backend's addresses.
const (
	// LeastRequest picks the address with fewer calls in flight of two
	// distinct ones drawn at random (Envoy's LEAST_REQUEST with
	// choice_count 2), passing over one whose calls are not being
	// answered (see stalled). The default.
	LeastRequest = "least_request"
	// RoundRobin takes the addresses in turn.
	RoundRobin = "round_robin"
	// PickFirst sends every call to the first address that works.
	PickFirst = "pick_first"
)

// Balances lists the policies, the default first.
func Balances() []string { return []string{LeastRequest, RoundRobin, PickFirst} }

// A view is a snapshot of the pool for picking: built under mu at every
// change of the set, of an address's connections, health or ejection,
// read by every pick of both paths without a lock.
type view struct {
	// one is the only address when the set has one that may take calls
	// (healthy or unwatched): the direct path calls it as the bridge
	// always called its backend, waiting for a dial when it has no
	// connection.
	one *address
	// ready are the addresses whose direct client is ready to take
	// calls, grpc those whose SubConn is, in the set's order: healthy
	// and not ejected (or, when every one that is up is ejected, those).
	ready, grpc []*address
	// changed is closed when the view is replaced.
	changed chan struct{}
}

// rebuildLocked makes the view of the pool as it is now.
func (p *pool) rebuildLocked() {
	v := &view{changed: make(chan struct{})}
	var ready, grpc []*address // up but ejected
	for _, a := range p.addrs {
		if p.closed || !p.serving(a) {
			continue
		}
		ejected := a.isEjected()
		if a.client != nil && a.client.State() == unary.Ready {
			if ejected {
				ready = append(ready, a)
			} else {
				v.ready = append(v.ready, a)
			}
		}
		if s := a.sub.Load(); s != nil && s.ready() {
			if ejected {
				grpc = append(grpc, a)
			} else {
				v.grpc = append(v.grpc, a)
			}
		}
	}
	// Ejected addresses take the calls rather than none when every
	// address that is up is ejected (the others down or not serving).
	if len(v.ready) == 0 {
		v.ready = ready
	}
	if len(v.grpc) == 0 {
		v.grpc = grpc
	}
	if len(p.addrs) == 1 && p.addrs[0].client != nil && p.serving(p.addrs[0]) && !p.closed {
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

var errClosedPool = status.Error(codes.Unavailable, "transport: the client is closed")

// pick returns the address a direct call goes to: by the policy among
// those ready; when none is, it waits while some are connecting, and
// fails at once when every one is down or not serving.
func (p *pool) pick(ctx context.Context) (*address, error) {
	for {
		v := p.view.Load()
		if v.one != nil {
			return v.one, nil
		}
		if len(v.ready) > 0 {
			return p.choose(v.ready), nil
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

// choose picks one of ready by the policy, for either path. An address
// whose calls are not being answered (stalled) is passed over while
// another is not.
func (p *pool) choose(ready []*address) *address {
	n := uint32(len(ready))
	if n == 1 {
		return ready[0]
	}
	var now, after int64 // read once, when an address has calls waiting
	// silence is how long a has had calls waiting without answering any.
	silence := func(a *address) int64 {
		if a.waiting.Load() == 0 {
			return 0
		}
		if now == 0 {
			now, after = p.now(), p.stallAfter()
		}
		return now - a.quiet.Load()
	}
	stalled := func(a *address) bool { return silence(a) > after }
	switch p.opts.Balance {
	case PickFirst:
		for _, a := range ready {
			if !stalled(a) {
				return a
			}
		}
		return ready[0]
	case RoundRobin:
		i := p.rr.Add(1)
		for k := range n {
			if a := ready[(i+k)%n]; !stalled(a) {
				return a
			}
		}
		return ready[i%n]
	}
	r := rand.Uint64()
	i := uint32(r) % n
	j := (i + 1 + uint32(r>>32)%(n-1)) % n
	a, b := ready[i], ready[j]
	qa, qb := silence(a), silence(b)
	switch sa, sb := qa > after, qb > after; {
	case sa && !sb:
		return b
	case sb && !sa:
		return a
	case sa && sb:
		for k := uint32(1); k < n; k++ { // the others, from j on
			if x := (j + k) % n; x != i && !stalled(ready[x]) {
				return ready[x]
			}
		}
	}
	// Fewer calls in flight; of two with as many, the one that has not
	// been silent for long (a quarter of the stall time) rather than one
	// that has: the first silence of a frozen address, whose count of
	// calls waiting is often as low as a busy one's.
	if fa, fb := a.inFlight.Load(), b.inFlight.Load(); fb < fa || fb == fa && qa-qb > after/4 {
		return b
	}
	return a
}

// defaultStallAfter is the least time an address whose unary calls are
// waiting may go without answering any before the picker passes it over.
const defaultStallAfter = 50 * time.Millisecond

// stallFactor times the backend's recent latency is how long an address
// with calls waiting may go without answering, when longer than
// StallAfter.
const stallFactor = 8

// stallAfter is how long, in ns, an address whose unary calls are waiting
// may go without answering before picks pass it over: far longer than
// the backend's recent latency, and at least StallAfter. A frozen or
// partitioned address keeps its connection and answers nothing; its
// count of calls in flight alone cannot tell it from an idle one.
func (p *pool) stallAfter() int64 {
	return max(int64(p.opts.StallAfter), stallFactor*p.latency.Load())
}

// sample takes d, the time a unary call took to be answered, into the
// backend's recent latency: an exponentially weighted average (1/8 for
// the new sample), written without a lock (a lost sample is no harm).
func (p *pool) sample(d int64) {
	if old := p.latency.Load(); old > 0 {
		d = old + (d-old)/8
	}
	p.latency.Store(max(d, 1))
}

// waitable returns nil when some address may soon take direct calls (it
// is connecting, or its health is not known yet), else the status calls
// fail with at once: the last dial's failure when there is one.
func (p *pool) waitable() error {
	addrs, err := p.settled()
	if addrs == nil {
		return err
	}
	if wait, err := p.wait(addrs, directLink); !wait {
		return cmp.Or(err, errNoAddress)
	}
	return nil
}

// A linkState is what one path's connection to an address can do with a
// call now.
type linkState uint8

const (
	linkNone       linkState = iota // the path has none to the address
	linkMaking                      // being made
	linkConnecting                  // idle or connecting: it may take calls soon
	linkReady
	linkDown // failed: no dial before its backoff ends
)

// directLink is the state of the direct client of a, and why it failed.
func directLink(a *address) (linkState, error) {
	if a.client == nil {
		return linkNone, nil
	}
	switch a.client.State() {
	case unary.Idle, unary.Connecting:
		return linkConnecting, nil
	case unary.Ready:
		return linkReady, nil
	case unary.Down:
		return linkDown, a.client.Err() // not under mu: the client's lock comes first
	}
	return linkNone, nil
}

// wait reports whether a call of the path link may wait for one of addrs
// (connecting, its health not known yet, or ready and serving but not in
// the view yet: its rebuild is under way); if not, it returns the last
// connection failure of the path, if any.
func (p *pool) wait(addrs []*address, link func(*address) (linkState, error)) (bool, error) {
	var last error
	for _, a := range addrs {
		st, why := link(a)
		switch st {
		case linkMaking:
			return true, nil
		case linkConnecting, linkReady:
			if !p.opts.HealthCheck || a.health.Load() != healthNotServing {
				return true, nil
			}
		case linkDown:
			if why != nil {
				last = why
			}
		}
	}
	return false, last
}

// settled returns the set when the pool has one to wait on; otherwise
// nil and what a pick answers: nil to wait for the first resolution, or
// the status calls fail with.
func (p *pool) settled() ([]*address, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case p.closed:
		return nil, errClosedPool
	case !p.resolved && p.resolveErr != "":
		return nil, errNoAddress
	case !p.resolved:
		return nil, nil // the first resolution is under way
	}
	return slices.Clone(p.addrs), nil
}
