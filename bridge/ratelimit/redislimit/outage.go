package redislimit

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// outage is the state of the store, for Status.
type outage struct {
	since  time.Time // when the store stopped, or started, answering
	reason string
}

// failed counts a failed round trip and, when the store was up, starts
// an outage: logged once, and probed until the store answers.
func (l *Limiter) failed(err error) {
	l.errors.Add(1)
	if !l.down.CompareAndSwap(false, true) {
		return
	}
	reason := classify(err)
	l.mu.Lock()
	l.outage = outage{since: time.Now(), reason: reason}
	l.mu.Unlock()
	l.log.Warn("the rate limit store does not answer; rate_limit_store_fallback decides until it does",
		"store", l.store, "reason", reason, "fallback", string(l.fallback), "error", err.Error())
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// probeLoop asks the store once at once, and then every interval during
// an outage, until ctx is done.
func (l *Limiter) probeLoop(ctx context.Context, interval time.Duration) {
	defer close(l.done)
	l.probe(ctx)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if !l.down.Load() {
			select {
			case <-ctx.Done():
				return
			case <-l.wake:
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l.probe(ctx)
		}
	}
}

// probe asks the store a decision that takes nothing, as a call's round
// trip would (the script, the password), and ends an outage when it
// answers.
func (l *Limiter) probe(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, err := l.rl.AllowN(ctx, keyPrefix+":probe", l.limit, 0)
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return // closing
	}
	if err != nil {
		l.failed(err)
		return
	}
	if l.down.CompareAndSwap(true, false) {
		l.mu.Lock()
		was := l.outage
		l.outage = outage{since: time.Now()}
		l.mu.Unlock()
		for _, st := range *l.ids.Load() {
			st.blocked.Store(0) // the store decides again from its own state
		}
		l.log.Info("the rate limit store answers again; the limit is shared again",
			"store", l.store, "outage", time.Since(was.since).Round(time.Millisecond).String())
	}
}

// classify names the kind of a failed round trip for Status.
func classify(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case strings.Contains(err.Error(), "WRONGPASS"), strings.Contains(err.Error(), "NOAUTH"),
		strings.Contains(err.Error(), "invalid password"), strings.Contains(err.Error(), "AUTH"):
		return "auth"
	case errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		// A connection the store closed, or reset, is a store gone as
		// much as one that refuses to connect.
		return "unreachable"
	}
	return "error"
}
