package reflect

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestWatcherWithoutReflection: a backend answering Unimplemented to
// reflection is warned of once, saying to use --protoset or --proto, and
// retried at the slowest pace, each later failure at debug level.
func TestWatcherWithoutReflection(t *testing.T) {
	conn := dialBufconn(t, reflectionNone)
	logger, records := newSignalLogger(1000)
	const maxBackoff = 40 * time.Millisecond
	w := NewWatcher([]Source{{Name: "plain", Conn: conn}}, WatchOptions{
		Retry: RetryOptions{MinBackoff: time.Millisecond, MaxBackoff: maxBackoff, Logger: logger},
	})
	runWatcher(t, w)
	var warns, debugs int
	deadline := time.After(20 * time.Second)
	for debugs < 3 {
		var r slog.Record
		select {
		case r = <-records:
		case <-deadline:
			t.Fatalf("got %d warnings and %d debug records, want a warning and then 3 debug records", warns, debugs)
		}
		v, _ := recordAttr(r, "error")
		if err, _ := v.Any().(error); !errors.Is(err, ErrReflectionUnsupported) {
			t.Errorf("got error %v, want ErrReflectionUnsupported", v)
		}
		// The slowest pace: the capped backoff, jittered down by at
		// most half, from the first failure on.
		if wait, _ := recordAttr(r, "retry_in"); wait.Duration() < maxBackoff/2 {
			t.Errorf("attempt %v: retry in %v, want at least %v", must(recordAttr(r, "attempt")), wait.Duration(), maxBackoff/2)
		}
		switch r.Level {
		case slog.LevelWarn:
			warns++
			if !strings.Contains(r.Message, "--protoset") || !strings.Contains(r.Message, "--proto") {
				t.Errorf("got warning %q, want it to say to use --protoset or --proto", r.Message)
			}
		case slog.LevelDebug:
			debugs++
		default:
			t.Errorf("got a %v record %q", r.Level, r.Message)
		}
	}
	if warns != 1 {
		t.Errorf("got %d warnings, want 1", warns)
	}
	if st := w.Status(); st.Backends[0].State != StateDiscovering || !strings.Contains(st.Backends[0].LastError, "reflection") {
		t.Errorf("got status %+v, want discovering with the reflection error", st)
	}
}

func must(v slog.Value, _ bool) slog.Value { return v }
