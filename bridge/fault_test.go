package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// postJSON posts body with client and returns the status and reply.
func postJSON(t testing.TB, client *http.Client, url, body string, header http.Header) (int, []byte) {
	t.Helper()
	hr, err := http.NewRequest(http.MethodPost, url+"/", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hr.Header.Set("Content-Type", "application/json")
	for k, v := range header {
		hr.Header[k] = v
	}
	resp, err := client.Do(hr)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the reply: %v", err)
	}
	return resp.StatusCode, b
}

// callOne posts a single call and returns its checked reply object.
func callOne(t testing.TB, client *http.Client, url, body string, header http.Header) map[string]any {
	t.Helper()
	code, b := postJSON(t, client, url, body, header)
	if code != http.StatusOK {
		t.Fatalf("POST %.200s: HTTP %d %.200s, want 200", body, code, b)
	}
	r, ok := decode(t, b).(map[string]any)
	if !ok {
		t.Fatalf("reply %.200s is not an object", b)
	}
	checkEnvelope(t, r)
	return r
}

// wantCode fails unless r is an error with code want (0: a result) and,
// for the bridge's own messages, message.
func wantCode(t testing.TB, r map[string]any, want int64, message string) {
	t.Helper()
	if got := errCode(t, r); got != want {
		t.Fatalf("reply %s: code %d, want %d", mustJSON(r), got, want)
	}
	if message == "" {
		return
	}
	got := r["error"].(map[string]any)["message"]
	if got == message {
		return
	}
	// The bridge tells the backend its deadline (grpc-timeout), so the
	// backend's own DEADLINE_EXCEEDED status may arrive first: grpc-go
	// servers send it with the context's text, which is the backend's
	// message and passes through.
	if message == deadlineExpired && got == "context deadline exceeded" {
		return
	}
	t.Errorf("reply %s: message %q, want %q", mustJSON(r), got, message)
}

// deadlineExpired is the bridge's message for a call whose deadline
// expired on its side.
const deadlineExpired = "the call's deadline expired"

// TestFaultBackendRestart kills the backend under load and starts it
// again: every call gets exactly one reply, a result or UNAVAILABLE (14),
// no call runs twice, and calls succeed again without restarting the
// bridge.
func TestFaultBackendRestart(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: 5 * time.Second}, MaxInFlight: 1024}, reconnecting())
	b, url := e.be, e.url
	client := newHTTPClient(t)

	type outcome struct {
		key  string
		code int64
	}
	outcomes := make(chan outcome, 1024)
	stop := make(chan struct{})
	var workers sync.WaitGroup
	for w := range 20 {
		workers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				key := fmt.Sprintf("restart-%d-%d", w, i)
				r := callOne(t, client, url, req(countMethod, `{"key":"`+key+`"}`, strconv.Itoa(i)), nil)
				if id, _ := r["id"].(json.Number); id.String() != strconv.Itoa(i) {
					t.Errorf("reply %s: id %v, want %d", mustJSON(r), r["id"], i)
				}
				code := errCode(t, r)
				if code == 0 && fmt.Sprint(r["result"]) != "map[count:1]" {
					t.Errorf("reply %s: want count 1", mustJSON(r))
				}
				outcomes <- outcome{key, code}
			}
		})
	}
	first := b.Test()
	var all []outcome
	// Phases: 100 successes, then kill; 20 failures, then restart; 100
	// successes after the restart.
	phase, n := 0, 0
	var second *testv1.Server
	deadline := time.After(30 * time.Second)
	for phase < 3 {
		var o outcome
		select {
		case o = <-outcomes:
		case <-deadline:
			t.Fatalf("stuck in phase %d after %d outcomes", phase, len(all))
		}
		all = append(all, o)
		switch {
		case o.code != 0 && o.code != 14:
			t.Errorf("call %s: code %d, want a result or 14", o.key, o.code)
		case phase == 0 && o.code == 0, phase == 1 && o.code == 14, phase == 2 && o.code == 0:
			n++
		}
		switch {
		case phase == 0 && n == 100:
			b.Stop()
			phase, n = 1, 0
		case phase == 1 && n == 20:
			b.Restart()
			second = b.Test()
			phase, n = 2, 0
		case phase == 2 && n == 100:
			phase = 3
		}
	}
	close(stop)
	go func() { workers.Wait(); close(outcomes) }()
	for o := range outcomes {
		all = append(all, o)
	}
	failed := 0
	for _, o := range all {
		ran := first.Calls(o.key) + second.Calls(o.key)
		switch {
		case o.code == 0 && ran != 1:
			t.Errorf("call %s succeeded but ran %d times", o.key, ran)
		case o.code != 0 && ran > 1:
			t.Errorf("call %s failed but ran %d times", o.key, ran)
		}
		if o.code != 0 {
			failed++
		}
	}
	t.Logf("backend restart: %d calls, %d answered UNAVAILABLE", len(all), failed)
}

