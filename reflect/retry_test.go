package reflect

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
)

// result is what a DiscoverWithRetry running in a goroutine returned.
type result struct {
	reg *Registry
	err error
}

// goDiscover runs discover in a goroutine the test waits for at cleanup
// and returns the channel its result arrives on.
func goDiscover(t *testing.T, discover func() (*Registry, error)) <-chan result {
	t.Helper()
	done := make(chan result, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		reg, err := discover()
		done <- result{reg, err}
	})
	t.Cleanup(wg.Wait)
	return done
}

// wantWarn checks that r is a Warn record of the given attempt with an error.
func wantWarn(t *testing.T, r slog.Record, attempt int64) {
	t.Helper()
	if r.Level != slog.LevelWarn {
		t.Errorf("level = %v, want WARN", r.Level)
	}
	if v, ok := recordAttr(r, "attempt"); !ok || v.Int64() != attempt {
		t.Errorf("attempt = %v, want %d", v, attempt)
	}
	if v, ok := recordAttr(r, "error"); !ok || v.Any() == nil {
		t.Errorf("record has no error")
	}
}

func TestDiscoverWithRetryBackendStartsLater(t *testing.T) {
	addr := closedAddr(t)
	// Short client reconnect backoff so the test does not wait for grpc's 1s.
	conn := dialTCP(t, addr, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond},
		MinConnectTimeout: time.Second,
	}))
	logger, records := newSignalLogger(1000)
	done := goDiscover(t, func() (*Registry, error) {
		return DiscoverWithRetry(t.Context(), conn, RetryOptions{
			MinBackoff: time.Millisecond,
			MaxBackoff: 20 * time.Millisecond,
			Logger:     logger,
		})
	})

	wantWarn(t, <-records, 1) // the backend is not up yet
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on reserved %s: %v", addr, err)
	}
	serve(t, newBackend(reflectionBoth), lis)

	res := <-done
	if res.err != nil {
		t.Fatalf("DiscoverWithRetry: %v", res.err)
	}
	if got := methodNames(res.reg); !slices.Equal(got, wantMethods) {
		t.Errorf("Methods() = %q, want %q", got, wantMethods)
	}
}

// stalledReflection is a v1 reflection service that never answers.
type stalledReflection struct {
	reflectionv1.UnimplementedServerReflectionServer
}

func (stalledReflection) ServerReflectionInfo(stream reflectionv1.ServerReflection_ServerReflectionInfoServer) error {
	<-stream.Context().Done()
	return status.FromContextError(stream.Context().Err()).Err()
}

func TestDiscoverWithRetryBoundsEachAttempt(t *testing.T) {
	s := newBackend(reflectionNone)
	reflectionv1.RegisterServerReflectionServer(s, stalledReflection{})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	serve(t, s, lis)
	conn := dialTCP(t, lis.Addr().String())

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logger, records := newSignalLogger(1000)
	done := goDiscover(t, func() (*Registry, error) {
		return discoverWithRetry(ctx, conn, RetryOptions{MinBackoff: time.Millisecond, Logger: logger}, 20*time.Millisecond)
	})
	for attempt := int64(1); attempt <= 2; attempt++ {
		r := <-records
		wantWarn(t, r, attempt)
		v, _ := recordAttr(r, "error")
		if err, _ := v.Any().(error); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("attempt %d error = %v, want DeadlineExceeded", attempt, err)
		}
	}
	cancel()
	if res := <-done; !errors.Is(res.err, context.Canceled) {
		t.Errorf("DiscoverWithRetry error = %v, want context.Canceled", res.err)
	}
}

func TestDiscoverWithRetryContextDone(t *testing.T) {
	tests := []struct {
		name string
		// ctx returns the context to discover with and ends it once the
		// first failure is observed.
		ctx     func(parent context.Context) (context.Context, func())
		wantErr error
	}{
		{
			name: "cancelled while waiting",
			ctx: func(parent context.Context) (context.Context, func()) {
				return context.WithCancel(parent)
			},
			wantErr: context.Canceled,
		},
		{
			name: "deadline already passed",
			ctx: func(parent context.Context) (context.Context, func()) {
				return context.WithDeadline(parent, time.Now().Add(-time.Second))
			},
			wantErr: context.DeadlineExceeded,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := dialBufconn(t, reflectionNone)
			ctx, end := tt.ctx(t.Context())
			defer end()
			logger, records := newSignalLogger(1000)
			done := goDiscover(t, func() (*Registry, error) {
				return DiscoverWithRetry(ctx, conn, RetryOptions{MinBackoff: time.Hour, Logger: logger})
			})
			var res result
			select {
			case r := <-records:
				wantWarn(t, r, 1)
				end()
				res = <-done
			case res = <-done:
			}
			if res.err != tt.wantErr || res.reg != nil {
				t.Errorf("DiscoverWithRetry = %v, %v, want nil, %v", res.reg, res.err, tt.wantErr)
			}
		})
	}
}

func TestRetryOptionsDefaults(t *testing.T) {
	tests := []struct {
		name     string
		opts     RetryOptions
		min, max time.Duration
	}{
		{name: "zero", min: 100 * time.Millisecond, max: 10 * time.Second},
		{name: "set", opts: RetryOptions{MinBackoff: time.Second, MaxBackoff: time.Minute}, min: time.Second, max: time.Minute},
		{name: "max below min", opts: RetryOptions{MinBackoff: time.Second, MaxBackoff: time.Millisecond}, min: time.Second, max: time.Second},
		{name: "negative", opts: RetryOptions{MinBackoff: -1, MaxBackoff: -1}, min: 100 * time.Millisecond, max: 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.opts.withDefaults()
			if got.MinBackoff != tt.min || got.MaxBackoff != tt.max {
				t.Errorf("got %v..%v, want %v..%v", got.MinBackoff, got.MaxBackoff, tt.min, tt.max)
			}
			if got.Logger == nil {
				t.Errorf("got nil Logger, want a discarding one")
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		name     string
		min, max time.Duration
	}{
		{name: "defaults", min: 100 * time.Millisecond, max: 10 * time.Second},
		{name: "equal", min: time.Second, max: time.Second},
		{name: "huge max", min: time.Nanosecond, max: math.MaxInt64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ceiling := tt.min
			for attempt := 1; attempt <= 100; attempt++ {
				for range 20 {
					got := backoff(attempt, tt.min, tt.max)
					if got < max(tt.min, ceiling/2) || got > ceiling {
						t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, got, max(tt.min, ceiling/2), ceiling)
					}
				}
				if ceiling > tt.max/2 {
					ceiling = tt.max
				} else {
					ceiling *= 2
				}
			}
		})
	}
}
