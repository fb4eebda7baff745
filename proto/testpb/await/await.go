// Package await is the tests' one polling helper: a test awaits a condition rather than
// sleeping for a guessed time. Every package's tests poll through it, so a slow machine
// makes a test slower, never wrong, and a condition that never holds fails naming what
// was awaited.
package await

import (
	"testing"
	"time"
)

// Every is how soon a condition is polled again at first; each later wait
// is half as long again, up to Most, so that a condition which holds at
// once costs little wait and one that takes seconds (a process to start,
// an HTTP call each poll) does not spin on a loaded machine.
const (
	Every = 2 * time.Millisecond
	Most  = 20 * time.Millisecond
)

// pause sleeps for *wait and lengthens it for the next time.
func pause(wait *time.Duration) {
	if *wait == 0 {
		*wait = Every
	}
	time.Sleep(*wait)
	*wait = min(*wait*3/2, Most)
}

// Until polls cond until it holds and returns how long that took. If it does not hold
// within d, the test fails (tb.Fatalf) naming what it awaited.
func Until(tb testing.TB, d time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	var wait time.Duration
	for !cond() {
		if time.Since(start) > d {
			tb.Fatalf("after %v: still awaiting %s", d, what)
		}
		pause(&wait)
	}
	return time.Since(start)
}

// NoError polls f until it returns nil and returns how long that took. If it still
// fails after d, the test fails with f's last error.
func NoError(tb testing.TB, d time.Duration, what string, f func() error) time.Duration {
	tb.Helper()
	start := time.Now()
	var wait time.Duration
	for {
		err := f()
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > d {
			tb.Fatalf("after %v: still awaiting %s: %v", d, what, err)
		}
		pause(&wait)
	}
}

// Try polls f until it returns nil or d passes, and returns f's last error
// (nil once it held): NoError for a caller that words the failure itself,
// or that awaits outside a test's goroutine.
func Try(d time.Duration, f func() error) error {
	start := time.Now()
	var wait time.Duration
	for {
		err := f()
		if err == nil || time.Since(start) > d {
			return err
		}
		pause(&wait)
	}
}

// Receive awaits a value (or the close) of ch and returns it. If none comes within d,
// the test fails naming what it awaited.
func Receive[T any](tb testing.TB, d time.Duration, what string, ch <-chan T) T {
	tb.Helper()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		tb.Fatalf("after %v: still awaiting %s", d, what)
		var zero T
		return zero
	}
}

// Holds checks that cond stays true for all of d (polled), for the rare assertion that
// something does not happen: the test fails at the first poll where it is false. This is
// the one wait of a fixed length, and only because "never" cannot be awaited.
func Holds(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if !cond() {
			tb.Fatalf("%s stopped holding", what)
		}
		time.Sleep(Every)
	}
}
