package redislimit_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit/redistest"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// logs is a logger whose records a test reads.
type logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logs) count(level, msg string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for line := range strings.SplitSeq(l.buf.String(), "\n") {
		if strings.Contains(line, "level="+level) && strings.Contains(line, msg) {
			n++
		}
	}
	return n
}

func (l *logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

const (
	outageStarts = "the rate limit store does not answer"
	outageEnds   = "the rate limit store answers again"
)

func newLimiter(t *testing.T, o redislimit.Options) (*redislimit.Limiter, *logs) {
	t.Helper()
	lg := &logs{}
	o.Logger = slog.New(slog.NewTextHandler(lg, nil))
	l, err := redislimit.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, lg
}

// evalCalls is how many times the store has run a script: one per round
// trip of a decision.
func evalCalls(t *testing.T, srv *redistest.Server) int {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Protocol: 2})
	defer c.Close()
	info, err := c.Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.SplitSeq(info, "\n") {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if rest, ok := strings.CutPrefix(strings.TrimSpace(line), cmd); ok {
				v, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				n += v
			}
		}
	}
	return n
}

var alice = ratelimit.Identity{Index: 0, Name: "alice"}

// TestSharedLimit: two limiters (two replicas) on one store admit the
// burst together, not each; a refusal says when to retry and is
// remembered, so that the calls after it cost no round trip.
func TestSharedLimit(t *testing.T) {
	srv := redistest.Start(t, "")
	o := redislimit.Options{URL: srv.URL(), Limit: ratelimit.Limit{Rate: 1, Burst: 10}, Identities: 2}
	a, _ := newLimiter(t, o)
	b, _ := newLimiter(t, o)
	admitted := 0
	for i := range 20 {
		l := a
		if i%2 == 1 {
			l = b
		}
		if ok, _ := l.Allow(t.Context(), alice, 1); ok {
			admitted++
		}
	}
	if admitted != 10 {
		t.Errorf("two replicas admitted %d of 20 calls, want the burst of 10 together", admitted)
	}
	ok, wait := a.Allow(t.Context(), alice, 1)
	if ok || wait < 500*time.Millisecond || wait > time.Second {
		t.Errorf("past the burst at 1 call a second: got %v, retry after %s; want a refusal, retry after about 1s", ok, wait)
	}
	if spent, _ := a.Spent(alice); !spent {
		t.Error("Spent after a refusal: got false, want true")
	}
	before := evalCalls(t, srv)
	for range 100 {
		if ok, _ := a.Allow(t.Context(), alice, 1); ok {
			t.Fatal("a call passed within the remembered Retry-After")
		}
	}
	if after := evalCalls(t, srv); after != before {
		t.Errorf("100 refused calls within Retry-After made %d round trips, want 0", after-before)
	}
	// Another identity has its own limit.
	if ok, _ := b.Allow(t.Context(), ratelimit.Identity{Index: 1, Name: "bob"}, 10); !ok {
		t.Error("another identity's 10 calls: refused, want admitted")
	}
}

