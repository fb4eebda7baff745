package backend_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/fleet"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// The load balancing tests run against a fleet of pods on 127.0.0.2 and
// up, named by an in-process DNS server, on every call path: the direct
// client (a unary client per address), grpc-go's unary calls
// (direct_calls: false) and grpc-go's streams (those of POST / and the
// WebSocket); all three are balanced by the backend's one picker, grpc-go
// through the pool as its balancer.

func TestMain(m *testing.M) {
	fleet.ServeIfPod() // TestFrozen's pods are this binary too
	os.Exit(m.Run())
}

// A path is a way calls reach the fleet.
type path struct {
	name   string
	direct bool // the direct client's unary calls
	stream bool // grpc-go streams
}

var (
	directPath = path{name: "direct", direct: true}
	grpcPath   = path{name: "grpc-go"}
	streamPath = path{name: "grpc-go-stream", stream: true}
	// paths are the two paths of unary calls; allPaths streams too.
	paths    = []path{directPath, grpcPath}
	allPaths = []path{directPath, grpcPath, streamPath}
)

// dialFleet dials the fleet's target with opts, and waits until every
// address is ready (n of them).
func dialFleet(t *testing.T, f *fleet.Fleet, p path, opts backend.Options, n int) *backend.Conn {
	t.Helper()
	opts.Direct = p.direct
	c, err := backend.Dial(f.Target(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	await.Until(t, 10*time.Second, fmt.Sprintf("%d addresses ready", n), func() bool {
		return ready(c) == n
	})
	return c
}

func ready(c *backend.Conn) int {
	n := 0
	for _, a := range c.Addresses().Addresses {
		if a.State == "ready" {
			n++
		}
	}
	return n
}

var helloRequest, _ = proto.Marshal(&helloworld.HelloRequest{Name: "lb"})

// A caller makes one call and returns the address that answered.
type caller func(ctx context.Context) (string, error)

// callerOf makes the calls of p on c: unary calls through c's Invoker,
// or streams of grpc-go (SayHello, one message each way, as a WebSocket
// stream carries it) with the WebSocket's origin record.
func callerOf(c *backend.Conn, p path) caller {
	if p.stream {
		return func(ctx context.Context) (string, error) { return streamHello(ctx, c) }
	}
	inv := backend.For(c)
	return func(ctx context.Context) (string, error) { return sayHello(ctx, inv) }
}

// sayHello calls the fleet and returns the address that answered.
func sayHello(ctx context.Context, inv backend.Invoker) (string, error) {
	c := backend.GetCall()
	defer backend.PutCall(c)
	c.Method = "/helloworld.Greeter/SayHello"
	c.Request = append(c.Request, helloRequest...)
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := inv.Invoke(ctx, c); err != nil {
		return "", err
	}
	var reply helloworld.HelloReply
	if err := proto.Unmarshal(c.Response, &reply); err != nil {
		return "", err
	}
	return reply.Message, nil
}

var helloStream = &grpc.StreamDesc{StreamName: "SayHello", ServerStreams: true, ClientStreams: true}

// streamHello is sayHello as a grpc-go stream.
func streamHello(ctx context.Context, c *backend.Conn) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ctx, _ = backend.WithOrigin(ctx)
	cs, err := c.NewStream(ctx, helloStream, "/helloworld.Greeter/SayHello")
	if err != nil {
		return "", err
	}
	if err := cs.SendMsg(&helloworld.HelloRequest{Name: "lb"}); err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	if err := cs.CloseSend(); err != nil {
		return "", err
	}
	var reply helloworld.HelloReply
	if err := cs.RecvMsg(&reply); err != nil {
		return "", err
	}
	if err := cs.RecvMsg(new(helloworld.HelloReply)); !errors.Is(err, io.EOF) { // the stream's end
		return "", fmt.Errorf("the stream did not end after its reply: %w", err)
	}
	return reply.Message, nil
}

// A record is one call of a load.
type record struct {
	start, end time.Time
	addr       string
	err        error
}

// load makes calls at concurrency conc: n in all, or until stop is
// called when n is 0.
type load struct {
	mu      sync.Mutex
	records []record
	stop    context.CancelFunc
	done    sync.WaitGroup
	n       int
}

func startLoad(call caller, conc, n int) *load {
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{stop: cancel, n: n}
	var left atomic.Int64
	left.Store(int64(n))
	for range conc {
		l.done.Go(func() {
			for ctx.Err() == nil && (n == 0 || left.Add(-1) >= 0) {
				start := time.Now()
				addr, err := call(context.Background())
				l.mu.Lock()
				l.records = append(l.records, record{start, time.Now(), addr, err})
				l.mu.Unlock()
			}
		})
	}
	return l
}

// finish stops the load, or waits for its n calls, and returns its calls.
func (l *load) finish() []record {
	if l.n == 0 {
		l.stop()
	}
	l.done.Wait()
	l.stop()
	return l.records
}

func (l *load) snapshot() []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.records)
}

