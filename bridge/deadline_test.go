package bridge_test

import (
	"context"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"encoding/json"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// deadlineRecorder records the time left before the deadline of each
// call the backend receives, and signals when a call ends because its
// context did.
type deadlineRecorder struct {
	mu        sync.Mutex
	left      []time.Duration
	started   chan struct{}
	cancelled chan error
}

func newDeadlineRecorder() *deadlineRecorder {
	return &deadlineRecorder{started: make(chan struct{}, 100), cancelled: make(chan error, 100)}
}

func (d *deadlineRecorder) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	if dl, ok := ctx.Deadline(); ok {
		d.mu.Lock()
		d.left = append(d.left, time.Until(dl))
		d.mu.Unlock()
	}
	d.started <- struct{}{}
	resp, err := h(ctx, req)
	if ctx.Err() != nil {
		d.cancelled <- ctx.Err()
	}
	return resp, err
}

func (d *deadlineRecorder) lastLeft(t *testing.T) time.Duration {
	t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.left) == 0 {
		t.Fatal("the backend saw no deadline")
	}
	return d.left[len(d.left)-1]
}

func sleepBody(d string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Sleep","params":{"duration":"` + d + `"}}`
}

func TestRequestedTimeouts(t *testing.T) {
	// Not parallel: a 100 ms budget must reach the backend before it ends.
	tests := []struct {
		name     string
		opts     bridge.Options
		header   http.Header
		sleep    string
		wantCode string // in the body
		maxLeft  time.Duration
		minLeft  time.Duration
	}{
		{name: "Grpc-Timeout shortens", opts: bridge.Options{Limits: bridge.Limits{CallTimeout: 30 * time.Second}},
			header: http.Header{"Grpc-Timeout": {"200m"}}, sleep: "20s", wantCode: `"code":4`, maxLeft: 200 * time.Millisecond},
		{name: "X-Request-Timeout shortens", opts: bridge.Options{Limits: bridge.Limits{CallTimeout: 30 * time.Second}},
			header: http.Header{"X-Request-Timeout": {"150ms"}}, sleep: "20s", wantCode: `"code":4`, maxLeft: 150 * time.Millisecond},
		{name: "seconds", opts: bridge.Options{Limits: bridge.Limits{CallTimeout: 30 * time.Second}},
			header: http.Header{"X-Request-Timeout": {"0.2"}}, sleep: "20s", wantCode: `"code":4`, maxLeft: 200 * time.Millisecond},
		{name: "shorter of both", opts: bridge.Options{Limits: bridge.Limits{CallTimeout: 30 * time.Second}},
			header: http.Header{"Grpc-Timeout": {"10S"}, "X-Request-Timeout": {"100ms"}}, sleep: "20s", wantCode: `"code":4`, maxLeft: 100 * time.Millisecond},
		{name: "longer than call_timeout up to the max", opts: bridge.Options{Limits: bridge.Limits{CallTimeout: 50 * time.Millisecond, MaxCallTimeout: 10 * time.Second}},
			header: http.Header{"Grpc-Timeout": {"5S"}}, sleep: "0.2s", wantCode: `"result"`, minLeft: 4 * time.Second, maxLeft: 5 * time.Second},
		{name: "capped at the max", opts: bridge.Options{Limits: bridge.Limits{CallTimeout: 50 * time.Millisecond, MaxCallTimeout: 300 * time.Millisecond}},
			header: http.Header{"Grpc-Timeout": {"1H"}}, sleep: "20s", wantCode: `"code":4`, maxLeft: 300 * time.Millisecond},
		{name: "no max: only shorter", opts: bridge.Options{Limits: bridge.Limits{CallTimeout: 100 * time.Millisecond}},
			header: http.Header{"Grpc-Timeout": {"1H"}}, sleep: "20s", wantCode: `"code":4`, maxLeft: 100 * time.Millisecond},
		{name: "default", opts: bridge.Options{Limits: bridge.Limits{CallTimeout: 250 * time.Millisecond}},
			sleep: "20s", wantCode: `"code":4`, maxLeft: 250 * time.Millisecond, minLeft: 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := newDeadlineRecorder()
			e := newEnv(t, tt.opts, withServer(grpc.UnaryInterceptor(rec.intercept)))
			start := time.Now()
			w := serveWith(e, sleepBody(tt.sleep), tt.header)
			if took := time.Since(start); took > 10*time.Second {
				t.Errorf("took %s, want the timeout to end the call", took)
			}
			if w.Code != 200 || !strings.Contains(w.Body.String(), tt.wantCode) {
				t.Errorf("got HTTP %d %s, want %s", w.Code, w.Body, tt.wantCode)
			}
			if left := rec.lastLeft(t); left > tt.maxLeft || left < tt.minLeft {
				t.Errorf("the backend got a deadline %s away, want %s..%s", left, tt.minLeft, tt.maxLeft)
			}
		})
	}
}

