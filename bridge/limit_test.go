package bridge_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// gate holds every Sleep call at the backend until it is opened, and
// tells how many are held.
type gate struct {
	entered chan struct{}
	open    chan struct{}
	now     atomic.Int64 // Sleep calls inside the backend now
	peak    atomic.Int64
}

func newGate() *gate { return &gate{entered: make(chan struct{}, 1<<16), open: make(chan struct{})} }

func (g *gate) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if info.FullMethod == "/test.v1.TestService/Sleep" {
		n := g.now.Add(1)
		defer g.now.Add(-1)
		for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
		}
		g.entered <- struct{}{}
		select {
		case <-g.open:
		case <-ctx.Done():
		}
	}
	return next(ctx, req)
}

// wait returns once n Sleep calls have entered the backend.
func (g *gate) wait(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		await.Receive(t, 10*time.Second, fmt.Sprintf("call %d of %d at the backend", i+1, n), g.entered)
	}
}

const sleepCall = `{"jsonrpc":"2.0","method":"test.v1.TestService.Sleep","params":{},"id":1}`

// check429 asserts a 429 with Retry-After and a RESOURCE_EXHAUSTED body.
func check429(t *testing.T, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("got HTTP %d %s, want 429", resp.StatusCode, body)
	}
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Errorf("got Retry-After %q, want whole seconds >= 1", resp.Header.Get("Retry-After"))
	}
	obj := decode(t, body).(map[string]any)
	checkEnvelope(t, obj)
	if code, st := errStatus(t, obj); code != 8 || st != "RESOURCE_EXHAUSTED" {
		t.Errorf("got %s, want error 8 RESOURCE_EXHAUSTED", body)
	}
}

func TestMaxInFlight(t *testing.T) {
	t.Parallel()
	g := newGate()
	e := newEnv(t, bridge.Options{MaxInFlight: 2}, withServer(grpc.ChainUnaryInterceptor(g.intercept)))
	var wg sync.WaitGroup
	codes := make([]int, 2)
	for i := range 2 {
		wg.Go(func() {
			resp, _ := postAs(t, e.url, nil, sleepCall)
			codes[i] = resp.StatusCode
		})
	}
	g.wait(t, 2)
	resp, body := postAs(t, e.url, nil, sleepCall)
	check429(t, resp, body)
	// Probes and other paths are not counted.
	if code, _ := e.do(t, http.MethodGet, "/readyz", "", ""); code != http.StatusOK {
		t.Errorf("readyz during the flood: got HTTP %d, want 200", code)
	}
	close(g.open)
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("held call %d: got HTTP %d, want 200", i, c)
		}
	}
	// Once they are done, there is room again.
	if resp, body := postAs(t, e.url, nil, sleepCall); resp.StatusCode != http.StatusOK {
		t.Errorf("after the held calls: got HTTP %d %s, want 200", resp.StatusCode, body)
	}
}

