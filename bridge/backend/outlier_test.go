package backend_test

import (
	"context"
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	rpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/fleet"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// quickOutlier is outlier detection with the defaults but short ejections,
// so that a test sees an address come back in seconds.
func quickOutlier(ejection time.Duration) *backend.Outlier {
	o := backend.DefaultOutlier()
	o.EjectionTime, o.MaxEjectionTime = ejection, 2*ejection
	return &o
}

// sentTo returns the calls the backend sent to each address so far (its
// own count, both paths), by address.
func sentTo(c *backend.Conn) map[string]uint64 {
	out := map[string]uint64{}
	for _, a := range c.Addresses().Addresses {
		out[a.Address] = a.Calls
	}
	return out
}

// delta is the calls sent to addr between two sentTo, and to all.
func delta(before, after map[string]uint64, addr string) (to, all uint64) {
	for a, n := range after {
		all += n - before[a]
	}
	return after[addr] - before[addr], all
}

// TestFastFailing: one of 4 addresses answers every call at once with
// UNAVAILABLE, under load at concurrency 16, on every path (the
// detector and the picker are the same for all): from 4 s after the
// fault it gets under 5% of the calls and under 3% of all calls fail;
// once it heals it takes calls again within outlier_ejection_time + 10 s.
// (Without outlier detection, least_request would send it a third or
// more of the calls: it always has the fewest in flight.)
func TestFastFailing(t *testing.T) {
	const ejection = time.Second
	for _, path := range allPaths {
		t.Run(path.name, func(t *testing.T) {
			t.Parallel()
			f := fleet.Start(t, 4)
			o := quickOutlier(ejection)
			o.MaxEjectionTime = ejection // back within a second of healing
			c := dialFleet(t, f, path, backend.Options{Outlier: o}, 4)
			l := startLoad(callerOf(c, path), 16, 0)
			defer l.finish()
			l.awaitCalls(t, time.Time{}, 200)
			bad := f.Pod(fleet.IP(3))
			bad.SetFail(codes.Unavailable)
			fault := time.Now()
			await.Until(t, 10*time.Second, "the address ejected", func() bool { return stateOf(c, bad.Addr) == "ejected" })

			// Sleeps: "from 4 s after the fault" and the second measured
			// from then are bounds on the clock of what is measured, not
			// conditions to await (the 2000 calls in it are awaited).
			time.Sleep(time.Until(fault.Add(4 * time.Second)))
			from, before := time.Now(), sentTo(c)
			l.awaitCalls(t, from, 2000)
			time.Sleep(time.Until(from.Add(time.Second)))
			to, all := delta(before, sentTo(c), bad.Addr)
			to2 := time.Now()
			var calls, failed int
			for _, r := range l.snapshot() {
				if r.start.After(from) && r.end.Before(to2) {
					calls++
					if r.err != nil {
						failed++
					}
				}
			}
			share, failedShare := 100*float64(to)/float64(all), 100*float64(failed)/float64(calls)
			t.Logf("from 4 s after the fault: %.2f%% of %d calls sent to it, %.2f%% of %d failed", share, all, failedShare, calls)
			if share >= 5 || failedShare >= 3 {
				t.Errorf("from 4 s after the fault the address got %.2f%% of the calls and %.2f%% failed, want under 5%% and 3%%", share, failedShare)
			}

			bad.SetFail(codes.OK)
			healed := time.Now()
			await.Until(t, ejection+10*time.Second, "calls served by the healed address", func() bool {
				return l.count(func(r record) bool { return r.addr == bad.Addr && r.start.After(healed) }) > 0
			})
			t.Logf("the healed address took calls %s after it healed", time.Since(healed).Round(time.Millisecond))
		})
	}
}

// TestApplicationErrors: an address that answers NOT_FOUND to every call
// (an application's answer, not a failure) keeps its share, 25% ± 4
// points, on every path.
func TestApplicationErrors(t *testing.T) {
	for _, path := range allPaths {
		t.Run(path.name, func(t *testing.T) {
			f := fleet.Start(t, 4)
			c := dialFleet(t, f, path, backend.Options{}, 4)
			f.Pod(fleet.IP(3)).SetFail(codes.NotFound)
			before := sentTo(c)
			recs := startLoad(callerOf(c, path), 16, 4000).finish()
			to, all := delta(before, sentTo(c), f.Addr(fleet.IP(3)))
			share := 100 * float64(to) / float64(all)
			_, failed := shares(recs)
			t.Logf("the NOT_FOUND address got %.1f%% of %d calls", share, all)
			if math.Abs(share-25) > 4 || len(failed) != int(to) {
				t.Errorf("the NOT_FOUND address got %.1f%% of the calls (%d failed), want 25%% ± 4", share, len(failed))
			}
			if st := stateOf(c, f.Addr(fleet.IP(3))); st != "ready" {
				t.Errorf("the NOT_FOUND address is %s, want ready", st)
			}
		})
	}
}

// TestEjectionLimits: never more than outlier_max_ejection_percent of the
// addresses ejected at once, but one of two or more; never the last one.
func TestEjectionLimits(t *testing.T) {
	for _, tc := range []struct {
		name          string
		pods, failing int
		percent       int
		ejected       int
	}{
		{name: "half of 4", pods: 4, failing: 3, percent: 50, ejected: 2},
		{name: "one of 2 at 0%", pods: 2, failing: 2, percent: 0, ejected: 1},
		{name: "never the last", pods: 2, failing: 2, percent: 100, ejected: 1},
		{name: "the only one", pods: 1, failing: 1, percent: 100, ejected: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := fleet.Start(t, tc.pods)
			o := quickOutlier(time.Minute)
			o.MaxEjectionPercent = tc.percent
			c := dialFleet(t, f, directPath, backend.Options{Outlier: o}, tc.pods)
			for i := range tc.failing {
				f.Pod(fleet.IP(i)).SetFail(codes.Unavailable)
			}
			startLoad(callerOf(c, directPath), 4, 400).finish()
			got := 0
			for _, a := range c.Addresses().Addresses {
				if a.State == "ejected" {
					got++
					if a.EjectedUntil == nil || time.Until(*a.EjectedUntil) <= 0 || time.Until(*a.EjectedUntil) > time.Minute {
						t.Errorf("%s ejected until %v, want within a minute", a.Address, a.EjectedUntil)
					}
				}
			}
			if got != tc.ejected {
				t.Errorf("%d of %d addresses ejected (%d failing, max %d%%), want %d: %+v", got, tc.pods, tc.failing, tc.percent, tc.ejected, c.Addresses())
			}
		})
	}
}

