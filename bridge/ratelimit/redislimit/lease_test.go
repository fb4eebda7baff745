package redislimit

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// The lease logic (lease.go) against an in-process store: fakeGCRA runs
// redis_rate's two scripts (its lua.go) on a clock that moves only when
// a test moves it, so that what the store allows is exact and the round
// trips can be held and counted. The tests with a real redis-server
// (redislimit_test.go) hold the same Limiter to the real scripts.

// fakeGCRA is redis_rate's AllowN and AllowAtMost, in float64 seconds as
// the scripts compute, on a frozen clock.
type fakeGCRA struct {
	mu    sync.Mutex
	now   float64            // the store's clock, in seconds
	tat   map[string]float64 // the scripts' key: the theoretical arrival time
	trips []fakeTrip         // the calls' round trips (not the probe's), in order
	err   error              // when set, every round trip fails with it
	// hold, when set, gets each call's round trip before the store
	// decides it, and the trip waits until its release is closed.
	hold chan fakeTrip
}

// fakeTrip is one round trip of a call.
type fakeTrip struct {
	method  string // AllowN or AllowAtMost
	n       int
	release chan struct{}
}

var _ gcra = (*redis_rate.Limiter)(nil)

func newFakeGCRA() *fakeGCRA { return &fakeGCRA{now: 1e6, tat: map[string]float64{}} }

func (f *fakeGCRA) AllowN(ctx context.Context, key string, limit redis_rate.Limit, n int) (*redis_rate.Result, error) {
	return f.trip(ctx, "AllowN", key, limit, n)
}

func (f *fakeGCRA) AllowAtMost(ctx context.Context, key string, limit redis_rate.Limit, n int) (*redis_rate.Result, error) {
	return f.trip(ctx, "AllowAtMost", key, limit, n)
}

func (f *fakeGCRA) trip(ctx context.Context, method, key string, limit redis_rate.Limit, n int) (*redis_rate.Result, error) {
	f.mu.Lock()
	hold := f.hold
	if key != keyPrefix+":probe" {
		f.trips = append(f.trips, fakeTrip{method: method, n: n})
		if hold != nil {
			t := fakeTrip{method: method, n: n, release: make(chan struct{})}
			f.mu.Unlock()
			hold <- t
			<-t.release
			f.mu.Lock()
		}
	}
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	em := limit.Period.Seconds() / float64(limit.Rate)
	burstOffset := em * float64(limit.Burst)
	tat, ok := f.tat[key]
	if !ok {
		tat = f.now
	}
	tat = math.Max(tat, f.now)
	if method == "AllowN" {
		newTAT := tat + em*float64(n)
		diff := f.now - (newTAT - burstOffset)
		if diff/em < 0 {
			return &redis_rate.Result{Limit: limit, RetryAfter: seconds(-diff), ResetAfter: seconds(tat - f.now)}, nil
		}
		f.tat[key] = newTAT
		return &redis_rate.Result{Limit: limit, Allowed: n, Remaining: int(diff / em), RetryAfter: -1, ResetAfter: seconds(newTAT - f.now)}, nil
	}
	diff := f.now - (tat - burstOffset)
	remaining := diff / em
	if remaining < 1 {
		return &redis_rate.Result{Limit: limit, RetryAfter: seconds(em - diff), ResetAfter: seconds(tat - f.now)}, nil
	}
	cost := float64(n)
	if remaining < cost {
		cost, remaining = remaining, 0
	} else {
		remaining -= cost
	}
	f.tat[key] = tat + em*cost
	return &redis_rate.Result{Limit: limit, Allowed: int(cost), Remaining: int(remaining), RetryAfter: -1, ResetAfter: seconds(tat + em*cost - f.now)}, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// roundTrips returns the calls' round trips so far.
func (f *fakeGCRA) roundTrips() []fakeTrip {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeTrip(nil), f.trips...)
}

// holdTrips makes the calls' round trips wait (see hold), or not (nil).
func (f *fakeGCRA) holdTrips(hold chan fakeTrip) {
	f.mu.Lock()
	f.hold = hold
	f.mu.Unlock()
}

func (f *fakeGCRA) fail(err error) {
	f.mu.Lock()
	f.err = err
	f.mu.Unlock()
}

// fakeLimiter returns a Limiter of o deciding in a new fakeGCRA.
func fakeLimiter(t *testing.T, o Options) (*Limiter, *fakeGCRA) {
	t.Helper()
	f := newFakeGCRA()
	o.URL = "redis://fake:6379/0"
	o.setDefaults()
	l := newLimiter(o, f, func() error { return nil })
	t.Cleanup(func() { l.Close() })
	return l, f
}

// leaseOf is what the identity i holds of its lease now.
func (l *Limiter) leaseOf(i int) int {
	st := l.state(i)
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.lease
}

// queued is how many calls of the identity i wait for a round trip.
func (l *Limiter) queued(i int) int {
	st := l.state(i)
	st.mu.Lock()
	defer st.mu.Unlock()
	return len(st.queue)
}

