package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

func TestIDIsEchoedByteForByte(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	for _, id := range []string{
		`12345678901234567890`, `2`, `1.5`, `"7"`, `1e3`, `-0.0`, `1.50`, `0.1e-400`,
		`123456789012345678901234567890123456789012345678901234567890`,
		`"\u00e9\n"`, `"é"`, `null`, `-7`, `""`,
	} {
		t.Run(id, func(t *testing.T) {
			code, body := e.post(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":`+id+`}`)
			if code != http.StatusOK {
				t.Fatalf("got HTTP %d, want 200", code)
			}
			if !strings.Contains(string(body), `"id":`+id+`,`) {
				t.Errorf("got %s, want the id %s byte for byte", body, id)
			}
		})
	}
	t.Run("batch", func(t *testing.T) {
		code, body := e.post(t, `[{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":12345678901234567890},`+
			`{"jsonrpc":"2.0","method":"nope","id":1.5},{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":"7"}]`)
		if code != http.StatusOK {
			t.Fatalf("got HTTP %d, want 200", code)
		}
		for _, id := range []string{`12345678901234567890`, `1.5`, `"7"`} {
			if !strings.Contains(string(body), `"id":`+id+`,`) {
				t.Errorf("got %s, want the id %s byte for byte", body, id)
			}
		}
	})
}

func TestHTTP(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{MaxBodyBytes: 1024}})
	hello := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"Ada"},"id":1}`
	tests := []struct {
		name, method, path, contentType, body string
		wantStatus                            int
		wantAllow                             string
		wantCode                              int64 // JSON-RPC error code in the body, 0 for none or a result
	}{
		{name: "json", method: "POST", path: "/", contentType: "application/json", body: hello, wantStatus: 200},
		{name: "curl form content type", method: "POST", path: "/", contentType: "application/x-www-form-urlencoded", body: hello, wantStatus: 200},
		{name: "no content type", method: "POST", path: "/", body: hello, wantStatus: 200},
		{name: "text/plain", method: "POST", path: "/", contentType: "text/plain", body: hello, wantStatus: 200},
		{name: "byte order mark", method: "POST", path: "/", contentType: "application/json", body: "\uFEFF" + hello, wantStatus: 200},
		{name: "GET is 405", method: "GET", path: "/", wantStatus: 405, wantAllow: "POST", wantCode: -32600},
		{name: "PUT is 405", method: "PUT", path: "/", body: hello, wantStatus: 405, wantAllow: "POST", wantCode: -32600},
		{name: "DELETE is 405", method: "DELETE", path: "/", wantStatus: 405, wantAllow: "POST", wantCode: -32600},
		{name: "body over the limit is 413", method: "POST", path: "/", body: `{"jsonrpc":"2.0","method":"x","params":{"a":"` + strings.Repeat("a", 2000) + `"},"id":1}`, wantStatus: 413, wantCode: -32600},
		{name: "empty body is a parse error", method: "POST", path: "/", body: "", wantStatus: 200, wantCode: -32700},
		{name: "healthz", method: "GET", path: "/healthz", wantStatus: 200},
		{name: "readyz", method: "GET", path: "/readyz", wantStatus: 200},
		{name: "POST readyz is 405", method: "POST", path: "/readyz", wantStatus: 405, wantAllow: "GET, HEAD"},
		{name: "unknown path", method: "GET", path: "/nope", wantStatus: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, e.url+tt.path, strings.NewReader(tt.body))
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body map[string]any
			d := json.NewDecoder(resp.Body)
			d.UseNumber()
			if err := d.Decode(&body); err != nil {
				t.Fatalf("body is not a JSON object: %v", err)
			}
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("got HTTP %d, want %d (%v)", resp.StatusCode, tt.wantStatus, body)
			}
			if got := resp.Header.Get("Allow"); got != tt.wantAllow {
				t.Errorf("got Allow %q, want %q", got, tt.wantAllow)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("got Content-Type %q, want application/json", got)
			}
			if tt.path == "/" {
				checkEnvelope(t, body)
				if got := errCode(t, body); got != tt.wantCode {
					t.Errorf("got code %d, want %d (%v)", got, tt.wantCode, body)
				}
			}
		})
	}
}

func TestBodyOverLimitWithoutContentLength(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{MaxBodyBytes: 1024}})
	// A reader of unknown length makes the client send a chunked body.
	pr, pw := net.Pipe()
	go func() {
		fmt.Fprintf(pw, `{"jsonrpc":"2.0","method":"x","params":{"a":"%s"},"id":1}`, strings.Repeat("a", 4096))
		pw.Close()
	}()
	resp, err := testClient.Post(e.url+"/", "application/json", pr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("got HTTP %d, want 413", resp.StatusCode)
	}
}

func TestNotificationGets204WithEmptyBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	code, body := e.post(t, `{"jsonrpc":"2.0","method":"test.v1.TestService.Count","params":{"key":"n"}}`)
	if code != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("got HTTP %d %q, want 204 and no body", code, body)
	}
	if got := e.backend.Calls("n"); got != 1 {
		t.Errorf("backend saw %d calls, want 1", got)
	}
}

func TestBatchOverMaxBatchSizeRunsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{MaxBatchSize: 3}})
	member := `{"jsonrpc":"2.0","method":"test.v1.TestService.Count","params":{"key":"big"},"id":1}`
	r := e.call(t, "["+strings.Repeat(member+",", 3)+member+"]")
	if got := errCode(t, r); got != -32600 {
		t.Fatalf("got %v, want one -32600 object", r)
	}
	msg := r["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, "max_batch_size") {
		t.Errorf("message %q does not say why", msg)
	}
	if r["id"] != nil {
		t.Errorf("got id %v, want null", r["id"])
	}
	if got := e.backend.Calls("big"); got != 0 {
		t.Errorf("backend saw %d calls, want 0", got)
	}
	// a batch of only notifications over the limit is refused too
	note := `{"jsonrpc":"2.0","method":"test.v1.TestService.Count","params":{"key":"big"}}`
	if got := errCode(t, e.call(t, "["+strings.Repeat(note+",", 3)+note+"]")); got != -32600 {
		t.Errorf("got code %d, want -32600", got)
	}
	// at the limit it runs
	code, body := e.post(t, "["+strings.Repeat(member+",", 2)+member+"]")
	if code != 200 || !strings.HasPrefix(string(body), "[") {
		t.Errorf("got HTTP %d %s, want an array", code, body)
	}
	if got := e.backend.Calls("big"); got != 3 {
		t.Errorf("backend saw %d calls, want 3", got)
	}
}

func TestBatchParallelismIsBounded(t *testing.T) {
	t.Parallel()
	var inFlight, peak atomic.Int64
	gate := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(20 * time.Millisecond) // the backend's work, holding the slot so that members overlap: not a wait
		defer inFlight.Add(-1)
		return h(ctx, req)
	}
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{BatchParallelism: 3}}, withServer(grpc.UnaryInterceptor(gate)))
	member := `{"jsonrpc":"2.0","method":"test.v1.TestService.Count","params":{"key":"p"},"id":1}`
	code, body := e.post(t, "["+strings.Repeat(member+",", 11)+member+"]")
	if code != 200 {
		t.Fatalf("got HTTP %d %s", code, body)
	}
	var replies []map[string]any
	if err := json.Unmarshal(body, &replies); err != nil || len(replies) != 12 {
		t.Fatalf("got %s, want 12 replies", body)
	}
	if p := peak.Load(); p > 3 || p < 2 {
		t.Errorf("peak concurrency %d, want 2..3 (concurrent, bounded by 3)", p)
	}
}

func TestNotDiscoveredYet(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{}, onBufconn(), undiscovered())

	if code, _ := e.do(t, "GET", "/readyz", "", ""); code != 503 {
		t.Errorf("readyz: got %d, want 503", code)
	}
	if code, _ := e.do(t, "GET", "/healthz", "", ""); code != 200 {
		t.Errorf("healthz: got %d, want 200", code)
	}
	r := e.call(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`)
	if got := errCode(t, r); got != 14 {
		t.Fatalf("got %v, want code 14", r)
	}
	if msg := r["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "not discovered yet") {
		t.Errorf("message %q does not say the services are not discovered yet", msg)
	}
	// a notification gets no reply, as always
	if code, body := e.post(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello"}`); code != 204 || len(body) != 0 {
		t.Errorf("notification: got %d %q, want 204", code, body)
	}

	reg, err := bridgereflect.Discover(t.Context(), e.conn)
	if err != nil {
		t.Fatal(err)
	}
	e.bridge.Update(reg)
	if code, _ := e.do(t, "GET", "/readyz", "", ""); code != 200 {
		t.Errorf("readyz after discovery: got %d, want 200", code)
	}
	if r := e.call(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`); errCode(t, r) != 0 {
		t.Errorf("after discovery: got %v, want a result", r)
	}
}

func TestUnreachableBackendIsCode14(t *testing.T) {
	t.Parallel()
	// Discover from a live backend, then call through a connection to a
	// port where nothing listens.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	dead, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dead.Close() })
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: 5 * time.Second}}, onBufconn(), through(dead))
	r := e.call(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`)
	if got := errCode(t, r); got != 14 {
		t.Fatalf("got %v, want code 14", r)
	}
	eo := r["error"].(map[string]any)
	for _, leak := range []string{addr, "dial", "refused", "tcp"} {
		if strings.Contains(eo["message"].(string), leak) {
			t.Errorf("message %q leaks %q", eo["message"], leak)
		}
	}
	if eo["data"].(map[string]any)["status"] != "UNAVAILABLE" {
		t.Errorf("got data %v, want status UNAVAILABLE", eo["data"])
	}
}