// stallListener accepts TCP connections and never answers on them.
func stallListener(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var held []net.Conn
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		lis.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return lis.Addr().String()
}

// TestFaultStalledBackend puts the bridge in front of a backend that
// accepts connections and never answers: every call, single, batched or
// over WebSocket, ends at its deadline (4) or as unavailable (14), within
// the call timeout.
func TestFaultStalledBackend(t *testing.T) {
	checkLeaks(t)
	conn := dialLoopback(t, stallListener(t))
	const timeout = 300 * time.Millisecond
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: timeout}}, reconnecting(), through(conn))
	url := e.url
	client := newHTTPClient(t)
	stalled := func(t *testing.T, r map[string]any) {
		t.Helper()
		if c := errCode(t, r); c != 4 && c != 14 {
			t.Errorf("reply %s: code %d, want 4 or 14", mustJSON(r), c)
		}
	}
	t.Run("single", func(t *testing.T) {
		start := time.Now()
		stalled(t, callOne(t, client, url, req("helloworld.Greeter.SayHello", "", "1"), nil))
		if d := time.Since(start); d > 10*timeout {
			t.Errorf("the reply took %v, want about %v", d, timeout)
		}
	})
	t.Run("header-timeout", func(t *testing.T) {
		r := callOne(t, client, url, req("helloworld.Greeter.SayHello", "", "1"), http.Header{"Grpc-Timeout": {"50m"}})
		stalled(t, r)
	})
	t.Run("batch", func(t *testing.T) {
		body := "[" + req("helloworld.Greeter.SayHello", "", "1") + "," + req(countMethod, `{"key":"x"}`, "") + "," + req(echoMethod, "", `"b"`) + "]"
		code, b := postJSON(t, client, url, body, nil)
		var rs []map[string]any
		if err := json.Unmarshal(b, &rs); code != http.StatusOK || err != nil || len(rs) != 2 {
			t.Fatalf("HTTP %d %s, want 200 and two replies", code, b)
		}
		for _, r := range rs {
			stalled(t, decode(t, mustJSON(r)).(map[string]any))
		}
	})
	t.Run("websocket", func(t *testing.T) {
		w := dialWSWith(t, &env{url: url}, nil)
		w.send(req("helloworld.Greeter.SayHello", "", "1"))
		b, err := w.recvRaw()
		if err != nil {
			t.Fatal(err)
		}
		stalled(t, decode(t, b).(map[string]any))
		w.c.Close(websocket.StatusNormalClosure, "")
	})
}

// sleepWatch is a backend interceptor that reports when Sleep calls start
// and how their contexts ended.
type sleepWatch struct {
	started chan struct{}
	ended   chan error
}

func newSleepWatch() *sleepWatch {
	return &sleepWatch{started: make(chan struct{}, 64), ended: make(chan error, 64)}
}

func (s *sleepWatch) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	if !strings.HasSuffix(info.FullMethod, "/Sleep") {
		return next(ctx, req)
	}
	s.started <- struct{}{}
	resp, err := next(ctx, req)
	s.ended <- ctx.Err()
	return resp, err
}

func (s *sleepWatch) waitStarted(t *testing.T, n int) {
	t.Helper()
	for range n {
		await.Receive(t, 10*time.Second, "the backend to see the call start", s.started)
	}
}