var fakeAlice = ratelimit.Identity{Index: 0, Name: "alice"}

// TestLeaseSequential: calls one after another are mostly admitted from
// the lease, without a round trip; the store's burst is shared exactly
// between the calls admitted and the lease left; past it, the refusal is
// remembered and costs no round trip.
func TestLeaseSequential(t *testing.T) {
	const burst, calls = 1000, 3000
	l, f := fakeLimiter(t, Options{Limit: ratelimit.Limit{Rate: 0.01, Burst: burst}})
	admitted := 0
	for range calls {
		if ok, _ := l.Allow(t.Context(), fakeAlice, 1); ok {
			admitted++
		}
	}
	l.wg.Wait() // a refill of the lease may still be out
	trips := len(f.roundTrips())
	t.Logf("%d sequential calls: %d admitted in %d round trips, %d left in the lease", calls, admitted, trips, l.leaseOf(0))
	if got := admitted + l.leaseOf(0); got != burst {
		t.Errorf("admitted %d and %d in the lease: %d, want the burst (%d)", admitted, l.leaseOf(0), got, burst)
	}
	if admitted < burst-burst/10 {
		t.Errorf("admitted %d, want at least the burst (%d) less the most a lease holds", admitted, burst)
	}
	if trips > calls/10 {
		t.Errorf("%d round trips for %d calls: the lease did not save them", trips, calls)
	}
	if spent, wait := l.Spent(fakeAlice); !spent || wait < 99*time.Second {
		t.Errorf("Spent past the burst: got %v, %s; want true, about 100s", spent, wait)
	}
}

// TestLeaseBatching: the calls that arrive while the identity's round
// trip is out wait for it and then go together, in one AllowAtMost of
// their sum.
func TestLeaseBatching(t *testing.T) {
	l, f := fakeLimiter(t, Options{Limit: ratelimit.Limit{Rate: 0.01, Burst: 100}, MaxLease: -1})
	hold := make(chan fakeTrip)
	f.holdTrips(hold)
	var wg sync.WaitGroup
	var admitted atomic.Int64
	allow := func(n int) {
		wg.Go(func() {
			if ok, _ := l.Allow(context.Background(), fakeAlice, n); ok {
				admitted.Add(int64(n))
			}
		})
	}
	allow(1)
	first := <-hold
	const waiting = 10
	for i := range waiting {
		allow(1 + i%3)
	}
	await.Until(t, 5*time.Second, "the calls queued behind the round trip", func() bool { return l.queued(0) == waiting })
	close(first.release)
	second := <-hold
	close(second.release)
	wg.Wait()
	want := 0
	for i := range waiting {
		want += 1 + i%3
	}
	if first.method != "AllowN" || first.n != 1 {
		t.Errorf("first round trip: %s(%d), want AllowN(1): one call alone, all or nothing", first.method, first.n)
	}
	if second.method != "AllowAtMost" || second.n != want {
		t.Errorf("second round trip: %s(%d), want AllowAtMost(%d): the waiting calls together", second.method, second.n, want)
	}
	if n := len(f.roundTrips()); n != 2 {
		t.Errorf("%d round trips for %d calls, want 2", n, waiting+1)
	}
	if got := admitted.Load(); got != int64(1+want) {
		t.Errorf("admitted %d calls, want all %d", got, 1+want)
	}
}

// TestLeaseRefusal: one call past the limit is refused with the store's
// Retry-After, which is remembered: the calls after it are refused
// without a round trip, each told the time left.
func TestLeaseRefusal(t *testing.T) {
	const burst = 5
	l, f := fakeLimiter(t, Options{Limit: ratelimit.Limit{Rate: 0.01, Burst: burst}, Identities: 2, MaxLease: -1})
	for i := range burst {
		if ok, _ := l.Allow(t.Context(), fakeAlice, 1); !ok {
			t.Fatalf("call %d within the burst refused", i)
		}
	}
	ok, wait := l.Allow(t.Context(), fakeAlice, 1)
	if ok || wait != 100*time.Second {
		t.Errorf("past the burst at 0.01 a second: got %v, retry after %s; want a refusal, retry after 100s", ok, wait)
	}
	for range 100 {
		if ok, wait := l.Allow(t.Context(), fakeAlice, 1); ok || wait <= 99*time.Second || wait > 100*time.Second {
			t.Fatalf("a call within the remembered Retry-After: got %v, %s; want a refusal, up to 100s", ok, wait)
		}
	}
	trips := f.roundTrips()
	// Another identity has its own limit.
	if ok, _ := l.Allow(t.Context(), ratelimit.Identity{Index: 1, Name: "bob"}, burst); !ok {
		t.Error("another identity's burst: refused, want admitted")
	}
	if len(trips) != burst+1 {
		t.Errorf("%d round trips, want %d: one a call up to the refusal, none after it", len(trips), burst+1)
	}
	for i, tr := range trips {
		if tr.method != "AllowN" || tr.n != 1 {
			t.Errorf("round trip %d: %s(%d), want AllowN(1): without a lease, each call alone", i, tr.method, tr.n)
		}
	}
}

