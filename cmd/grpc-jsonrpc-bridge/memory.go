package main

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"time"
)

// gcPercent is the bridge's GOGC when the environment sets none. Per call
// the bridge allocates short-lived buffers and keeps little, so the
// default of 100 makes it collect garbage many times a second under load;
// 200 halves that for a somewhat larger heap (docs/performance.md).
const gcPercent = 200

// setGCPercent applies gcPercent unless GOGC is set.
func setGCPercent() {
	if _, ok := os.LookupEnv("GOGC"); !ok {
		debug.SetGCPercent(gcPercent)
	}
}

// idleTrim is how long the bridge must have answered nothing before it
// returns a burst's memory to the operating system.
const idleTrim = 5 * time.Second

// trimWhenIdle calls trim once each time served has stopped changing for
// idle after it changed: a burst of load leaves a heap sized for it, which
// the runtime would otherwise keep for minutes. It looks at served every
// idle/5 (trimOnTicks).
func trimWhenIdle(ctx context.Context, served func() uint64, idle time.Duration, trim func()) {
	t := time.NewTicker(idle / 5)
	defer t.Stop()
	trimOnTicks(ctx, t.C, time.Now(), served, idle, trim)
}

// trimOnTicks is trimWhenIdle's decision, at each time ticks gives (start
// is the first quiet's start): a trim when served has not changed for idle
// since it last changed, once for each change.
func trimOnTicks(ctx context.Context, ticks <-chan time.Time, start time.Time, served func() uint64, idle time.Duration, trim func()) {
	last, quietSince, trimmed := served(), start, true
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticks:
			if n := served(); n != last {
				last, quietSince, trimmed = n, now, false
			} else if !trimmed && now.Sub(quietSince) >= idle {
				trim()
				trimmed = true
			}
		}
	}
}

// freeMemory returns the burst's memory to the operating system: two
// collections, as the buffer pools (sync.Pool) keep what the first one
// finds for one more, then debug.FreeOSMemory's scavenge.
func freeMemory() {
	runtime.GC()
	debug.FreeOSMemory()
}