// waitEnded waits for n Sleep calls to end and checks that their context
// ended with want, or with any error when want is nil.
func (s *sleepWatch) waitEnded(t *testing.T, n int, want error) {
	t.Helper()
	for range n {
		if err := await.Receive(t, 10*time.Second, "the backend's call to end", s.ended); err == nil || want != nil && !errors.Is(err, want) {
			t.Errorf("the backend's call ended with %v, want %v", err, want)
		}
	}
}

// TestFaultSlowBackend calls a backend slower than the deadline: the
// reply is DEADLINE_EXCEEDED (4) on time, and the backend's call ends
// too (by its own deadline, or cancelled by the client's: they race).
func TestFaultSlowBackend(t *testing.T) {
	checkLeaks(t)
	sw := newSleepWatch()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: 200 * time.Millisecond, MaxCallTimeout: time.Minute}}, withServer(grpc.ChainUnaryInterceptor(sw.intercept)), reconnecting(), ownClient())
	sleep := func(id string) string { return req("test.v1.TestService.Sleep", `{"duration":"30s"}`, id) }
	t.Run("single", func(t *testing.T) {
		start := time.Now()
		wantCode(t, callOne(t, e.client, e.url, sleep("1"), nil), 4, deadlineExpired)
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the reply took %v", d)
		}
		sw.waitStarted(t, 1)
		sw.waitEnded(t, 1, nil)
	})
	t.Run("header", func(t *testing.T) {
		wantCode(t, callOne(t, e.client, e.url, sleep("1"), http.Header{"Grpc-Timeout": {"100m"}}), 4, deadlineExpired)
		sw.waitStarted(t, 1)
		sw.waitEnded(t, 1, nil)
	})
	t.Run("batch", func(t *testing.T) {
		body := "[" + sleep("1") + "," + req(countMethod, `{"key":"slow-batch"}`, "2") + "," + sleep(`"3"`) + "]"
		code, b := postJSON(t, e.client, e.url, body, nil)
		var rs []map[string]any
		if err := json.Unmarshal(b, &rs); code != http.StatusOK || err != nil || len(rs) != 3 {
			t.Fatalf("HTTP %d %s, want 200 and three replies", code, b)
		}
		for _, r := range rs {
			r := decode(t, mustJSON(r)).(map[string]any)
			if fmt.Sprint(r["id"]) == "2" {
				wantCode(t, r, 0, "")
			} else {
				wantCode(t, r, 4, deadlineExpired)
			}
		}
		sw.waitStarted(t, 2)
		sw.waitEnded(t, 2, nil)
		if got := e.backend.Calls("slow-batch"); got != 1 {
			t.Errorf("the backend counted %d calls, want 1", got)
		}
	})
}

// TestFaultMessageTooLarge makes the backend's response exceed the
// bridge's maximum received message size, and a request exceed the
// backend's: both are RESOURCE_EXHAUSTED (8) with a fixed message, and the
// next call works.
func TestFaultMessageTooLarge(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{}, withServer(grpc.MaxRecvMsgSize(64<<10)), reconnecting(grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<10))), ownClient())
	const msg = "a message is larger than the maximum message size"
	for _, tc := range []struct {
		name string
		size int
	}{
		{"response", 32 << 10},
		{"request", 128 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := callOne(t, e.client, e.url, echoReq(`{"fString":"`+strings.Repeat("x", tc.size)+`"}`), nil)
			wantCode(t, r, 8, "")
			if data, _ := r["error"].(map[string]any)["data"].(map[string]any); data["status"] != "RESOURCE_EXHAUSTED" {
				t.Errorf("reply %.300s: want data.status RESOURCE_EXHAUSTED", mustJSON(r))
			}
			if m := r["error"].(map[string]any)["message"]; m != msg && tc.name == "response" {
				t.Errorf("message %q, want %q", m, msg)
			}
			wantCode(t, callOne(t, e.client, e.url, echoReq(`{"fString":"small"}`), nil), 0, "")
		})
	}
}

