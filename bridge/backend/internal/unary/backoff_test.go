package unary

import (
	"math"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestBackoffSequence: failures in a row back off as grpc-go's
// backoff.DefaultConfig does (internal/backoff.Exponential): 1s, then
// x1.6 each time up to 120s, each wait jittered by at most 20% either way;
// ResetBackoff starts again at 1s.
func TestBackoffSequence(t *testing.T) {
	t.Parallel()
	c := newClient(t, freeAddr(t), Options{})
	err := status.Error(codes.Unavailable, "test")
	check := func(i int, want time.Duration) {
		t.Helper()
		c.mu.Lock()
		before := time.Now()
		c.failedLocked(err)
		got, wait := c.backoff, c.retryAt.Sub(before)
		c.mu.Unlock()
		if math.Abs(float64(got-want)) > float64(time.Millisecond) {
			t.Fatalf("failure %d: backoff %v, want %v", i, got, want)
		}
		if lo, hi := time.Duration(float64(want)*0.8), time.Duration(float64(want)*1.2)+time.Millisecond; wait < lo || wait > hi {
			t.Fatalf("failure %d: the next dial in %v, want %v to %v", i, wait, lo, hi)
		}
	}
	want := time.Second
	for i := range 20 {
		check(i, want)
		want = min(time.Duration(float64(want)*1.6), 120*time.Second)
	}
	if want != 120*time.Second {
		t.Fatalf("20 failures did not reach the cap: %v", want)
	}
	c.ResetBackoff()
	check(20, time.Second)

	// The jitter varies: not every wait of 1s is the same.
	waits := map[time.Duration]bool{}
	for range 10 {
		c.ResetBackoff()
		c.mu.Lock()
		before := time.Now()
		c.failedLocked(err)
		waits[c.retryAt.Sub(before).Round(10*time.Millisecond)] = true
		c.mu.Unlock()
	}
	if len(waits) < 3 {
		t.Errorf("10 first waits took %d values: no jitter", len(waits))
	}
}
