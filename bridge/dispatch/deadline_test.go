package dispatch

import (
	"context"
	"testing"
	"time"
)

// TestDeadline: the one place a call's deadline is set. A call has the
// timeout its Exchange asks for, up to max_call_timeout, or call_timeout;
// a stream answered live may ask for up to the larger of max_call_timeout
// and stream_timeout, and has stream_timeout (when set) if it asks for
// none.
func TestDeadline(t *testing.T) {
	const call, maxCall, stream = 10 * time.Second, 60 * time.Second, 3600 * time.Second
	for _, tc := range []struct {
		name          string
		streamTimeout time.Duration
		asked         time.Duration
		live          bool
		want          time.Duration
	}{
		{"none asked", stream, 0, false, call},
		{"asked", stream, 30 * time.Second, false, 30 * time.Second},
		{"asked too much", stream, 2 * maxCall, false, maxCall},
		{"live, none asked", stream, 0, true, stream},
		{"live, none asked, no stream_timeout", 0, 0, true, call},
		{"live, asked past max_call_timeout", stream, 2 * maxCall, true, 2 * maxCall},
		{"live, asked past stream_timeout", stream, 2 * stream, true, stream},
		{"live, no stream_timeout, asked too much", 0, 2 * maxCall, true, maxCall},
	} {
		e := New(nil, Options{CallTimeout: call, MaxCallTimeout: maxCall, StreamTimeout: tc.streamTimeout})
		start := time.Now()
		ctx, cancel := e.deadline(context.Background(), &Exchange{Timeout: tc.asked}, tc.live)
		d, _ := ctx.Deadline()
		cancel()
		if got := d.Sub(start); got < tc.want || got > tc.want+time.Second {
			t.Errorf("%s: got a deadline in %v, want %v", tc.name, got.Round(time.Second), tc.want)
		}
	}
}
