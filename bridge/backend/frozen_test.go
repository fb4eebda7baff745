package backend_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/fleet"
)

// TestFrozen: one of 4 backend processes stopped (SIGSTOP: its kernel
// still accepts connections and takes what is sent, nothing answers)
// under load from 16 callers in a loop, with a 5 s deadline, on both
// paths of unary calls at once (a load of its own each). On each path:
// the calls that fail are at most those it had in flight plus the load's
// concurrency (one round, not one per deadline); from 2 s after the
// freeze it is sent under 1% of the calls; the calls a second during the
// freeze are at least half of those before it; after SIGCONT it takes
// calls again within outlier_ejection_time + 10 s.
func TestFrozen(t *testing.T) {
	const (
		ejection = 2 * time.Second
		freeze   = 6 * time.Second // past the deadline, within the ejection that follows it
	)
	f := fleet.StartProcesses(t, 4)
	frozen := f.Pod(fleet.IP(3))
	type run struct {
		path path
		c    *backend.Conn
		l    *load
		// inFlight is what the frozen address had in flight when it froze;
		// before and during the calls a second that succeeded.
		inFlight        int
		before, during  float64
		sentTo, sentAll uint64
		failed          int
		back            time.Duration
	}
	var runs []*run
	for _, p := range paths {
		c := dialFleet(t, f, p, backend.Options{Outlier: quickOutlier(ejection)}, 4)
		runs = append(runs, &run{path: p, c: c})
	}
	for _, r := range runs {
		r.l = startLoad(callerOf(r.c, r.path), 16, 0)
		defer r.l.finish()
	}
	start := time.Now()
	for _, r := range runs {
		r.l.awaitCalls(t, start, 2000) // warmed up
	}
	steady := time.Now()
	for _, r := range runs {
		r.l.awaitCalls(t, steady, 4000)
	}
	if err := frozen.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozenAt := time.Now()
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			if err := frozen.Thaw(); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(thaw) // and the fleet's cleanup kills it
	for _, r := range runs {
		r.inFlight = inFlightOn(r.c, frozen.Addr)
	}

	// Sleeps: 2 s after the freeze and the freeze's end are the bounds
	// of what is measured (the share sent to the frozen address, the
	// calls a second during the freeze), points on the clock rather than
	// conditions to await.
	time.Sleep(time.Until(frozenAt.Add(2 * time.Second)))
	sent := make([]map[string]uint64, len(runs))
	for i, r := range runs {
		sent[i] = sentTo(r.c)
	}
	time.Sleep(time.Until(frozenAt.Add(freeze)))
	for i, r := range runs {
		r.sentTo, r.sentAll = delta(sent[i], sentTo(r.c), frozen.Addr)
		if st := stateOf(r.c, frozen.Addr); st != "ejected" {
			t.Errorf("%s: the frozen address is %s after its calls' deadline, want ejected", r.path.name, st)
		}
	}
	thaw()
	thawedAt := time.Now()

	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(func() {
			err := await.Try(time.Until(thawedAt.Add(ejection+10*time.Second)), func() error {
				if r.l.count(func(rec record) bool { return rec.addr == frozen.Addr && rec.start.After(thawedAt) }) == 0 {
					return errors.New("no call on the thawed address")
				}
				return nil
			})
			if err == nil {
				r.back = time.Since(thawedAt)
			}
		})
	}
	wg.Wait()
	for _, r := range runs {
		recs := r.l.finish()
		for _, rec := range recs {
			switch {
			case rec.err != nil:
				r.failed++
			case rec.end.After(steady) && rec.end.Before(frozenAt):
				r.before++
			case rec.end.After(frozenAt) && rec.end.Before(frozenAt.Add(freeze)):
				r.during++
			}
		}
		r.before /= frozenAt.Sub(steady).Seconds()
		r.during /= freeze.Seconds()
		share := 100 * float64(r.sentTo) / float64(r.sentAll)
		t.Logf("%s: %d in flight at the freeze, %d calls failed; from 2 s after it %.2f%% of %d calls sent to it; %.0f calls/s before, %.0f during; back %s after SIGCONT",
			r.path.name, r.inFlight, r.failed, share, r.sentAll, r.before, r.during, r.back.Round(time.Millisecond))
		if r.failed > r.inFlight+16 {
			t.Errorf("%s: %d calls failed, want at most the %d in flight at the freeze and the load's 16", r.path.name, r.failed, r.inFlight)
		}
		if share >= 1 {
			t.Errorf("%s: from 2 s after the freeze the frozen address was sent %.2f%% of the calls, want under 1%%", r.path.name, share)
		}
		if r.during < r.before/2 {
			t.Errorf("%s: %.0f calls/s during the freeze, %.0f before: want at least half", r.path.name, r.during, r.before)
		}
		if r.back == 0 {
			t.Errorf("%s: no call on the address within %s of SIGCONT", r.path.name, ejection+10*time.Second)
		}
	}
}

func inFlightOn(c *backend.Conn, addr string) int {
	for _, a := range c.Addresses().Addresses {
		if a.Address == addr {
			return a.InFlight
		}
	}
	return 0
}