// TestCombinedRoundTrips: calls of one identity arriving together share
// round trips, and exactly the burst passes.
func TestCombinedRoundTrips(t *testing.T) {
	srv := redistest.Start(t, "")
	const burst, callers, each = 300, 32, 20
	l, _ := newLimiter(t, redislimit.Options{URL: srv.URL(), Limit: ratelimit.Limit{Rate: 1, Burst: burst}})
	if ok, _ := l.Allow(t.Context(), alice, 1); !ok { // the pool's connection is up
		t.Fatal("first call refused")
	}
	before := evalCalls(t, srv)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			for range each {
				if ok, _ := l.Allow(context.Background(), alice, 1); ok {
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	trips := evalCalls(t, srv) - before
	t.Logf("%d calls from %d goroutines: %d admitted in %d round trips", callers*each, callers, admitted.Load(), trips)
	if got := admitted.Load(); got < burst-1-1 || got > burst-1+1 {
		t.Errorf("admitted %d, want the burst less the first call (%d), within a token of rate", got, burst-1)
	}
	if trips >= callers*each {
		t.Errorf("%d round trips for %d calls: calls arriving together did not share them", trips, callers*each)
	}
}

// TestOutage: while the store is down each fallback does as named; the
// outage is logged once at Warn and once at Info; the store decides again
// within 2 s of its return.
func TestOutage(t *testing.T) {
	for _, tt := range []struct {
		name     redislimit.Fallback
		admitted int // of 20 calls during the outage, burst 5
	}{
		{redislimit.Local, 5},
		{redislimit.Allow, 20},
		{redislimit.Deny, 0},
	} {
		t.Run(string(tt.name), func(t *testing.T) {
			srv := redistest.Start(t, "")
			l, lg := newLimiter(t, redislimit.Options{URL: srv.URL(), Limit: ratelimit.Limit{Rate: 0.01, Burst: 5}, Fallback: tt.name})
			for range 5 {
				if ok, _ := l.Allow(t.Context(), alice, 1); !ok {
					t.Fatal("a call within the burst was refused")
				}
			}
			srv.Kill()
			admitted := 0
			for range 20 {
				if ok, _ := l.Allow(t.Context(), alice, 1); ok {
					admitted++
				}
			}
			if admitted != tt.admitted {
				t.Errorf("during the outage %d of 20 calls passed, want %d", admitted, tt.admitted)
			}
			if st := l.Status(); st.State != "down" || st.Reason != "unreachable" || st.Errors == 0 || l.Up() {
				t.Errorf("status during the outage: %+v, want down, unreachable, errors counted\n%s", st, lg)
			}
			if n := lg.count("WARN", outageStarts); n != 1 {
				t.Errorf("outage logged %d times at Warn, want once:\n%s", n, lg)
			}
			srv.Restart()
			took := await.Until(t, 2*time.Second, "the store deciding again", l.Up)
			t.Logf("the store decides again %s after its return", took)
			// Empty again: the store's burst, whatever the fallback did.
			admitted = 0
			for range 10 {
				if ok, _ := l.Allow(t.Context(), alice, 1); ok {
					admitted++
				}
			}
			if admitted != 5 {
				t.Errorf("after the outage %d of 10 calls passed, want the store's burst of 5", admitted)
			}
			if n := lg.count("INFO", outageEnds); n != 1 {
				t.Errorf("end of the outage logged %d times at Info, want once:\n%s", n, lg)
			}
			if n := lg.count("WARN", outageStarts); n != 1 {
				t.Errorf("outage logged %d times at Warn, want once:\n%s", n, lg)
			}
		})
	}
}

// TestStoreDownAtStart: a store that is not there does not keep the
// limiter from starting; the fallback decides.
func TestStoreDownAtStart(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close() // nothing listens there
	l, lg := newLimiter(t, redislimit.Options{URL: "redis://" + addr + "/0", Limit: ratelimit.Limit{Rate: 1, Burst: 2}})
	await.Until(t, 2*time.Second, "the outage noticed", func() bool { return !l.Up() })
	for i, want := range []bool{true, true, false} {
		if ok, _ := l.Allow(t.Context(), alice, 1); ok != want {
			t.Errorf("call %d with the local fallback: got %v, want %v", i, ok, want)
		}
	}
	if n := lg.count("WARN", outageStarts); n != 1 {
		t.Errorf("outage logged %d times, want once:\n%s", n, lg)
	}
}

// TestSlowStore: a store that accepts connections and never answers costs
// a call no more than the timeout, and the calls after it nothing.
func TestSlowStore(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lis.Close() })
	var held sync.WaitGroup
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			held.Go(func() { // read and never answer
				buf := make([]byte, 1024)
				for {
					if _, err := c.Read(buf); err != nil {
						return
					}
				}
			})
			t.Cleanup(func() { c.Close() })
		}
	}()
	const timeout = 50 * time.Millisecond
	l, _ := newLimiter(t, redislimit.Options{URL: "redis://" + lis.Addr().String() + "/0", Limit: ratelimit.Limit{Rate: 1, Burst: 2},
		Timeout: timeout, Fallback: redislimit.Allow})
	start := time.Now()
	ok, _ := l.Allow(t.Context(), alice, 1)
	took := time.Since(start)
	if !ok {
		t.Error("a call while the store is silent, fallback allow: refused")
	}
	// The first probe (1 s to dial and answer) may have found it first.
	if took > time.Second+500*time.Millisecond {
		t.Errorf("the call took %s, want at most the timeout (%s), or the first probe's second", took, timeout)
	}
	await.Until(t, 3*time.Second, "the outage noticed", func() bool { return !l.Up() })
	if st := l.Status(); st.Reason != "timeout" {
		t.Errorf("got reason %q, want timeout", st.Reason)
	}
	start = time.Now()
	for range 100 {
		l.Allow(t.Context(), alice, 1)
	}
	if took := time.Since(start); took > 50*time.Millisecond {
		t.Errorf("100 calls during the outage took %s, want no wait for the store", took)
	}
}