func TestCallTimeoutIsCode4(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: 50 * time.Millisecond}})
	r := e.call(t, `{"jsonrpc":"2.0","method":"test.v1.TestService.Sleep","params":{"duration":"10s"},"id":1}`)
	if got := errCode(t, r); got != 4 {
		t.Fatalf("got %v, want code 4", r)
	}
	if st := r["error"].(map[string]any)["data"].(map[string]any)["status"]; st != "DEADLINE_EXCEEDED" {
		t.Errorf("got status %v, want DEADLINE_EXCEEDED", st)
	}
}

func TestConcurrentCallsKeepTheirIDs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			r := e.call(t, fmt.Sprintf(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fString":"s%d"},"id":%d}`, i, i))
			if id, _ := r["id"].(json.Number).Int64(); id != int64(i) {
				t.Errorf("got id %v, want %d", r["id"], i)
			}
			if got := r["result"].(map[string]any)["fString"]; got != fmt.Sprintf("s%d", i) {
				t.Errorf("call %d got result %v", i, got)
			}
		})
	}
	wg.Wait()
}

func TestHostileBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{MaxBodyBytes: 8 << 20}})
	tests := []struct {
		name, body string
		wantCode   int64
	}{
		{"100000 levels of arrays", strings.Repeat("[", 100000) + strings.Repeat("]", 100000), -32700},
		{"100000 levels of objects in params", `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","id":1,"params":` + strings.Repeat(`{"a":`, 100000) + "1" + strings.Repeat("}", 100000) + "}", -32700},
		{"invalid UTF-8 in a string", "{\"jsonrpc\":\"2.0\",\"method\":\"helloworld.Greeter.SayHello\",\"params\":{\"name\":\"\xff\xfe\"},\"id\":1}", -32700},
		{"control character in a string", "{\"jsonrpc\":\"2.0\",\"method\":\"helloworld.Greeter.SayHello\",\"params\":{\"name\":\"a\x01\"},\"id\":1}", -32700},
		{"400-digit field value", `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fInt64":` + strings.Repeat("9", 400) + `},"id":1}`, -32602},
		{"400-digit id", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":` + strings.Repeat("9", 400) + `}`, 0},
		{"duplicate field in params", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"a","name":"b"},"id":1}`, -32602},
		{"json and proto name of one field", `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fString":"a","f_string":"b"},"id":1}`, -32602},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.call(t, tt.body)
			if got := errCode(t, r); got != tt.wantCode {
				t.Errorf("got %v, want code %d", r, tt.wantCode)
			}
		})
	}
	t.Run("10 MB string", func(t *testing.T) {
		code, body := e.post(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"`+strings.Repeat("x", 10<<20)+`"},"id":1}`)
		if code != http.StatusRequestEntityTooLarge {
			t.Errorf("got HTTP %d %.200s, want 413", code, body)
		}
		// and the bridge still answers
		if r := e.call(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`); errCode(t, r) != 0 {
			t.Errorf("after: got %v", r)
		}
	})
}
