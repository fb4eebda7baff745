package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

func TestTrimWhenIdle(t *testing.T) {
	var served atomic.Uint64
	trims := make(chan struct{}, 10)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		trimWhenIdle(ctx, served.Load, 100*time.Millisecond, func() { trims <- struct{}{} })
	}()
	defer func() { cancel(); <-done }()

	expect := func(want int, within time.Duration) {
		t.Helper()
		got := 0
		deadline := time.After(within)
		for {
			select {
			case <-trims:
				got++
				continue
			case <-deadline:
			}
			break
		}
		if got != want {
			t.Fatalf("got %d trims, want %d", got, want)
		}
	}
	expect(0, 300*time.Millisecond) // nothing served yet: nothing to trim
	served.Add(5)
	expect(1, 500*time.Millisecond) // quiet after a burst: one trim
	expect(0, 300*time.Millisecond) // still quiet: no second one
	for range 5 {                   // busy: no trim while requests keep coming
		served.Add(1)
		expect(0, 60*time.Millisecond)
	}
	expect(1, 500*time.Millisecond)
}