// count returns how many of the load's calls so far match.
func (l *load) count(match func(record) bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.records {
		if match(r) {
			n++
		}
	}
	return n
}

// awaitCalls waits until n calls that started after since have ended.
func (l *load) awaitCalls(t *testing.T, since time.Time, n int) {
	t.Helper()
	await.Until(t, 20*time.Second, fmt.Sprintf("%d calls after %s", n, since.Format("15:04:05.000")), func() bool {
		return l.count(func(r record) bool { return r.start.After(since) }) >= n
	})
}

func shares(recs []record) (map[string]int, []record) {
	served := map[string]int{}
	var failed []record
	for _, r := range recs {
		if r.err != nil {
			failed = append(failed, r)
			continue
		}
		served[r.addr]++
	}
	return served, failed
}

func failures(t *testing.T, failed []record) string {
	t.Helper()
	s := ""
	for i, r := range failed {
		if i == 5 {
			s += "..."
			break
		}
		s += fmt.Sprintf("[%s at %s] ", status.Convert(r.err).Message(), r.start.Format("15:04:05.000"))
	}
	return s
}

// TestSpread: 4 addresses, 2,000 calls at concurrency 16, on every path
// (streams too): under round_robin each address gets 25% ± 2 points,
// under least_request 25% ± 10; pick_first sends all to the first.
func TestSpread(t *testing.T) {
	f := fleet.Start(t, 4)
	for _, path := range allPaths {
		for _, tc := range []struct {
			balance string
			slack   float64 // percentage points
			first   bool
		}{
			{balance: backend.RoundRobin, slack: 2},
			{balance: backend.LeastRequest, slack: 10},
			{balance: backend.PickFirst, first: true},
		} {
			t.Run(path.name+"/"+tc.balance, func(t *testing.T) {
				want := 4
				if tc.first {
					want = 1 // pick_first connects the first address only
				}
				c := dialFleet(t, f, path, backend.Options{Balance: tc.balance}, want)
				served, failed := shares(startLoad(callerOf(c, path), 16, 2000).finish())
				if len(failed) > 0 {
					t.Fatalf("%d calls failed: %s", len(failed), failures(t, failed))
				}
				if tc.first {
					if served[f.Addr(fleet.IP(0))] != 2000 {
						t.Fatalf("got %v, want every call on %s", served, f.Addr(fleet.IP(0)))
					}
					return
				}
				for i := range 4 {
					share := float64(served[f.Addr(fleet.IP(i))]) / 20
					if math.Abs(share-25) > tc.slack {
						t.Errorf("%s got %.1f%% of the calls, want 25%% ± %g (%v)", fleet.IP(i), share, tc.slack, served)
					}
				}
			})
		}
	}
}