// TestInFlight: /readyz's in_flight counts every call and stream on an
// address, whichever path: a direct unary call, a grpc-go unary call, a
// stream and reflection's stream, all open at once on one address.
func TestInFlight(t *testing.T) {
	f := fleet.Start(t, 1)
	direct := dialFleet(t, f, directPath, backend.Options{}, 1)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go unaryWait(ctx, backend.For(direct))
	go unaryWait(ctx, backend.For(direct.ClientConn))
	bidi, err := testv1.NewTestServiceClient(direct).BidiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	refl, err := rpb.NewServerReflectionClient(direct).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := refl.Send(&rpb.ServerReflectionRequest{MessageRequest: &rpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := refl.Recv(); err != nil {
		t.Fatal(err)
	}
	await.Until(t, 5*time.Second, "4 calls in flight", func() bool { return inFlight(direct) == 4 })
	bidi.CloseSend()
	refl.CloseSend()
	cancel()
	await.Until(t, 5*time.Second, "no call in flight", func() bool { return inFlight(direct) == 0 })
}

var sleepRequest, _ = proto.Marshal(&testv1.SleepRequest{Duration: durationpb.New(time.Minute)})

// unaryWait makes a unary call that waits until ctx ends.
func unaryWait(ctx context.Context, inv backend.Invoker) {
	c := backend.GetCall()
	c.Method = "/test.v1.TestService/Sleep"
	c.Request = sleepRequest
	inv.Invoke(ctx, c)
}

func inFlight(c *backend.Conn) int {
	n := 0
	for _, a := range c.Addresses().Addresses {
		n += a.InFlight
	}
	return n
}