// TestLeaseWaits: the calls of one round trip that the store did not
// admit are each told how long until theirs would pass: all n of them
// one emission interval apart; and at the limit the next call alone asks
// all or nothing (AllowN), as AllowAtMost short of what it asks spends a
// fraction of a call more than it allows.
func TestLeaseWaits(t *testing.T) {
	const em = 100 * time.Second // at 0.01 a second
	for _, tt := range []struct {
		name   string
		first  int           // the call whose round trip the others wait for
		others []int         // the calls that wait, each n
		ok     []bool        // whether each of them passed
		wait   time.Duration // how long the last of them is told
	}{
		// The store has one call left for the three of the next trip:
		// the first passes, the second is 2 calls away.
		{"some", 2, []int{1, 2}, []bool{true, false}, 2 * em},
		// None left: the store's Retry-After for the first of them, one
		// interval more for each further call.
		{"none", 3, []int{1, 3}, []bool{false, false}, em + 2*em},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, f := fakeLimiter(t, Options{Limit: ratelimit.Limit{Rate: 0.01, Burst: 3}, MaxLease: -1})
			hold := make(chan fakeTrip)
			f.holdTrips(hold)
			type result struct {
				ok   bool
				wait time.Duration
			}
			results := make([]result, len(tt.others))
			var wg sync.WaitGroup
			wg.Go(func() { l.Allow(context.Background(), fakeAlice, tt.first) })
			first := <-hold
			for i, n := range tt.others {
				wg.Go(func() {
					ok, wait := l.Allow(context.Background(), fakeAlice, n)
					results[i] = result{ok, wait}
				})
				await.Until(t, 5*time.Second, "the call queued", func() bool { return l.queued(0) == i+1 })
			}
			close(first.release)
			second := <-hold
			close(second.release)
			wg.Wait()
			for i, r := range results {
				if r.ok != tt.ok[i] {
					t.Errorf("call %d (n %d): got ok %v, want %v", i, tt.others[i], r.ok, tt.ok[i])
				}
			}
			if last := results[len(results)-1]; last.wait != tt.wait {
				t.Errorf("the last call is told to wait %s, want %s", last.wait, tt.wait)
			}
			if tt.name != "some" {
				return
			}
			f.holdTrips(nil)
			l.Allow(context.Background(), fakeAlice, 1)
			trips := f.roundTrips()
			if last := trips[len(trips)-1]; last.method != "AllowN" || last.n != 1 {
				t.Errorf("the call after a short round trip: %s(%d), want AllowN(1)", last.method, last.n)
			}
		})
	}
}

// TestLeaseConcurrent: calls of one identity from many goroutines share
// the round trips, and the store's burst is shared exactly between the
// calls admitted and the lease left.
func TestLeaseConcurrent(t *testing.T) {
	const burst, callers, each = 1000, 32, 60
	l, f := fakeLimiter(t, Options{Limit: ratelimit.Limit{Rate: 0.01, Burst: burst}})
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				if ok, _ := l.Allow(context.Background(), fakeAlice, 1); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	l.wg.Wait()
	trips := len(f.roundTrips())
	t.Logf("%d calls from %d goroutines: %d admitted in %d round trips", callers*each, callers, admitted.Load(), trips)
	if got := int(admitted.Load()) + l.leaseOf(0); got != burst {
		t.Errorf("admitted %d and %d in the lease: %d, want the burst (%d)", admitted.Load(), l.leaseOf(0), got, burst)
	}
	if trips >= callers*each/10 {
		t.Errorf("%d round trips for %d calls: calls arriving together did not share them", trips, callers*each)
	}
}

// TestLeaseStoreFails: a failed round trip lets the fallback decide at
// once and starts an outage, during which no call asks the store; the
// probe ends it when the store answers again.
func TestLeaseStoreFails(t *testing.T) {
	l, f := fakeLimiter(t, Options{Limit: ratelimit.Limit{Rate: 0.01, Burst: 5}, Fallback: Deny, ProbeInterval: 5 * time.Millisecond, MaxLease: -1})
	f.fail(context.DeadlineExceeded)
	if ok, wait := l.Allow(t.Context(), fakeAlice, 1); ok || wait != time.Second {
		t.Errorf("a call whose round trip failed, fallback deny: got %v, %s; want a refusal, 1s", ok, wait)
	}
	if st := l.Status(); st.State != "down" || st.Reason != "timeout" || st.Errors == 0 || l.Up() {
		t.Errorf("status after a failed round trip: %+v, want down, timeout, errors counted", st)
	}
	for range 10 {
		l.Allow(t.Context(), fakeAlice, 1)
	}
	if n := len(f.roundTrips()); n != 1 {
		t.Errorf("%d round trips, want 1: during the outage the fallback decides alone", n)
	}
	f.fail(nil)
	await.Until(t, 5*time.Second, "the store deciding again", l.Up)
	if ok, _ := l.Allow(t.Context(), fakeAlice, 1); !ok {
		t.Error("a call after the outage: refused, want admitted")
	}
}