// TestFloodMemory sends far more concurrent requests than MaxInFlight to
// a slow backend: the surplus gets 429 at once, the backend never sees more
// than the limit, and the heap stays small.
func TestFloodMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("flood")
	}
	const limit, clients, perClient = 8, 128, 20
	g := newGate()
	close(g.open) // calls pass straight through; Sleep itself is slow
	e := newEnv(t, bridge.Options{MaxInFlight: limit, Limits: bridge.Limits{BatchParallelism: 1}}, withServer(grpc.ChainUnaryInterceptor(g.intercept)))
	go func() {
		for range g.entered {
		}
	}()
	t.Cleanup(func() { close(g.entered) })

	// Collect often, so that the peak measures what the flood keeps alive
	// rather than garbage the collector has not reached yet: with the
	// default pacing, the heap may double over what earlier tests of this
	// process left before a collection.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		var ms runtime.MemStats
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				runtime.ReadMemStats(&ms)
				if ms.HeapInuse > peak.Load() {
					peak.Store(ms.HeapInuse)
				}
			}
		}
	}()

	body := `{"jsonrpc":"2.0","method":"test.v1.TestService.Sleep","params":{"duration":"0.02s"},"id":1}`
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: 20 * time.Second}
	t.Cleanup(client.CloseIdleConnections)
	var ok, refused, other atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			for range perClient {
				resp, err := client.Post(e.url, "application/json", strings.NewReader(body))
				if err != nil {
					other.Add(1)
					continue
				}
				drain(resp)
				switch resp.StatusCode {
				case http.StatusOK:
					ok.Add(1)
				case http.StatusTooManyRequests:
					refused.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	<-sampled
	growth := int64(peak.Load()) - int64(base.HeapInuse)
	t.Logf("flood: %d requests, %d answered, %d refused with 429, %d other; backend peak concurrency %d (limit %d); heap in use %.1f MiB before, peak %.1f MiB (+%.1f MiB)",
		clients*perClient, ok.Load(), refused.Load(), other.Load(), g.peak.Load(), limit,
		float64(base.HeapInuse)/(1<<20), float64(peak.Load())/(1<<20), float64(growth)/(1<<20))
	if refused.Load() == 0 || ok.Load() == 0 || other.Load() != 0 {
		t.Errorf("got %d answered, %d refused, %d other; want some of each of the first two and no other", ok.Load(), refused.Load(), other.Load())
	}
	if g.peak.Load() > limit {
		t.Errorf("backend saw %d calls at once, want at most %d", g.peak.Load(), limit)
	}
	if growth > 64<<20 {
		t.Errorf("heap grew by %d MiB during the flood, want under 64 MiB", growth>>20)
	}
}

func drain(resp *http.Response) {
	buf := make([]byte, 512)
	for {
		if _, err := resp.Body.Read(buf); err != nil {
			break
		}
	}
	resp.Body.Close()
}

func TestRateLimit(t *testing.T) {
	t.Parallel()
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Auth: newAuth(t), RateLimit: 0.001, RateBurst: 3}, recording(rec))
	hello := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`
	for i := range 3 {
		if resp, body := postAs(t, e.url, bearer("admin-token-0123456789"), hello); resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d within the burst: got HTTP %d %s, want 200", i, resp.StatusCode, body)
		}
	}
	resp, body := postAs(t, e.url, bearer("admin-token-0123456789"), hello)
	check429(t, resp, body)
	if ra, _ := strconv.Atoi(resp.Header.Get("Retry-After")); ra < 900 {
		t.Errorf("got Retry-After %d, want about 1000 s at 0.001 calls a second", ra)
	}
	// Each identity has its own limit; a batch counts every member.
	batch := "[" + strings.Repeat(hello+",", 2) + hello + "]"
	if resp, body := postAs(t, e.url, bearer("greeter-token-0123456789"), batch); resp.StatusCode != http.StatusOK {
		t.Fatalf("another identity's batch of 3: got HTTP %d %s, want 200", resp.StatusCode, body)
	}
	resp, body = postAs(t, e.url, bearer("greeter-token-0123456789"), hello)
	check429(t, resp, body)
	// A batch larger than the burst can never pass, and says so.
	resp, body = postAs(t, e.url, bearer("reader-token-0123456789"), "["+strings.Repeat(hello+",", 3)+hello+"]")
	check429(t, resp, body)
	if !strings.Contains(string(body), "rate_burst") {
		t.Errorf("got %s, want it to name rate_burst", body)
	}
	if got := len(rec.take()); got != 6 {
		t.Errorf("%d calls reached the backend, want 6", got)
	}
}

func TestMaxResponseBytes(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{MaxResponseBytes: 400, Limits: bridge.Limits{BatchParallelism: 1}})
	echo := func(id, n int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"f_string":%q},"id":%d}`, strings.Repeat("x", n), id)
	}
	t.Run("single call that fits", func(t *testing.T) {
		if r := e.call(t, echo(1, 300)); errCode(t, r) != 0 {
			t.Errorf("got %v, want a result", r)
		}
	})
	t.Run("single call too large", func(t *testing.T) {
		r := e.call(t, echo(1, 500))
		if code, st := errStatus(t, r); code != 8 || st != "RESOURCE_EXHAUSTED" {
			t.Errorf("got %v, want error 8 RESOURCE_EXHAUSTED", r)
		}
	})
	t.Run("batch past the limit", func(t *testing.T) {
		// Each reply is about 160 bytes: two fit in 400, the third and
		// fourth do not, the small fifth still does.
		code, body := e.post(t, "["+echo(1, 100)+","+echo(2, 100)+","+echo(3, 100)+","+echo(4, 100)+`,{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":5}]`)
		if code != http.StatusOK {
			t.Fatalf("got HTTP %d, want 200", code)
		}
		if len(body) > 400+2*300 {
			t.Errorf("got a body of %d bytes, want it bounded near 400", len(body))
		}
		replies := decode(t, body).([]any)
		want := []int64{0, 0, 8, 8, 0}
		for i, r := range replies {
			if got := errCode(t, r.(map[string]any)); got != want[i] {
				t.Errorf("member %d: got %v, want code %d", i+1, r, want[i])
			}
		}
	})
}

// The limits that existed before this file, answered as documented.
func TestBodyAndBatchLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{MaxBodyBytes: 256, MaxBatchSize: 2}})
	code, body := e.post(t, `{"jsonrpc":"2.0","method":"x","params":{"a":"`+strings.Repeat("a", 300)+`"},"id":1}`)
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("body over max_body_bytes: got HTTP %d %s, want 413", code, body)
	}
	hello := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`
	code, body = e.post(t, "["+hello+","+hello+","+hello+"]")
	if r, ok := decode(t, body).(map[string]any); code != http.StatusOK || !ok || errCode(t, r) != -32600 {
		t.Errorf("batch over max_batch_size: got HTTP %d %s, want one -32600", code, body)
	}
}

func TestDrain(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	if code, _ := e.do(t, http.MethodGet, "/readyz", "", ""); code != http.StatusOK {
		t.Fatalf("readyz before Drain: got %d, want 200", code)
	}
	e.bridge.Drain()
	if code, body := e.do(t, http.MethodGet, "/readyz", "", ""); code != http.StatusServiceUnavailable || !strings.Contains(string(body), "draining") {
		t.Errorf("readyz after Drain: got %d %s, want 503 draining", code, body)
	}
	// Calls are still served while load balancers notice.
	if r := e.call(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`); errCode(t, r) != 0 {
		t.Errorf("call while draining: got %v, want a result", r)
	}
}
