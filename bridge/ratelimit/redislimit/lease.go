package redislimit

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
)

// gcra is what a Limiter asks of its store: redis_rate's GCRA, one script
// a round trip (*redis_rate.Limiter; the tests of the lease logic give it
// an in-process one).
type gcra interface {
	// AllowN allows all n calls or none.
	AllowN(ctx context.Context, key string, limit redis_rate.Limit, n int) (*redis_rate.Result, error)
	// AllowAtMost allows up to n calls, as many as the limit has now.
	AllowAtMost(ctx context.Context, key string, limit redis_rate.Limit, n int) (*redis_rate.Result, error)
}

// identity is what a Limiter keeps for one identity.
type identity struct {
	// blocked is the Unix nanosecond time until which the store said no
	// call of the identity may pass: a refusal of one call, remembered.
	blocked  atomic.Int64
	mu       sync.Mutex
	busy     bool      // a round trip of the identity is out
	queue    []*waiter // calls waiting for the next one
	lease    int       // calls the store allowed that no call has taken yet
	leaseEnd time.Time // when they are dropped
	want     int       // the lease the next round trip asks for
	tight    bool      // the last round trip allowed less than it asked
	_        [64]byte  // keep identities' locks apart
}

// leaseTTL is how long calls the store allowed ahead of need stay usable:
// past it they are dropped, and the identity's limit is the stricter for it.
const leaseTTL = time.Second

// waiter is one call waiting for a round trip.
type waiter struct {
	n    int
	ok   bool
	wait time.Duration
	err  error
	lead bool          // the call makes the next round trip
	done chan struct{} // closed when decided, or when it leads
}

// ask decides n calls of the identity st: from its lease when that
// holds enough, else in a round trip, its own or, when one is out, the
// next one, shared with every call that arrives meanwhile.
func (l *Limiter) ask(st *identity, key string, n int) (bool, time.Duration, error) {
	st.mu.Lock()
	if st.take(n, time.Now()) {
		if st.lease < (st.want+1)/2 && !st.busy { // refill ahead of need
			st.busy = true
			l.wg.Go(func() { l.lead(st, key, nil) })
		}
		st.mu.Unlock()
		return true, 0, nil
	}
	w := &waiter{n: n, done: make(chan struct{})}
	st.queue = append(st.queue, w)
	if st.busy {
		st.mu.Unlock()
		<-w.done
		if !w.lead {
			return w.ok, w.wait, w.err
		}
		st.mu.Lock()
	}
	st.busy = true
	st.mu.Unlock()
	l.lead(st, key, w)
	return w.ok, w.wait, w.err
}

// take takes n calls from the identity's lease, if it holds them and has
// not expired. st.mu is held.
func (st *identity) take(n int, now time.Time) bool {
	if st.lease > 0 && now.After(st.leaseEnd) {
		st.lease = 0
		st.want = max(1, st.want/2) // more was taken than used
	}
	if st.lease < n {
		return false
	}
	st.lease -= n
	return true
}

// lead makes round trips for st while calls wait, w among them (nil for a
// refill of the lease), then lets the next caller lead. st.busy is set.
func (l *Limiter) lead(st *identity, key string, w *waiter) {
	st.mu.Lock()
	batch := st.queue // w, when not nil, is first: it queued while none led
	st.queue = nil
	if len(batch) > 0 && l.maxLease > 0 && !st.tight {
		st.want = min(max(1, st.want*2), l.maxLease) // calls had to wait: lease more
	}
	extra := st.want - st.lease
	st.mu.Unlock()

	left, short := l.trip(st, key, batch, w, max(0, extra))

	st.mu.Lock()
	now := time.Now()
	if short {
		// The identity is at its limit: take nothing ahead, and ask for
		// each call all or nothing (AllowAtMost short of what it asks
		// spends a fraction of a call more than it allows).
		st.want = 0
	}
	st.tight = short
	if left > 0 {
		st.lease += left
		st.leaseEnd = now.Add(leaseTTL)
	}
	// The calls that came during the trip: from the lease while it lasts;
	// the rest wait for the next trip, which the first of them makes.
	queue := st.queue[:0]
	for _, q := range st.queue {
		if st.take(q.n, now) {
			q.ok = true
			close(q.done)
		} else {
			queue = append(queue, q)
		}
	}
	st.queue = queue
	if len(queue) > 0 {
		queue[0].lead = true
		close(queue[0].done)
	} else {
		st.busy = false
	}
	st.mu.Unlock()
}

// trip decides batch, the waiting calls of st, and asks extra calls more
// for the lease, in one round trip; it wakes the calls of batch but self
// (the caller's, nil for a refill) and returns how many calls the store
// allowed beyond those of batch it admitted, and whether it allowed fewer
// than asked.
func (l *Limiter) trip(st *identity, key string, batch []*waiter, self *waiter, extra int) (int, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	var res *redis_rate.Result
	var err error
	total := 0
	for _, w := range batch {
		total += w.n
	}
	if len(batch) == 1 && extra == 0 {
		res, err = l.rl.AllowN(ctx, key, l.limit, total) // all or nothing
	} else {
		res, err = l.rl.AllowAtMost(ctx, key, l.limit, total+extra) // in the order they came
	}
	left, short := 0, true
	if err != nil {
		l.failed(err)
	} else {
		left, short = res.Allowed, res.Allowed < total+extra
		if res.Allowed == 0 && res.RetryAfter > 0 && (len(batch) != 1 || total == 1 || extra > 0) {
			// Not even one call passes before RetryAfter: remember it.
			st.blocked.Store(time.Now().Add(res.RetryAfter).UnixNano())
		}
	}
	single := len(batch) == 1 && extra == 0
	for _, w := range batch {
		w.err = err
		switch {
		case err != nil:
		case w.n <= left:
			w.ok, left = true, left-w.n
		case single:
			w.wait = res.RetryAfter // for all n
		case res.Allowed == 0 && res.RetryAfter > 0:
			w.wait = res.RetryAfter + time.Duration(w.n-1)*l.emission
		default:
			w.wait = time.Duration(w.n) * l.emission
		}
		if w != self {
			close(w.done)
		}
	}
	return left, short
}