// TestBatchSpread: a batch of 100 calls reaches all 4 addresses: on the
// direct path the members start in one Group, those picked for the same
// address leaving in one write.
func TestBatchSpread(t *testing.T) {
	f := fleet.Start(t, 4)
	for _, balance := range []string{backend.LeastRequest, backend.RoundRobin} {
		t.Run(balance, func(t *testing.T) {
			c := dialFleet(t, f, directPath, backend.Options{Balance: balance}, 4)
			inv := backend.For(c)
			// dialFleet awaits 4 addresses ready, as /readyz reports them; the
			// picker's view is rebuilt just after an address turns ready, so
			// the batch waits for single calls to have reached all 4 (it
			// failed once in CI with 3: 33, 34 and 33 of its calls).
			reached := map[string]bool{}
			await.Until(t, 10*time.Second, "single calls on all 4 addresses", func() bool {
				if addr, err := sayHello(t.Context(), inv); err == nil {
					reached[addr] = true
				}
				return len(reached) == 4
			})
			var g backend.Group
			calls := make([]*backend.Call, 100)
			for i := range calls {
				calls[i] = backend.GetCall()
				calls[i].Method = "/helloworld.Greeter/SayHello"
				calls[i].Request = append(calls[i].Request, helloRequest...)
				if !inv.Start(t.Context(), &g, calls[i]) {
					t.Fatal("the direct path does not start calls in groups")
				}
			}
			g.Wait(t.Context())
			served := map[string]int{}
			for _, call := range calls {
				if call.Err != nil {
					t.Fatalf("a member failed: %v", call.Err)
				}
				var reply helloworld.HelloReply
				if err := proto.Unmarshal(call.Response, &reply); err != nil {
					t.Fatal(err)
				}
				served[reply.Message]++
				backend.PutCall(call)
			}
			if len(served) != 4 {
				t.Fatalf("the batch reached %v, want all 4 addresses", served)
			}
		})
	}
}

func p99(recs []record, skip string) time.Duration {
	var ds []time.Duration
	for _, r := range recs {
		if r.err == nil && r.addr != skip {
			ds = append(ds, r.end.Sub(r.start))
		}
	}
	slices.Sort(ds)
	if len(ds) == 0 {
		return 0
	}
	return ds[len(ds)*99/100]
}

// TestSlowAddress: under least_request an address 50 ms slower than the
// others gets less than 8% of the calls, and the p99 of the others stays
// where it was without it. Both depend on the fast calls being much
// faster than 50 ms, which a loaded machine (the race detector, other
// tests) may not allow at every moment: the measure is taken up to three
// times, and one within both bounds passes.
func TestSlowAddress(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			f := fleet.Start(t, 4)
			c := dialFleet(t, f, path, backend.Options{Balance: backend.LeastRequest}, 4)
			call := callerOf(c, path)
			slow := f.Pod(fleet.IP(3))
			startLoad(call, 16, 500).finish() // warm up
			var why []string
			for attempt := range 3 {
				slow.SetDelay(0)
				before := p99(startLoad(call, 16, 2000).finish(), slow.Addr)
				slow.SetDelay(50 * time.Millisecond)
				recs := startLoad(call, 16, 2000).finish()
				served, failed := shares(recs)
				if len(failed) > 0 {
					t.Fatalf("%d calls failed: %s", len(failed), failures(t, failed))
				}
				share := float64(served[slow.Addr]) / 20
				// The others' p99 as it was: within what a loaded machine
				// makes of the same run (twice, and 5 ms).
				after := p99(recs, slow.Addr)
				t.Logf("attempt %d: the slow address got %.1f%% of the calls; the others' p99 %s, %s without it", attempt+1, share, after, before)
				switch {
				case share >= 8:
					why = append(why, fmt.Sprintf("the slow address got %.1f%% of the calls, want less than 8%% (%v)", share, served))
				case after > 2*before+5*time.Millisecond:
					why = append(why, fmt.Sprintf("p99 of the other addresses %s with a slow one, %s without", after, before))
				default:
					return
				}
			}
			t.Fatal(why)
		})
	}
}

// TestScaleUp: a fifth address added to DNS under load takes calls within
// resolve_interval + 2 s.
func TestScaleUp(t *testing.T) {
	const interval = time.Second
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			f := fleet.Start(t, 4)
			c := dialFleet(t, f, path, backend.Options{ResolveInterval: interval}, 4)
			l := startLoad(callerOf(c, path), 16, 0)
			l.awaitCalls(t, time.Time{}, 100)
			ip := fleet.IP(4)
			f.StartPod(ip)
			added := time.Now()
			f.Add(ip)
			await.Until(t, interval+2*time.Second, "call on the new address", func() bool { return f.Pod(ip).Calls() > 0 })
			t.Logf("the new address took calls %s after its record was added", time.Since(added).Round(time.Millisecond))
			_, failed := shares(l.finish())
			if len(failed) > 0 {
				t.Fatalf("%d calls failed: %s", len(failed), failures(t, failed))
			}
		})
	}
}

