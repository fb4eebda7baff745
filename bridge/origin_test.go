package bridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// loopbackHosts are the command's allowed_hosts for a loopback listen
// address (config.DefaultAllowedHosts).
var loopbackHosts = []string{"localhost", "127.0.0.1", "::1"}

// hostReq sends method path to e with the Host header host (empty: the
// URL's) and the headers h, and returns the response and its body.
func hostReq(t *testing.T, e *env, method, path, host string, h http.Header, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, e.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return resp, nil // a WebSocket connection: nothing to read
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// port is the port of the bridge of e, as a Host header carries it.
func (e *env) port(t *testing.T) string {
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// corsHeaders returns the Access-Control-* headers of resp.
func corsHeaders(resp *http.Response) http.Header {
	out := http.Header{}
	for k, v := range resp.Header {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = v
		}
	}
	return out
}

// refusedCount is requests_refused_total{reason} of e.
func refusedCount(t *testing.T, e *env, reason string) float64 {
	t.Helper()
	s, ok := sample(scrape(t, e), "jsonrpc_bridge_requests_refused_total", map[string]string{"reason": reason})
	if !ok {
		t.Fatalf("no requests_refused_total{reason=%q}", reason)
	}
	return s.GetCounter().GetValue()
}

const countCall = `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Count","params":{"key":"origin"}}`

// TestCSRF: a page on another origin can send a POST without any CORS
// check (a form, or fetch with Content-Type: text/plain). Such a POST is
// refused with 403 before anything runs, whatever its credentials, while
// callers without Origin (scripts), same-origin pages and listed origins
// are answered.
func TestCSRF(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	var log syncBuffer
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Metrics: m, AccessLog: slog.New(slog.NewJSONHandler(&log, nil)),
		CORSOrigins: []string{"https://app.example"}, AllowedHosts: loopbackHosts}, recording(rec))
	self := "http://127.0.0.1:" + e.port(t)

	for _, origin := range []string{"https://evil.example", "null", "https://app.example.evil.example",
		"http://app.example", "https://evil.example/https://app.example", ""} {
		resp, body := hostReq(t, e, http.MethodPost, "/", "", http.Header{
			"Origin": {origin}, "Content-Type": {"text/plain"}, "X-Request-Id": {"csrf-1"}}, countCall)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("Origin %q: got HTTP %d %s, want 403", origin, resp.StatusCode, body)
			continue
		}
		want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: origin ` +
			strings.ReplaceAll(jsonQuote(t, origin), `"`, `\"`) + ` is not allowed (see cors_origins)"}}`
		if string(body) != want {
			t.Errorf("Origin %q: got %s, want %s", origin, body, want)
		}
		if h := corsHeaders(resp); len(h) != 0 {
			t.Errorf("Origin %q: got CORS headers %v on a refusal", origin, h)
		}
		if resp.Header.Get("X-Request-Id") != "csrf-1" {
			t.Errorf("Origin %q: got X-Request-Id %q, want csrf-1", origin, resp.Header.Get("X-Request-Id"))
		}
	}
	if calls := rec.take(); len(calls) != 0 {
		t.Fatalf("the backend ran %d calls of refused requests: %v", len(calls), calls)
	}
	if n := refusedCount(t, e, "origin_not_allowed"); n != 6 {
		t.Errorf("requests_refused_total{reason=origin_not_allowed} = %v, want 6", n)
	}
	if !strings.Contains(log.String(), `"msg":"refused","reason":"origin_not_allowed","detail":"https://evil.example","identity":"anonymous","request_id":"csrf-1"`) {
		t.Errorf("no refused record for https://evil.example in:\n%s", log.String())
	}

	// Legitimate callers are answered.
	for _, h := range []http.Header{
		{"Content-Type": {"text/plain"}}, // curl, scripts
		{"Origin": {self}},               // a page served by the bridge's own host
		{"Origin": {strings.ToUpper(self)}},
		{"Origin": {"https://app.example"}, "Content-Type": {"application/json"}},
	} {
		resp, body := hostReq(t, e, http.MethodPost, "/", "", h, countCall)
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"result"`) {
			t.Errorf("%v: got HTTP %d %s, want a result", h, resp.StatusCode, body)
		}
		acao := resp.Header.Get("Access-Control-Allow-Origin")
		if o := h.Get("Origin"); o == "https://app.example" && acao != o || o != "https://app.example" && acao != "" {
			t.Errorf("%v: got Access-Control-Allow-Origin %q", h, acao)
		}
		if resp.Header.Get("Vary") != "Origin" {
			t.Errorf("%v: got Vary %q, want Origin", h, resp.Header.Get("Vary"))
		}
	}
	if n := len(rec.take()); n != 4 {
		t.Errorf("the backend ran %d calls, want 4", n)
	}
}