// TestPassword: a store that wants a password refuses a wrong one (an
// outage, reason auth) and takes the right one, from Options.Password or
// the URL.
func TestPassword(t *testing.T) {
	srv := redistest.Start(t, "s3cret")
	for _, tt := range []struct {
		name, url, password, state string
	}{
		{"none", srv.URL(), "", "down"},
		{"wrong", srv.URL(), "nope", "down"},
		{"option", srv.URL(), "s3cret", "up"},
		{"url", "redis://:s3cret@" + srv.Addr() + "/0", "", "up"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, lg := newLimiter(t, redislimit.Options{URL: tt.url, Password: tt.password, Limit: ratelimit.Limit{Rate: 1, Burst: 1}, Fallback: redislimit.Deny})
			l.Allow(t.Context(), alice, 1)
			// The first probe (at once, at New): a refused password is an
			// outage, awaited; a right one is no outage, which a probe that
			// failed would start ("never": held for 100 ms).
			if tt.state == "down" {
				await.Until(t, 10*time.Second, "the store down", func() bool { return !l.Up() })
			} else {
				await.Holds(t, 100*time.Millisecond, "the store up", l.Up)
			}
			st := l.Status()
			if st.State != tt.state {
				t.Fatalf("got %+v, want state %s", st, tt.state)
			}
			if tt.state == "down" && st.Reason != "auth" {
				t.Errorf("got reason %q, want auth", st.Reason)
			}
			if strings.Contains(st.Store, "s3cret") || strings.Contains(lg.String(), "s3cret") {
				t.Errorf("the password shows in the status or the log: %+v\n%s", st, lg)
			}
		})
	}
}

func TestParseURL(t *testing.T) {
	for _, tt := range []struct {
		url  string
		ok   bool
		addr string
		db   int
		tls  bool
	}{
		{"redis://127.0.0.1:6379/0", true, "127.0.0.1:6379", 0, false},
		{"redis://redis.internal/3", true, "redis.internal:6379", 3, false},
		{"rediss://:pw@redis.internal:6380/1", true, "redis.internal:6380", 1, true},
		{"redis://user:pw@[::1]:6379", true, "[::1]:6379", 0, false},
		{"http://redis:6379/0", false, "", 0, false},
		{"redis://:pw@/0", false, "", 0, false},
		{"redis://host:port/0", false, "", 0, false},
		{"redis://host:6379/zero", false, "", 0, false},
		{"redis://host:6379/0/1", false, "", 0, false},
		{"redis://:p%zz@host/0", false, "", 0, false},
		{"127.0.0.1:6379", false, "", 0, false},
		{"", false, "", 0, false},
	} {
		t.Run(tt.url, func(t *testing.T) {
			o, err := redislimit.ParseURL(tt.url)
			if (err == nil) != tt.ok {
				t.Fatalf("got error %v, want ok %v", err, tt.ok)
			}
			if err != nil {
				if strings.Contains(err.Error(), "pw") {
					t.Errorf("the error repeats the password: %v", err)
				}
				return
			}
			if o.Addr != tt.addr || o.DB != tt.db || (o.TLSConfig != nil) != tt.tls {
				t.Errorf("got addr %s db %d tls %v, want %s %d %v", o.Addr, o.DB, o.TLSConfig != nil, tt.addr, tt.db, tt.tls)
			}
		})
	}
	if got := redislimit.Redacted("redis://:s3cret@host:6379/0"); strings.Contains(got, "s3cret") {
		t.Errorf("Redacted: %s", got)
	}
}

// FuzzParseURL: any text is refused or parsed, never echoed with its
// password, and never panics.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis://127.0.0.1:6379/0", "rediss://u:p@h:1/2?pool_size=3", "redis://[::1", "redis://h/%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, err := redislimit.ParseURL(s)
		if err != nil && len(s) > 8 && strings.Contains(err.Error(), s) {
			t.Errorf("the error repeats the URL: %v", err)
		}
		_ = redislimit.Redacted(s)
	})
}

// TestLease: a replica takes calls ahead of need, up to a tenth of the
// burst, so that calls one after another mostly pass without a round
// trip; what it took counts against the shared limit all the same, and
// two replicas together never pass more than the burst.
func TestLease(t *testing.T) {
	srv := redistest.Start(t, "")
	const burst = 1000
	o := redislimit.Options{URL: srv.URL(), Limit: ratelimit.Limit{Rate: 0.01, Burst: burst}}
	a, _ := newLimiter(t, o)
	b, _ := newLimiter(t, o)
	before := evalCalls(t, srv)
	admitted := 0
	for i := range 2 * burst {
		l := a
		if i%2 == 1 {
			l = b
		}
		if ok, _ := l.Allow(t.Context(), alice, 1); ok {
			admitted++
		}
	}
	trips := evalCalls(t, srv) - before
	t.Logf("%d sequential calls over two replicas: %d admitted in %d round trips", 2*burst, admitted, trips)
	if admitted > burst || admitted < burst-2*burst/10 {
		t.Errorf("admitted %d, want at most the burst (%d), less at most the two leases", admitted, burst)
	}
	if trips > 2*burst/10 {
		t.Errorf("%d round trips for %d calls: the lease did not save them", trips, 2*burst)
	}
	// Without a lease, every call is a round trip (the idle case).
	o.MaxLease = -1
	c, _ := newLimiter(t, o)
	before = evalCalls(t, srv)
	for range 10 {
		c.Allow(t.Context(), ratelimit.Identity{Name: "carol"}, 1)
	}
	if trips := evalCalls(t, srv) - before; trips < 10 { // and the new limiter's first probe
		t.Errorf("MaxLease -1: %d round trips for 10 calls, want one each", trips)
	}
}
