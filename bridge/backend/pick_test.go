package backend

import (
	"log/slog"
	"slices"
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/balancer"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// newTestPool is a pool of n addresses whose view has them all ready,
// without connecting: what pick reads.
func newTestPool(tb testing.TB, balance string, n int) *pool {
	tb.Helper()
	p := newPool("test", target{kind: fixed}, poolOptions{Balance: balance, Direct: true, Outlier: DefaultOutlier()}, slog.New(slog.DiscardHandler))
	v := &view{changed: make(chan struct{})}
	for i := range n {
		c, err := unary.New("tcp", "127.0.0.1:"+strconv.Itoa(i+1), unary.Options{})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		v.ready = append(v.ready, &address{addr: strconv.Itoa(i), client: c})
	}
	if n == 1 {
		v.one = v.ready[0]
	}
	p.view.Store(v)
	p.addrs, p.resolved = slices.Clone(v.ready), true
	tb.Cleanup(p.close)
	return p
}

// BenchmarkPick is the picker alone, on every call: one address (the
// bridge's path before load balancing), and 4 by each policy, with no
// call waiting (the time signal is not read) and with calls waiting on
// every address (it is). It takes no lock and allocates nothing.
func BenchmarkPick(b *testing.B) {
	for _, tc := range []struct {
		balance string
		n       int
		waiting bool
	}{{LeastRequest, 1, false}, {LeastRequest, 4, false}, {RoundRobin, 4, false}, {PickFirst, 4, false},
		{LeastRequest, 4, true}, {RoundRobin, 4, true}, {PickFirst, 4, true}} {
		name := tc.balance + "/" + strconv.Itoa(tc.n)
		if tc.waiting {
			name += "/waiting"
		}
		b.Run(name, func(b *testing.B) {
			p := newTestPool(b, tc.balance, tc.n)
			if tc.waiting {
				for _, a := range p.view.Load().ready {
					a.waiting.Store(1)
					a.quiet.Store(p.now())
				}
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := p.pick(b.Context()); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// TestPickAllocs: a pick allocates nothing, whatever the policy.
func TestPickAllocs(t *testing.T) {
	for _, balance := range Balances() {
		p := newTestPool(t, balance, 4)
		if n := testing.AllocsPerRun(1000, func() { p.pick(t.Context()) }); n != 0 {
			t.Errorf("%s: %v allocations a pick, want 0", balance, n)
		}
	}
}

// TestStalledPassedOver: an address whose calls wait with no answer for
// longer than the stall time (a frozen one) is never picked while
// another is not, whatever the policy and however few calls it has in
// flight; when every address is stalled, picks go on.
func TestStalledPassedOver(t *testing.T) {
	for _, balance := range Balances() {
		t.Run(balance, func(t *testing.T) {
			p := newTestPool(t, balance, 4)
			v := p.view.Load()
			frozen := v.ready[0]
			frozen.waiting.Store(1)
			frozen.quiet.Store(p.now() - int64(time.Second))
			for _, a := range v.ready[1:] {
				a.inFlight.Store(5) // busier than the frozen one, and answering
				a.waiting.Store(5)
				a.quiet.Store(p.now())
			}
			for range 1000 {
				if a, _ := p.pick(t.Context()); a == frozen {
					t.Fatal("the stalled address was picked")
				}
			}
			for _, a := range v.ready {
				a.waiting.Store(1)
				a.quiet.Store(p.now() - int64(time.Second))
			}
			if _, err := p.pick(t.Context()); err != nil {
				t.Fatalf("every address stalled: %v, want a pick", err)
			}
		})
	}
}

// TestLeastRequestDistinct: least_request compares two distinct
// addresses: the one with the most calls in flight is never picked.
func TestLeastRequestDistinct(t *testing.T) {
	p := newTestPool(t, LeastRequest, 4)
	v := p.view.Load()
	busy := v.ready[2]
	busy.inFlight.Store(1)
	for range 1000 {
		if a, _ := p.pick(t.Context()); a == busy {
			t.Fatal("the address with the most calls in flight was picked")
		}
	}
}

// BenchmarkGRPCPick is the picker of grpc-go's path alone, a unary call's
// pick and its Done, on 4 addresses (least_request): what the pool as
// grpc-go's balancer costs a call. The Done callback is the one
// allocation.
func BenchmarkGRPCPick(b *testing.B) {
	p := newTestPool(b, LeastRequest, 4)
	v := p.view.Load()
	for _, a := range v.ready {
		a.sub.Store(&subConn{a: a})
	}
	v.grpc = v.ready
	ctx, o := WithOrigin(b.Context())
	o.unary = true
	info := balancer.PickInfo{FullMethodName: "/bench.v1.EchoService/Echo", Ctx: ctx}
	pk := &picker{p}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r, err := pk.Pick(info)
			if err != nil {
				b.Fatal(err)
			}
			r.Done(balancer.DoneInfo{BytesReceived: true})
		}
	})
}
