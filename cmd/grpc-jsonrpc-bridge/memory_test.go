package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestTrimWhenIdle: nothing served, nothing to trim; quiet after a burst,
// one trim and no second; busy, no trim while requests keep coming; quiet
// again, one trim. The clock is the test's: trimOnTicks is given each tick
// (what trimWhenIdle's ticker of idle/5 gives it), and the test waits for
// the tick to be taken, so a loaded machine cannot upset it.
func TestTrimWhenIdle(t *testing.T) {
	const idle = 100 * time.Millisecond
	var served atomic.Uint64
	var trims atomic.Int32
	ticks := make(chan time.Time)
	looked := make(chan struct{}) // trimOnTicks read served: once at its start, once a tick
	count := func() uint64 { n := served.Load(); looked <- struct{}{}; return n }
	start := time.Unix(1000, 0)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimOnTicks(ctx, ticks, start, count, idle, func() { trims.Add(1) })
	}()
	defer func() { cancel(); <-done }()
	<-looked

	now := start
	// tick advances the clock by d, lets trimOnTicks look, and returns the
	// trims so far. The second tick, at the same time and with served
	// unchanged, decides nothing new; it is taken only once the first was
	// handled (its trim, if any, counted), and its look at served is
	// awaited, so that served changes only between ticks.
	tick := func(d time.Duration) int32 {
		now = now.Add(d)
		ticks <- now
		<-looked
		ticks <- now
		<-looked
		return trims.Load()
	}
	step := idle / 5
	for range 10 {
		if n := tick(step); n != 0 {
			t.Fatalf("nothing served yet: %d trims, want none", n)
		}
	}
	served.Add(5)
	tick(step) // the burst is seen: the quiet starts
	for i := 1; i < 5; i++ {
		if n := tick(step); n != 0 {
			t.Fatalf("quiet for %v of %v after a burst: %d trims, want none yet", time.Duration(i)*step, idle, n)
		}
	}
	if n := tick(step); n != 1 {
		t.Fatalf("quiet for %v after a burst: %d trims, want 1", idle, n)
	}
	for range 10 {
		if n := tick(step); n != 1 {
			t.Fatalf("still quiet: %d trims, want no second one", n)
		}
	}
	for range 20 { // busy: a request every 3/5 of idle, no trim while they come
		served.Add(1)
		if n := tick(idle * 3 / 5); n != 1 {
			t.Fatalf("busy: %d trims, want none while requests come faster than idle", n-1)
		}
	}
	tick(step)
	for range 4 {
		tick(step)
	}
	if n := tick(step); n != 2 {
		t.Fatalf("quiet again for %v: %d trims, want 2 in all", idle, n)
	}
}