// TestScaleDown: a record removed and its server stopped gracefully
// (GOAWAY, then stop) under load: no call fails.
func TestScaleDown(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			f := fleet.Start(t, 4)
			c := dialFleet(t, f, path, backend.Options{ResolveInterval: time.Second}, 4)
			l := startLoad(callerOf(c, path), 16, 0)
			l.awaitCalls(t, time.Time{}, 200)
			gone := fleet.IP(1)
			f.Remove(gone)
			f.Pod(gone).GracefulStop()
			stopped := time.Now()
			await.Until(t, 5*time.Second, "address removed", func() bool { return len(c.Addresses().Addresses) == 3 })
			l.awaitCalls(t, time.Now(), 500)
			recs := l.finish()
			served, failed := shares(recs)
			if len(failed) > 0 {
				t.Fatalf("%d calls failed: %s", len(failed), failures(t, failed))
			}
			for _, r := range recs {
				if r.addr == f.Addr(gone) && r.start.After(stopped) {
					t.Fatalf("a call that started after the pod stopped was served by it")
				}
			}
			t.Logf("served %v", served)
		})
	}
}

// TestRemovedDrains: an address removed from DNS while its server stays
// up drains: its calls in flight finish (it shows draining meanwhile, on
// either path), it gets no new ones, and it leaves the set.
func TestRemovedDrains(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			f := fleet.Start(t, 2)
			c := dialFleet(t, f, path, backend.Options{Balance: backend.RoundRobin, ResolveInterval: 100 * time.Millisecond}, 2)
			gone := f.Pod(fleet.IP(1))
			gone.SetDelay(time.Second)
			l := startLoad(callerOf(c, path), 8, 8)
			await.Until(t, 2*time.Second, "calls in flight on the address", func() bool { return gone.Calls() > 0 })
			f.Remove(gone.IP)
			removed := time.Now()
			await.Until(t, 2*time.Second, "the address draining", func() bool { return stateOf(c, gone.Addr) == "draining" })
			served, failed := shares(l.finish())
			if len(failed) > 0 {
				t.Fatalf("%d calls failed: %s", len(failed), failures(t, failed))
			}
			if served[gone.Addr] == 0 {
				t.Fatalf("served %v: no call in flight on the removed address finished", served)
			}
			before := gone.Calls()
			served, failed = shares(startLoad(callerOf(c, path), 4, 100).finish())
			if len(failed) > 0 || served[gone.Addr] > 0 || gone.Calls() != before {
				t.Fatalf("after the removal: served %v, %d failed; want none on %s", served, len(failed), gone.Addr)
			}
			await.Until(t, 3*time.Second, "the address out of the set", func() bool { return stateOf(c, gone.Addr) == "" })
			t.Logf("drained in %s", time.Since(removed).Round(time.Millisecond))
		})
	}
}

// TestAbruptLoss: one server's connections closed with no GOAWAY (its
// process killed) under load at concurrency 16: at most the 16 calls in
// flight then fail, and none after 1 s.
func TestAbruptLoss(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			f := fleet.Start(t, 4)
			c := dialFleet(t, f, path, backend.Options{}, 4)
			l := startLoad(callerOf(c, path), 16, 0)
			l.awaitCalls(t, time.Time{}, 200)
			killed := time.Now()
			f.Pod(fleet.IP(2)).Kill()
			l.awaitCalls(t, killed.Add(time.Second), 500)
			recs := l.finish()
			_, failed := shares(recs)
			if len(failed) > 16 {
				t.Errorf("%d calls failed, want at most the 16 in flight: %s", len(failed), failures(t, failed))
			}
			for _, r := range failed {
				if r.end.After(killed.Add(time.Second)) {
					t.Errorf("a call failed %s after the loss, want none after 1s: %v", r.end.Sub(killed), r.err)
				}
			}
			t.Logf("%d calls failed of %d", len(failed), len(recs))
		})
	}
}

