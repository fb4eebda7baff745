package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit/redistest"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestRateLimitStoreURL: a malformed store URL stops serve at start with
// exit code 2, naming the key, and without repeating the password.
func TestRateLimitStoreURL(t *testing.T) {
	for _, tt := range []struct{ name, url string }{
		{"scheme", "http://:pw@redis:6379/0"},
		{"port", "redis://:pw@redis:port/0"},
		{"database", "redis://:pw@redis:6379/first"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runSync(t, "serve", "--backend", "127.0.0.1:1", "--rate-limit", "10", "--rate-limit-store", tt.url)
			if code != exitUsage || !strings.Contains(stderr, "rate_limit_store") {
				t.Errorf("got exit %d, stderr:\n%s\nwant exit 2 naming rate_limit_store", code, stderr)
			}
			if strings.Contains(stderr, ":pw@") {
				t.Errorf("stderr shows the password:\n%s", stderr)
			}
		})
	}
}

// TestRateLimitStoreServe: serve with a store shares its limit through it,
// shows the store's state in /readyz and its errors in /metrics; a store
// that is not there at start does not keep it from serving, nor /readyz
// from answering 200.
func TestRateLimitStoreServe(t *testing.T) {
	backend := startBackend(t, nil)
	redis := redistest.Start(t, "")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nowhere := "redis://" + lis.Addr().String() + "/0"
	lis.Close()
	client := &http.Client{Timeout: waitLimit}
	readyz := func(t *testing.T, url string) (int, map[string]any) {
		t.Helper()
		resp, err := client.Get(url + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body struct {
			Details map[string]any `json:"details"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
			t.Fatal(err)
		}
		st, _ := body.Details["rate_limit_store"].(map[string]any)
		if _, ok := body.Details["backends"]; !ok {
			t.Errorf("/readyz details lost the backends: %v", body.Details)
		}
		return resp.StatusCode, st
	}
	metric := func(t *testing.T, url, name string) string {
		t.Helper()
		resp, err := client.Get(url + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				return strings.TrimSpace(v)
			}
		}
		t.Fatalf("no %s in /metrics", name)
		return ""
	}
	hello := `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"a"}}`

	t.Run("up", func(t *testing.T) {
		args := []string{"--backend", backend, "--rate-limit", "1", "--rate-burst", "3", "--rate-limit-store", redis.URL()}
		_, a := startBridge(t, args...)
		_, b := startBridge(t, args...)
		admitted := 0
		for i := range 6 {
			url := "http://" + a
			if i%2 == 1 {
				url = "http://" + b
			}
			if status, _, _ := rpc(t, client, url+"/", hello, nil); status == http.StatusOK {
				admitted++
			}
		}
		if admitted != 3 {
			t.Errorf("two bridges sharing a store admitted %d of 6 calls, want the burst of 3 together", admitted)
		}
		code, st := readyz(t, "http://"+a)
		if code != http.StatusOK || st["state"] != "up" || st["fallback"] != "local" || st["store"] != redis.URL() {
			t.Errorf("/readyz: %d %v, want 200 with the store up", code, st)
		}
		if got := metric(t, "http://"+a, "jsonrpc_bridge_rate_limit_store_up"); got != "1" {
			t.Errorf("store_up %s, want 1", got)
		}
	})
	t.Run("down at start", func(t *testing.T) {
		_, a := startBridge(t, "--backend", backend, "--rate-limit", "100", "--rate-limit-store", nowhere, "--rate-limit-store-fallback", "deny")
		await.Until(t, 2*time.Second, "the outage noticed", func() bool { _, st := readyz(t, "http://"+a); return st["state"] == "down" })
		if status, _, _ := rpc(t, client, "http://"+a+"/", hello, nil); status != http.StatusTooManyRequests {
			t.Errorf("a call with the store down and fallback deny: HTTP %d, want 429", status)
		}
		code, st := readyz(t, "http://"+a)
		if code != http.StatusOK || st["state"] != "down" || st["reason"] != "unreachable" {
			t.Errorf("/readyz: %d %v, want 200 with the store down, unreachable", code, st)
		}
		await.Until(t, 2*time.Second, "errors counted", func() bool {
			return metric(t, "http://"+a, "jsonrpc_bridge_rate_limit_store_errors_total") != "0"
		})
		if got := metric(t, "http://"+a, "jsonrpc_bridge_rate_limit_store_up"); got != "0" {
			t.Errorf("store_up %s, want 0", got)
		}
	})
}
