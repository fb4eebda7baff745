package reflect

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"time"

	"google.golang.org/grpc"
)

// Defaults of RetryOptions and the bound of each discovery attempt.
const (
	defaultMinBackoff = 100 * time.Millisecond
	defaultMaxBackoff = 10 * time.Second
	attemptTimeout    = 10 * time.Second
)

// RetryOptions tunes how a Watcher retries the first discovery of each
// backend (see WatchOptions.Retry). The zero value is ready to use.
type RetryOptions struct {
	// MinBackoff is the wait after the first failure; zero means 100ms.
	MinBackoff time.Duration
	// MaxBackoff caps the wait between attempts; zero means 10s. A value
	// below MinBackoff is raised to MinBackoff.
	MaxBackoff time.Duration
	// Logger receives a Warn record for every failed attempt; nil discards.
	Logger *slog.Logger
}

// withDefaults fills the unset fields of o.
func (o RetryOptions) withDefaults() RetryOptions {
	if o.MinBackoff <= 0 {
		o.MinBackoff = defaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = defaultMaxBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// retry calls attempt until it succeeds or ctx is done, waiting backoff
// between opts' bounds after each failure, which failed reports; after a
// failure wrapping ErrReflectionUnsupported it waits as long as after the
// last of many. It returns nil after a success and ctx.Err() once ctx is
// done.
func retry(ctx context.Context, opts RetryOptions, attempt func() error, failed func(n int, err error, wait time.Duration)) error {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for n := 1; ; n++ {
		err := attempt()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := backoff(n, opts.MinBackoff, opts.MaxBackoff)
		if errors.Is(err, ErrReflectionUnsupported) {
			// Reflection will not appear soon (only with a redeploy):
			// retry at the slowest pace from the start.
			wait = backoff(math.MaxInt, opts.MinBackoff, opts.MaxBackoff)
		}
		failed(n, err, wait)
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
		}
	}
}

// discoverOnce is one Discover bounded by timeout.
func discoverOnce(ctx context.Context, conn grpc.ClientConnInterface, timeout time.Duration) (*Registry, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return Discover(ctx, conn)
}

// backoff is the wait after failed attempt number attempt (from 1): min
// doubled per attempt, capped at max, then jittered down by up to half but
// never below min.
func backoff(attempt int, minWait, maxWait time.Duration) time.Duration {
	d := minWait
	for i := 1; i < attempt && d < maxWait; i++ {
		if d > maxWait/2 {
			d = maxWait
			break
		}
		d *= 2
	}
	d = min(d, maxWait)
	half := d / 2
	d = half + rand.N(d-half+1)
	return max(d, minWait)
}
