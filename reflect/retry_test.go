package reflect

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

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

// TestWatcherBackendStartsLater: a backend that is not up yet is retried,
// each failure a Warn record with its attempt number, until it answers;
// then its catalog is installed.
func TestWatcherBackendStartsLater(t *testing.T) {
	addr := closedAddr(t)
	// Short client reconnect backoff so the test does not wait for grpc's 1s.
	conn := dialTCP(t, addr, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 50 * time.Millisecond},
		MinConnectTimeout: time.Second,
	}))
	logger, records := newSignalLogger(1000)
	w := NewWatcher([]Source{{Name: "later", Conn: conn}}, WatchOptions{Retry: RetryOptions{
		MinBackoff: time.Millisecond,
		MaxBackoff: 20 * time.Millisecond,
		Logger:     logger,
	}})
	installed, _ := runWatcher(t, w)

	r := <-records // the backend is not up yet
	wantWarn(t, r, 1)
	if v, _ := recordAttr(r, "backend"); v.String() != "later" {
		t.Errorf("backend = %v, want later", v)
	}
	testserver.Start(t, testserver.Options{Addr: addr, Services: fourServices, NoConn: true})

	var methods []string
	for _, md := range next(t, installed).Methods() {
		methods = append(methods, string(md.FullName()))
	}
	slices.Sort(methods)
	if !slices.Equal(methods, wantMethods) {
		t.Errorf("Methods() = %q, want %q", methods, wantMethods)
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

// TestRetryBoundsEachAttempt: each discovery attempt the Watcher retries
// (discoverOnce, bounded by attemptTimeout there) ends at its own
// deadline, so a stalled backend is retried rather than waited for.
func TestRetryBoundsEachAttempt(t *testing.T) {
	conn := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Reflection: testserver.ReflectionNone,
		Services: append([]testserver.Service{func(s *grpc.Server) { reflectionv1.RegisterServerReflectionServer(s, stalledReflection{}) }}, fourServices...)}).Conn()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logger, records := newSignalLogger(1000)
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		done <- retry(ctx, RetryOptions{MinBackoff: time.Millisecond}.withDefaults(), func() error {
			_, err := discoverOnce(ctx, conn, 20*time.Millisecond)
			return err
		}, func(attempt int, err error, wait time.Duration) {
			logger.Warn("reflect: discovery failed", "attempt", attempt, "error", err)
		})
	})
	t.Cleanup(wg.Wait)
	for attempt := int64(1); attempt <= 2; attempt++ {
		r := <-records
		wantWarn(t, r, attempt)
		v, _ := recordAttr(r, "error")
		if err, _ := v.Any().(error); status.Code(err) != codes.DeadlineExceeded {
			t.Errorf("attempt %d error = %v, want DeadlineExceeded", attempt, err)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("retry error = %v, want context.Canceled", err)
	}
}

// TestWatcherContextDone: a Watcher whose context ends before any backend
// answered returns nil from Run and installs nothing, whether the context
// ends while it waits to retry or had ended already.
func TestWatcherContextDone(t *testing.T) {
	tests := []struct {
		name string
		// ctx returns the context to run with and ends it once the
		// first failure is observed.
		ctx func(parent context.Context) (context.Context, func())
	}{
		{
			name: "cancelled while waiting",
			ctx: func(parent context.Context) (context.Context, func()) {
				return context.WithCancel(parent)
			},
		},
		{
			name: "deadline already passed",
			ctx: func(parent context.Context) (context.Context, func()) {
				return context.WithDeadline(parent, time.Now().Add(-time.Second))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conn := dialBufconn(t, reflectionNone)
			ctx, end := tt.ctx(t.Context())
			defer end()
			logger, records := newSignalLogger(1000)
			w := NewWatcher([]Source{{Name: "none", Conn: conn}}, WatchOptions{Retry: RetryOptions{MinBackoff: time.Hour, Logger: logger}})
			installs := 0
			done := make(chan error, 1)
			var wg sync.WaitGroup
			wg.Go(func() { done <- w.Run(ctx, func(*Catalog) { installs++ }) })
			t.Cleanup(wg.Wait)
			var err error
			select {
			case r := <-records:
				wantWarn(t, r, 1)
				end()
				err = <-done
			case err = <-done:
			}
			if err != nil || installs != 0 {
				t.Errorf("Run = %v with %d installs, want nil and none", err, installs)
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