func TestBadTimeoutHeader(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	for _, h := range []http.Header{
		{"Grpc-Timeout": {"5x"}},
		{"Grpc-Timeout": {"123456789S"}},
		{"Grpc-Timeout": {"S"}},
		{"X-Request-Timeout": {"soon"}},
		{"X-Request-Timeout": {"-1s"}},
	} {
		w := serveWith(e, sleepBody("0.001s"), h)
		for name := range h {
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), name) || !strings.Contains(w.Body.String(), "-32600") {
				t.Errorf("%v: got HTTP %d %s, want 400 naming %s", h, w.Code, w.Body, name)
			}
		}
	}
}

func TestParseGRPCTimeout(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"1H", time.Hour}, {"2M", 2 * time.Minute}, {"3S", 3 * time.Second}, {"500m", 500 * time.Millisecond},
		{"7u", 7 * time.Microsecond}, {"99999999n", 99999999}, {"0m", 0}, {"99999999H", math.MaxInt64},
	}
	for _, tt := range tests {
		if got, err := bridge.ParseGRPCTimeout(tt.in); err != nil || got != tt.want {
			t.Errorf("ParseGRPCTimeout(%q) = %s, %v; want %s", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "1", "m", "1s", "+1S", "-1S", "1.5S", "123456789n", " 1S"} {
		if _, err := bridge.ParseGRPCTimeout(bad); err == nil {
			t.Errorf("ParseGRPCTimeout(%q): got no error", bad)
		}
	}
}

// TestClientDisconnectCancelsBackendCall: a client that goes away cancels
// its call, and the backend sees it.
func TestClientDisconnectCancelsBackendCall(t *testing.T) {
	t.Parallel()
	rec := newDeadlineRecorder()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: time.Minute}}, withServer(grpc.UnaryInterceptor(rec.intercept)))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/", strings.NewReader(sleepBody("50s")))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		resp, err := testClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	await.Receive(t, 10*time.Second, "the call at the backend", rec.started)
	cancel()
	if err := <-done; err == nil {
		t.Errorf("got a reply, want the client's request cancelled")
	}
	if err := await.Receive(t, 10*time.Second, "the backend call cancelled after the client left", rec.cancelled); err != context.Canceled {
		t.Errorf("the backend's context ended with %v, want context.Canceled", err)
	}
}

// TestBatchDeadlineRule pins the one rule of a batch's deadlines: every
// call's deadline (call_timeout, or the request's timeout) runs from when
// that call starts. With batch_parallelism 2, the third of three calls
// starts when one of the first two ends; it has the whole timeout too, on
// the direct path (whose calls start in Groups) as on grpc-go's.
func TestBatchDeadlineRule(t *testing.T) {
	// Not parallel with other tests (each call has 0.8 s to spare), only
	// its two paths with each other.
	opts := bridge.Options{Limits: bridge.Limits{BatchParallelism: 2, CallTimeout: 2 * time.Second}}
	for _, tt := range []struct {
		name string
		path envOption
	}{{"direct", via(direct)}, {"grpc-go", onBufconn()}} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, opts, tt.path)
			sleep := `{"duration":"1.2s"}`
			body := "[" + req("test.v1.TestService.Sleep", sleep, "1") + "," +
				req("test.v1.TestService.Sleep", sleep, "2") + "," + req("test.v1.TestService.Sleep", sleep, "3") + "]"
			code, b := postJSON(t, testClient, e.url, body, nil)
			if code != http.StatusOK {
				t.Fatalf("HTTP %d %s", code, b)
			}
			var replies []map[string]any
			if err := json.Unmarshal(b, &replies); err != nil || len(replies) != 3 {
				t.Fatalf("replies %s: %v", b, err)
			}
			for _, r := range replies {
				if r["error"] != nil {
					t.Errorf("member %v failed: %v; each call's deadline must run from its own start", r["id"], r["error"])
				}
			}
		})
	}
}