// TestCSRFWithCredentials: the Origin check comes before authentication,
// so a page on another origin cannot ride a caller's credentials (here a
// token; a browser's client certificate would be the same): 403, nothing
// runs, and the refusal names no identity.
func TestCSRFWithCredentials(t *testing.T) {
	t.Parallel()
	var log syncBuffer
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Auth: newAuth(t), AccessLog: slog.New(slog.NewJSONHandler(&log, nil))}, recording(rec))
	h := bearer(callers[0].token)
	h.Set("Origin", "https://evil.example")
	h.Set("Content-Type", "text/plain")
	resp, body := hostReq(t, e, http.MethodPost, "/", "", h, countCall)
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("got HTTP %d %s, want 403", resp.StatusCode, body)
	}
	if calls := rec.take(); len(calls) != 0 {
		t.Errorf("the backend ran %v", calls)
	}
	if !strings.Contains(log.String(), `"reason":"origin_not_allowed","detail":"https://evil.example","identity":"",`) {
		t.Errorf("want a refused record without identity, got:\n%s", log.String())
	}
	h.Del("Origin")
	if resp, body := hostReq(t, e, http.MethodPost, "/", "", h, countCall); resp.StatusCode != http.StatusOK {
		t.Errorf("without Origin: got HTTP %d %s, want 200", resp.StatusCode, body)
	}
}

