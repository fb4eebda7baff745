package backend

import (
	"log/slog"
	"strconv"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend/internal/unary"
)

// newTestPool is a pool of n addresses whose view has them all ready,
// without connecting: what pick reads.
func newTestPool(tb testing.TB, balance string, n int) *pool {
	tb.Helper()
	p := newPool("test", target{kind: fixed}, poolOptions{Balance: balance, Direct: true}, slog.New(slog.DiscardHandler))
	v := &view{changed: make(chan struct{})}
	for i := range n {
		c, err := unary.New("127.0.0.1:"+strconv.Itoa(i+1), unary.Options{})
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
	return p
}

// BenchmarkPick is the picker alone, on every call: one address (the
// bridge's path before load balancing), and 4 by each policy. It takes
// no lock and allocates nothing.
func BenchmarkPick(b *testing.B) {
	for _, tc := range []struct {
		balance string
		n       int
	}{{LeastRequest, 1}, {LeastRequest, 4}, {RoundRobin, 4}, {PickFirst, 4}} {
		b.Run(tc.balance+"/"+strconv.Itoa(tc.n), func(b *testing.B) {
			p := newTestPool(b, tc.balance, tc.n)
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