// TestFaultBackendChangesServices restarts the backend with other
// services. The re-discovery watcher notices the reconnection and
// installs the new services: the old methods are not found, the new ones
// work, without restarting the bridge.
func TestFaultBackendChangesServices(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: 5 * time.Second}}, reconnecting(), undiscovered())
	b, conn, srv, url := e.be, e.conn, e.bridge, e.url
	client := newHTTPClient(t)

	installed := make(chan *bridgereflect.Catalog, 16)
	w := bridgereflect.NewWatcher([]bridgereflect.Source{{Name: "backend", Conn: conn}},
		bridgereflect.WatchOptions{Retry: bridgereflect.RetryOptions{MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	var run sync.WaitGroup
	run.Go(func() {
		if err := w.Run(ctx, func(c *bridgereflect.Catalog) {
			srv.Update(c)
			installed <- c
		}); err != nil {
			t.Errorf("watcher: %v", err)
		}
	})
	t.Cleanup(func() { cancel(); run.Wait() })
	waitCatalog := func(has func(*bridgereflect.Catalog) bool) {
		t.Helper()
		timeout := time.After(15 * time.Second)
		for {
			select {
			case c := <-installed:
				if has(c) {
					return
				}
			case <-timeout:
				t.Fatal("the watcher did not install the expected catalog")
			}
		}
	}
	serves := func(c *bridgereflect.Catalog, service string) bool {
		for _, md := range c.Methods() {
			if string(md.Parent().FullName()) == service {
				return true
			}
		}
		return false
	}
	waitCatalog(func(c *bridgereflect.Catalog) bool { return serves(c, "test.v1.TestService") })
	wantCode(t, callOne(t, client, url, echoReq(`{"fString":"a"}`), nil), 0, "")

	b.Restart(testserver.Greeter, testserver.Ops)
	waitCatalog(func(c *bridgereflect.Catalog) bool {
		return !serves(c, "test.v1.TestService") && serves(c, "rpc.ops.Ops")
	})
	wantCode(t, callOne(t, client, url, echoReq(`{"fString":"a"}`), nil), -32601, "Method not found")
	wantCode(t, callOne(t, client, url, req(".rpc.ops.Ops.Ping", `{"text":"hi"}`, "1"), nil), 0, "")
	wantCode(t, callOne(t, client, url, req("helloworld.Greeter.SayHello", `{"name":"b"}`, "1"), nil), 0, "")
}

// TestFaultClientDisconnects drops the client in the middle of a call, a
// batch and a WebSocket call: the backend sees each call cancelled, and
// the bridge answers the next call.
func TestFaultClientDisconnects(t *testing.T) {
	checkLeaks(t)
	sw := newSleepWatch()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: time.Minute}}, withServer(grpc.ChainUnaryInterceptor(sw.intercept)), reconnecting(), ownClient())
	sleep := func(id string) string { return req("test.v1.TestService.Sleep", `{"duration":"50s"}`, id) }
	post := func(t *testing.T, body string, calls int) {
		ctx, cancel := context.WithCancel(t.Context())
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			resp, err := e.client.Do(hr)
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				err = fmt.Errorf("got a reply %s", b)
			}
			done <- err
		}()
		sw.waitStarted(t, calls)
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("client: %v, want context.Canceled", err)
		}
		sw.waitEnded(t, calls, context.Canceled)
	}
	normal := func(t *testing.T) {
		wantCode(t, callOne(t, e.client, e.url, req("helloworld.Greeter.SayHello", "", "1"), nil), 0, "")
	}
	t.Run("single", func(t *testing.T) {
		post(t, sleep("1"), 1)
		normal(t)
	})
	t.Run("batch", func(t *testing.T) {
		var b bytes.Buffer
		b.WriteString("[" + req(countMethod, `{"key":"disconnect-batch"}`, "0"))
		for i := range 3 {
			b.WriteString("," + sleep(strconv.Itoa(i+1)))
		}
		b.WriteString("]")
		post(t, b.String(), 3)
		// The Count member runs beside the others: done or cancelled.
		if got := e.backend.Calls("disconnect-batch"); got > 1 {
			t.Errorf("the backend counted %d calls, want at most 1", got)
		}
		normal(t)
	})
	t.Run("websocket", func(t *testing.T) {
		w := dialWSWith(t, e, nil)
		w.send(sleep("1"))
		w.send("[" + sleep("2") + "," + sleep("3") + "]")
		sw.waitStarted(t, 3)
		w.c.CloseNow()
		sw.waitEnded(t, 3, context.Canceled)
		normal(t)
	})
}