func jsonQuote(t *testing.T, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestDNSRebinding: a page whose name was rebound to 127.0.0.1 sends its
// own name as Host. A bridge on loopback answers only loopback names, on
// every endpoint that serves data, before anything runs; probes and
// metrics answer any Host.
func TestDNSRebinding(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Metrics: m, AllowedHosts: loopbackHosts}, recording(rec))
	port := e.port(t)
	evil := "rebound.evil.example:" + port
	sameOrigin := http.Header{"Origin": {"http://" + evil}, "Content-Type": {"text/plain"}}

	resp, body := hostReq(t, e, http.MethodPost, "/", evil, sameOrigin, countCall)
	want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: host \"` + evil + `\" is not allowed (see allowed_hosts)"}}`
	if resp.StatusCode != http.StatusForbidden || string(body) != want {
		t.Errorf("POST /: got HTTP %d %s, want 403 %s", resp.StatusCode, body, want)
	}
	resp, body = hostReq(t, e, http.MethodGet, "/openrpc.json", evil, sameOrigin, "")
	if resp.StatusCode != http.StatusForbidden || string(body) != `{"error":"host \"`+evil+`\" is not allowed (see allowed_hosts)"}` {
		t.Errorf("GET /openrpc.json: got HTTP %d %s, want 403", resp.StatusCode, body)
	}
	resp, body = hostReq(t, e, http.MethodGet, "/ws", evil, upgradeHeaders("ws", sameOrigin), "")
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("GET /ws: got HTTP %d %s, want 403", resp.StatusCode, body)
	}
	for _, host := range []string{"rebound.evil.example", "localhost.evil.example:" + port, "127.0.0.1.nip.io:" + port, "[::2]:" + port, "localhost:x"} {
		if resp, body := hostReq(t, e, http.MethodPost, "/", host, nil, countCall); resp.StatusCode != http.StatusForbidden {
			t.Errorf("Host %q: got HTTP %d %s, want 403", host, resp.StatusCode, body)
		}
	}
	if calls := rec.take(); len(calls) != 0 {
		t.Fatalf("the backend ran %d calls of refused requests: %v", len(calls), calls)
	}
	if n := refusedCount(t, e, "host_not_allowed"); n != 8 {
		t.Errorf("requests_refused_total{reason=host_not_allowed} = %v, want 8", n)
	}

	// The loopback names, in any case, with or without a port, are served.
	for _, host := range []string{"localhost:" + port, "LOCALHOST:" + port, "localhost.:" + port, "127.0.0.1:" + port, "127.0.0.1", "[::1]:" + port, "localhost"} {
		resp, body := hostReq(t, e, http.MethodPost, "/", host, nil, countCall)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Host %q: got HTTP %d %s, want 200", host, resp.StatusCode, body)
		}
	}
	ws := dialWSWith(t, e, &websocket.DialOptions{Host: "localhost:" + port})
	ws.c.CloseNow()
	// Probes and metrics are not checked: kubelet and Prometheus use the
	// pod's address.
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		if resp, body := hostReq(t, e, http.MethodGet, path, evil, nil, ""); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: got HTTP %d %s, want 200", path, resp.StatusCode, body)
		}
	}
	if n := len(rec.take()); n != 7 {
		t.Errorf("the backend ran %d calls, want 7", n)
	}

	// Without AllowedHosts (the library's default) and with "*", any Host.
	for _, hosts := range [][]string{nil, {"*"}, {"*.evil.example"}} {
		e := newEnv(t, bridge.Options{AllowedHosts: hosts})
		if resp, body := hostReq(t, e, http.MethodPost, "/", "rebound.evil.example:"+e.port(t), nil, countCall); resp.StatusCode != http.StatusOK {
			t.Errorf("AllowedHosts %q: got HTTP %d %s, want 200", hosts, resp.StatusCode, body)
		}
	}
}

// TestCORSPreflight: a listed origin's preflight gets 204 with what a
// browser needs; any other origin gets 403 without CORS headers, and so
// does every origin when none is listed.
func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Metrics: m, Auth: newAuth(t),
		CORSOrigins: []string{"https://app.example", "https://*.apps.example", "http://localhost:*"},
		Streaming:   bridge.Streaming{WSOriginPatterns: []string{"legacy.example"}},
		Metadata:    bridge.Metadata{RequestHeaders: []string{"x-tenant"}, ResponseHeaders: []string{"x-served-by"}},
	}, recording(rec))
	preflight := func(path, origin, headers string) (*http.Response, []byte) {
		t.Helper()
		h := http.Header{"Origin": {origin}, "Access-Control-Request-Method": {"POST"}}
		if headers != "" {
			h.Set("Access-Control-Request-Headers", headers)
		}
		return hostReq(t, e, http.MethodOptions, path, "", h, "")
	}
	for _, tt := range []struct{ path, origin string }{
		{"/", "https://app.example"}, {"/openrpc.json", "https://app.example"},
		{"/", "https://a.apps.example"}, {"/", "https://a.b.apps.example"}, {"/", "http://localhost:3000"},
		{"/", "https://legacy.example"}, {"/", "http://legacy.example"},
	} {
		resp, body := preflight(tt.path, tt.origin, "content-type,authorization,x-tenant, grpc-metadata-trace-tag")
		if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Errorf("%s from %s: got HTTP %d %s, want 204", tt.path, tt.origin, resp.StatusCode, body)
			continue
		}
		want := http.Header{
			"Access-Control-Allow-Origin":   {tt.origin},
			"Access-Control-Allow-Methods":  {"POST, GET, OPTIONS"},
			"Access-Control-Allow-Headers":  {"Content-Type, Authorization, X-Api-Key, X-Request-Id, Grpc-Timeout, X-Request-Timeout, Traceparent, Tracestate, X-Tenant, grpc-metadata-trace-tag"},
			"Access-Control-Max-Age":        {"600"},
			"Access-Control-Expose-Headers": {"X-Request-Id, Retry-After, Www-Authenticate, X-Served-By"},
		}
		if got := corsHeaders(resp); !equalHeaders(got, want) {
			t.Errorf("%s from %s: got %v, want %v", tt.path, tt.origin, got, want)
		}
		if resp.Header.Get("Vary") != "Origin" {
			t.Errorf("%s from %s: got Vary %q, want Origin", tt.path, tt.origin, resp.Header.Get("Vary"))
		}
		if resp.Header.Get("Access-Control-Allow-Credentials") != "" {
			t.Errorf("Access-Control-Allow-Credentials is sent")
		}
	}
	// Private network access: asked for, granted to a listed origin.
	h := http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"}, "Access-Control-Request-Private-Network": {"true"}}
	if resp, _ := hostReq(t, e, http.MethodOptions, "/", "", h, ""); resp.Header.Get("Access-Control-Allow-Private-Network") != "true" {
		t.Errorf("got no Access-Control-Allow-Private-Network: %v", resp.Header)
	}

	for _, origin := range []string{"https://evil.example", "https://apps.example", "http://a.apps.example", "https://app.example:8443", "null"} {
		resp, body := preflight("/", origin, "content-type")
		if resp.StatusCode != http.StatusForbidden || len(corsHeaders(resp)) != 0 {
			t.Errorf("preflight from %s: got HTTP %d %v %s, want 403 without CORS headers", origin, resp.StatusCode, corsHeaders(resp), body)
		}
	}
	if n := refusedCount(t, e, "origin_not_allowed"); n != 5 {
		t.Errorf("requests_refused_total{reason=origin_not_allowed} = %v, want 5", n)
	}
	// OPTIONS without Origin is no preflight: authenticated, then 405, as
	// before.
	if resp, _ := hostReq(t, e, http.MethodOptions, "/", "", bearer(callers[0].token), ""); resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("OPTIONS without Origin: got HTTP %d, want 405", resp.StatusCode)
	}

	// The call after the preflight: Access-Control-Allow-Origin on the
	// reply, errors (401) included.
	h = bearer(callers[0].token)
	h.Set("Origin", "https://app.example")
	h.Set("Content-Type", "application/json")
	resp, body := hostReq(t, e, http.MethodPost, "/", "", h, countCall)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" {
		t.Errorf("POST: got HTTP %d %v %s", resp.StatusCode, resp.Header, body)
	}
	h.Del("Authorization")
	resp, _ = hostReq(t, e, http.MethodPost, "/", "", h, countCall)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "Www-Authenticate") {
		t.Errorf("POST without credentials: got HTTP %d %v, want 401 a page can read", resp.StatusCode, resp.Header)
	}
	// GET /openrpc.json from another origin is served (it changes nothing)
	// but without CORS headers, so the page cannot read it.
	resp, _ = hostReq(t, e, http.MethodGet, "/openrpc.json", "", http.Header{"Origin": {"https://evil.example"},
		"Authorization": {"Bearer " + callers[0].token}}, "")
	if resp.StatusCode != http.StatusOK || len(corsHeaders(resp)) != 0 {
		t.Errorf("GET /openrpc.json from another origin: got HTTP %d %v, want 200 without CORS headers", resp.StatusCode, corsHeaders(resp))
	}
	if n := len(rec.take()); n != 1 {
		t.Errorf("the backend ran %d calls, want 1", n)
	}

	// No origins listed: no CORS headers at all, preflights refused.
	e2 := newEnv(t, bridge.Options{})
	resp, _ = hostReq(t, e2, http.MethodOptions, "/", "", http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"}}, "")
	if resp.StatusCode != http.StatusForbidden || len(corsHeaders(resp)) != 0 || varyOrigin(resp) {
		t.Errorf("preflight without cors_origins: got HTTP %d %v, want 403 without CORS headers", resp.StatusCode, resp.Header)
	}
	resp, _ = hostReq(t, e2, http.MethodPost, "/", "", http.Header{"Origin": {"http://127.0.0.1:" + e2.port(t)}}, countCall)
	if resp.StatusCode != http.StatusOK || len(corsHeaders(resp)) != 0 || varyOrigin(resp) {
		t.Errorf("same-origin POST without cors_origins: got HTTP %d %v, want 200 without CORS headers", resp.StatusCode, resp.Header)
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range b {
		if strings.Join(a[k], "|") != strings.Join(v, "|") {
			return false
		}
	}
	return true
}

// TestWebSocketOriginAndHost: GET /ws refuses a page on another origin
// and a rebound Host with 403, counted and logged; listed origins (by
// cors_origins or its alias ws_origin_patterns) and same-origin pages
// connect.
func TestWebSocketOriginAndHost(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	e := newEnv(t, bridge.Options{Metrics: m, AllowedHosts: loopbackHosts,
		CORSOrigins: []string{"https://app.example"}, Streaming: bridge.Streaming{WSOriginPatterns: []string{"*.legacy.example"}}})
	port := e.port(t)
	for _, tt := range []struct {
		name, host, origin string
		reason             string
	}{
		{"bad origin", "", "https://evil.example", "origin_not_allowed"},
		{"null origin", "", "null", "origin_not_allowed"},
		{"bad host", "rebound.evil.example:" + port, "", "host_not_allowed"},
		{"bad host, same origin", "rebound.evil.example:" + port, "http://rebound.evil.example:" + port, "host_not_allowed"},
	} {
		h := http.Header{}
		if tt.origin != "" {
			h.Set("Origin", tt.origin)
		}
		before := refusedCount(t, e, tt.reason)
		resp, body := hostReq(t, e, http.MethodGet, "/ws", tt.host, upgradeHeaders("ws", h), "")
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "is not allowed") {
			t.Errorf("%s: got HTTP %d %s, want 403", tt.name, resp.StatusCode, body)
		}
		if n := refusedCount(t, e, tt.reason); n != before+1 {
			t.Errorf("%s: requests_refused_total{reason=%s} went from %v to %v", tt.name, tt.reason, before, n)
		}
	}
	for _, origin := range []string{"", "https://app.example", "https://a.legacy.example", "http://127.0.0.1:" + port} {
		h := http.Header{}
		if origin != "" {
			h.Set("Origin", origin)
		}
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		c, _, err := websocket.Dial(ctx, e.url+"/ws", &websocket.DialOptions{HTTPHeader: h})
		cancel()
		if err != nil {
			t.Errorf("Origin %q: %v", origin, err)
			continue
		}
		c.CloseNow()
	}
}

// varyOrigin reports whether resp varies by Origin (it may vary by
// Accept-Encoding, for compression).
func varyOrigin(resp *http.Response) bool {
	return strings.Contains(strings.Join(resp.Header.Values("Vary"), ","), "Origin")
}

// TestPreflightManyHeaders: a preflight (unauthenticated, by design)
// asking for many Grpc-Metadata-* headers is answered in time linear in
// its size, each name once (15,000 names, each asked for twice, 630 KB:
// the answer's header once grew by a copy per name, 2 s of CPU, gigabytes
// allocated).
func TestPreflightManyHeaders(t *testing.T) {
	// Not parallel: it bounds the time of one request (a second).
	e := newEnv(t, bridge.Options{CORSOrigins: []string{"https://app.example"}})
	const n = 15000
	names := make([]string, 0, 2*n)
	for i := range 2 * n {
		names = append(names, "grpc-metadata-a"+strconv.Itoa(i%n))
	}
	h := http.Header{"Origin": {"https://app.example"}, "Access-Control-Request-Method": {"POST"},
		"Access-Control-Request-Headers": {strings.Join(names, ",")}}
	start := time.Now()
	resp, _ := hostReq(t, e, http.MethodOptions, "/", "", h, "")
	if d := time.Since(start); d > time.Second {
		t.Errorf("answered after %v, want well under a second", d)
	}
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("got HTTP %d, want 204", resp.StatusCode)
	}
	allowed := strings.Split(resp.Header.Get("Access-Control-Allow-Headers"), ", ")
	seen := make(map[string]int)
	for _, name := range allowed {
		seen[name]++
	}
	for _, name := range names[:n] {
		if seen[name] != 1 {
			t.Fatalf("%s allowed %d times, want once", name, seen[name])
		}
	}
}

// TestHTTP10WithoutHost checks that an HTTP/1.0 request without Host is
// served on a bridge that lists its hosts (loopback's default): browsers
// always send Host, so such a request carries no DNS-rebinding risk, and
// old tools and health checkers rightly leave it out. An HTTP/1.1
// request without Host stays 400, as net/http answers it, and an
// HTTP/1.0 request with an unlisted Host stays 403.
func TestHTTP10WithoutHost(t *testing.T) {
	t.Parallel()
	rec := new(recorder)
	e := newEnv(t, bridge.Options{AllowedHosts: loopbackHosts}, recording(rec))
	addr := strings.TrimPrefix(e.url, "http://")
	length := "Content-Length: " + strconv.Itoa(len(countCall)) + "\r\n\r\n"
	for _, tc := range []struct {
		name, raw string
		status    int
		calls     int
	}{
		{"HTTP/1.0, no Host", "POST / HTTP/1.0\r\nContent-Type: application/json\r\n" + length + countCall, http.StatusOK, 1},
		{"HTTP/1.0, no Host, the document", "GET /openrpc.json HTTP/1.0\r\n\r\n", http.StatusOK, 0},
		{"HTTP/1.0, an unlisted Host", "POST / HTTP/1.0\r\nHost: rebound.evil.example\r\nContent-Type: application/json\r\n" + length + countCall, http.StatusForbidden, 0},
		{"HTTP/1.0, an empty Host", "POST / HTTP/1.0\r\nHost: \r\nContent-Type: application/json\r\n" + length + countCall, http.StatusOK, 1},
		{"HTTP/1.1, no Host", "POST / HTTP/1.1\r\nContent-Type: application/json\r\n" + length + countCall, http.StatusBadRequest, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write([]byte(tc.raw)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.status {
				t.Errorf("got HTTP %d %s, want %d", resp.StatusCode, body, tc.status)
			}
			if n := len(rec.take()); n != tc.calls {
				t.Errorf("the backend ran %d calls, want %d", n, tc.calls)
			}
		})
	}
}
