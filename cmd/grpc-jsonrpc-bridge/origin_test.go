package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// serveAddr starts serve with args after the backend's and returns the
// bridge's address once its services are discovered.
func serveAddr(t *testing.T, args ...string) string {
	t.Helper()
	backend := startBackend(t, nil)
	p := start(t, append([]string{"serve", "--backend", backend, "--log-format", "json"}, args...)...)
	var addr string
	p.stderr.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
	p.stderr.until(t, "discovery log", func(l string) bool { return strings.Contains(l, "discovered") })
	return addr
}

// postHost POSTs a SayHello to addr with the Host header host and the
// headers h, and returns the status and the Access-Control-Allow-Origin.
func postHost(t *testing.T, addr, host string, h http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+addr+"/",
		strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin")
}

// TestServeAllowedHostsDefault: serve on a loopback address answers the
// loopback names only (a rebound name gets 403), as the README's and the
// demo's curl lines need; allowed_hosts and cors_origins reach the bridge.
func TestServeAllowedHostsDefault(t *testing.T) {
	addr := serveAddr(t, "--listen", "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(addr)
	for host, want := range map[string]int{
		addr:                              http.StatusOK, // curl http://127.0.0.1:PORT/
		"localhost:" + port:               http.StatusOK,
		"[::1]:" + port:                   http.StatusOK,
		"rebound.evil.example:" + port:    http.StatusForbidden,
		"bridge.internal.example:" + port: http.StatusForbidden,
	} {
		if got, _ := postHost(t, addr, host, nil); got != want {
			t.Errorf("Host %s: got HTTP %d, want %d", host, got, want)
		}
	}
	if got, _ := postHost(t, addr, addr, http.Header{"Origin": {"https://evil.example"}, "Content-Type": {"text/plain"}}); got != http.StatusForbidden {
		t.Errorf("cross-origin POST: got HTTP %d, want 403", got)
	}

	addr = serveAddr(t, "--listen", "127.0.0.1:0", "--allowed-hosts", "*.internal.example",
		"--cors-origins", "https://app.example", "--ws-origin-patterns", "legacy.example")
	_, port, _ = net.SplitHostPort(addr)
	if got, _ := postHost(t, addr, "bridge.internal.example:"+port, nil); got != http.StatusOK {
		t.Errorf("--allowed-hosts *.internal.example: got HTTP %d, want 200", got)
	}
	if got, _ := postHost(t, addr, addr, nil); got != http.StatusForbidden {
		t.Errorf("--allowed-hosts *.internal.example, Host %s: got HTTP %d, want 403", addr, got)
	}
	for _, origin := range []string{"https://app.example", "https://legacy.example"} {
		if got, acao := postHost(t, addr, "bridge.internal.example:"+port, http.Header{"Origin": {origin}}); got != http.StatusOK || acao != origin {
			t.Errorf("Origin %s: got HTTP %d, Access-Control-Allow-Origin %q", origin, got, acao)
		}
	}
}
