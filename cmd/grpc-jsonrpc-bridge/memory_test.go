package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestTrimWhenIdle: nothing served, nothing to trim; quiet after a burst,
// one trim and no second; busy, no trim while requests keep coming; quiet
// again, one trim. trimWhenIdle reads the clock (a ticker of idle/5), so
// the test holds to what a loaded machine cannot upset: a trim is awaited
// rather than expected within a guessed time, and a trim while busy fails
// the test only when no two requests (nor the last and the trim) were
// idle apart (a trim after such a quiet is right: the test was starved,
// and the busy phase runs again).
func TestTrimWhenIdle(t *testing.T) {
	const idle = 100 * time.Millisecond
	var served atomic.Uint64
	trims := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimWhenIdle(ctx, served.Load, idle, func() { trims <- struct{}{} })
	}()
	defer func() { cancel(); <-done }()

	none := func(within time.Duration, what string) {
		t.Helper()
		select {
		case <-trims:
			t.Fatalf("%s: got a trim, want none", what)
		case <-time.After(within): // a "never": its only wait is a fixed span
		}
	}
	none(300*time.Millisecond, "nothing served yet: nothing to trim")
	served.Add(5)
	await.Receive(t, 10*time.Second, "a trim after a burst", trims) // quiet after a burst: one trim
	none(300*time.Millisecond, "still quiet: no second one")

	busy := func() (starved bool) { // no trim while requests keep coming
		var at []time.Time // when each request was counted
		for range 5 {
			served.Add(1)
			at = append(at, time.Now())
			select {
			case <-trims:
				// A trim is right only after a quiet of idle: between two
				// requests, or since the last. The test's clock may lag
				// the counter's by a preemption, hence the margin.
				longest := time.Since(at[len(at)-1])
				for i := 1; i < len(at); i++ {
					longest = max(longest, at[i].Sub(at[i-1]))
				}
				if longest < idle*3/4 {
					t.Fatalf("busy: a trim with requests at most %s apart, want none while they come faster than idle (%s)", longest, idle)
				}
				return true
			case <-time.After(idle * 3 / 5): // the pace of the requests
			}
		}
		return false
	}
	for try := 0; busy(); try++ {
		if try == 5 {
			t.Fatal("busy: starved five times running")
		}
		t.Log("busy: the test was starved for longer than idle; again")
	}
	await.Receive(t, 10*time.Second, "a trim once quiet again", trims)
}