// TestHealth: with health_check, an address set to NOT_SERVING leaves the
// rotation within 1 s, and comes back when set to SERVING, on every path
// (one health watch per address serves them all).
func TestHealth(t *testing.T) {
	for _, path := range allPaths {
		t.Run(path.name, func(t *testing.T) {
			f := fleet.Start(t, 4)
			c := dialFleet(t, f, path, backend.Options{HealthCheck: true}, 4)
			l := startLoad(callerOf(c, path), 16, 0)
			l.awaitCalls(t, time.Time{}, 200)
			pod := f.Pod(fleet.IP(0))
			pod.SetServing(false)
			off := time.Now()
			await.Until(t, time.Second, "the address not_serving", func() bool { return stateOf(c, pod.Addr) == "not_serving" })
			l.awaitCalls(t, off.Add(time.Second), 500)
			pod.SetServing(true)
			on := time.Now()
			await.Until(t, 5*time.Second, "calls on the address serving again", func() bool {
				for _, r := range l.snapshot() {
					if r.addr == pod.Addr && r.start.After(on) {
						return true
					}
				}
				return false
			})
			recs := l.finish()
			_, failed := shares(recs)
			if len(failed) > 0 {
				t.Fatalf("%d calls failed: %s", len(failed), failures(t, failed))
			}
			for _, r := range recs {
				if r.addr == pod.Addr && r.start.After(off.Add(time.Second)) && r.start.Before(on) {
					t.Fatalf("a call that started %s after NOT_SERVING went to the address", r.start.Sub(off))
				}
			}
		})
	}
}

func stateOf(c *backend.Conn, addr string) string {
	for _, a := range c.Addresses().Addresses {
		if a.Address == addr {
			return a.State
		}
	}
	return ""
}

// TestFixedList: an ipv4: list is a fixed set, balanced as a name's.
func TestFixedList(t *testing.T) {
	f := fleet.Start(t, 2)
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			c, err := backend.Dial("ipv4:"+f.Addr(fleet.IP(1))+","+f.Addr(fleet.IP(0)), backend.Options{Balance: backend.RoundRobin, Direct: path.direct})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			await.Until(t, 10*time.Second, "2 addresses ready", func() bool { return ready(c) == 2 })
			served, failed := shares(startLoad(callerOf(c, path), 4, 400).finish())
			if len(failed) > 0 || served[f.Addr(fleet.IP(0))] != 200 || served[f.Addr(fleet.IP(1))] != 200 {
				t.Fatalf("served %v, %d failed; want 200 each", served, len(failed))
			}
		})
	}
}

// TestAllNotServing: when no address is SERVING, calls fail at once with
// code 14.
func TestAllNotServing(t *testing.T) {
	for _, path := range paths {
		t.Run(path.name, func(t *testing.T) {
			f := fleet.Start(t, 2)
			c := dialFleet(t, f, path, backend.Options{HealthCheck: true}, 2)
			for i := range 2 {
				f.Pod(fleet.IP(i)).SetServing(false)
			}
			await.Until(t, 2*time.Second, "no ready address", func() bool { return ready(c) == 0 })
			start := time.Now()
			_, err := sayHello(t.Context(), backend.For(c))
			if status.Code(err) != 14 {
				t.Fatalf("got %v, want code 14", err)
			}
			if d := time.Since(start); d > time.Second {
				t.Fatalf("the call failed after %s, want at once", d)
			}
		})
	}
}

// TestDNSFailure: when DNS stops answering, or answers with no record,
// calls go on over the last good set, and the addresses say why.
func TestDNSFailure(t *testing.T) {
	for _, path := range paths {
		for _, tc := range []struct {
			name string
			fail func(*fleet.Fleet)
		}{
			{"stopped", (*fleet.Fleet).StopDNS},
			{"no records", func(f *fleet.Fleet) { f.SetRecords() }},
		} {
			t.Run(path.name+"/"+tc.name, func(t *testing.T) {
				f := fleet.Start(t, 4)
				c := dialFleet(t, f, path, backend.Options{ResolveInterval: 200 * time.Millisecond}, 4)
				l := startLoad(callerOf(c, path), 16, 0)
				tc.fail(f)
				await.Until(t, 15*time.Second, "resolve_error", func() bool { return c.Addresses().ResolveError != "" })
				l.awaitCalls(t, time.Now(), 500)
				served, failed := shares(l.finish())
				if len(failed) > 0 {
					t.Fatalf("%d calls failed: %s", len(failed), failures(t, failed))
				}
				if st := c.Addresses(); len(st.Addresses) != 4 || len(served) != 4 {
					t.Fatalf("addresses %v, served %v: want the 4 of the last good resolution", st, served)
				}
			})
		}
	}
}
