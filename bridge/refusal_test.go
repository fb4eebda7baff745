package bridge_test

import (
	"bufio"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// refusalMaxBody is the max_body_bytes of the servers of TestRefusals.
const refusalMaxBody = 64

// refusalReasons are the reasons of jsonrpc_bridge_requests_refused_total,
// every one registered from the start.
var refusalReasons = []string{"unauthenticated", "in_flight", "rate_limit",
	"body_too_large", "metadata_too_large", "bad_header", "unreadable_body", "bad_encoding", "method_not_allowed",
	"not_websocket", "not_discovered", "body_timeout", "body_reads", "ws_connections", "host_not_allowed", "origin_not_allowed"}

// refusedLine is an access log line of a refused request.
type refusedLine struct {
	Level     string  `json:"level"`
	Msg       string  `json:"msg"`
	Reason    string  `json:"reason"`
	Detail    string  `json:"detail"`
	Identity  *string `json:"identity"`
	RequestID string  `json:"request_id"`
}

// sendRequest sends an HTTP request to POST /, or another method, with
// the given headers and body, and returns the response and its body.
func sendRequest(t *testing.T, method, u string, h http.Header, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	return sendPath(t, method, u, "/", h, body)
}

// sendPath is sendRequest to another path than /.
func sendPath(t *testing.T, method, u, path string, h http.Header, body io.Reader) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, u+path, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// sendTruncated announces a body of 50 bytes (within refusalMaxBody),
// sends 10 and stops sending (closes its side of the connection), then
// reads the bridge's answer.
func sendTruncated(t *testing.T, u, requestID string) (*http.Response, []byte) {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", pu.Host, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: "+pu.Host+"\r\nContent-Type: application/json\r\n"+
		"X-Request-Id: "+requestID+"\r\nContent-Length: 50\r\n\r\n"+`{"jsonrpc"`); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// invalidReply is the -32600 reply with a null id the bridge answers a
// refused request with.
func invalidReply(message string) string {
	return `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"` + message + `"}}`
}

// upgradeHeaders are the headers of a WebSocket upgrade request, with
// those of h and X-Request-Id rid.
func upgradeHeaders(rid string, h http.Header) http.Header {
	u := http.Header{
		"X-Request-Id":          {rid},
		"Connection":            {"Upgrade"},
		"Upgrade":               {"websocket"},
		"Sec-Websocket-Version": {"13"},
		"Sec-Websocket-Key":     {"dGhlIHNhbXBsZSBub25jZQ=="},
	}
	for k, v := range h {
		u[k] = v
	}
	return u
}

// TestRefusals checks that every request refused at the front door before
// any call ran (POST /, GET /ws, GET /openrpc.json) is answered as before,
// counted under its reason and logged, with metrics and the access log on
// or off.
func TestRefusals(t *testing.T) {
	t.Parallel()
	oversized := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"` +
		strings.Repeat("x", 2*refusalMaxBody) + `"},"id":1}`
	hello := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`
	tooLarge := invalidReply("Invalid Request: the request body is larger than max_body_bytes (64 bytes)")
	for _, tt := range []struct {
		name   string
		send   func(t *testing.T, url, requestID string) (*http.Response, []byte)
		status int
		body   string
		allow  string      // the Allow header, for 405
		header http.Header // other response headers wanted
		reason string
		detail string // contained in the log line's detail
		// undiscovered serves before the backend's services are discovered.
		undiscovered bool
	}{
		{
			name: "body_too_large/content_length",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendRequest(t, http.MethodPost, u, http.Header{"X-Request-Id": {rid}}, strings.NewReader(oversized))
			},
			status: http.StatusRequestEntityTooLarge, body: tooLarge, reason: "body_too_large",
		},
		{
			name: "body_too_large/chunked",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				// A reader of unknown length: sent chunked, caught as it is read.
				return sendRequest(t, http.MethodPost, u, http.Header{"X-Request-Id": {rid}},
					io.MultiReader(strings.NewReader(oversized)))
			},
			status: http.StatusRequestEntityTooLarge, body: tooLarge, reason: "body_too_large",
		},
		{
			name: "bad_header/grpc_timeout",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendRequest(t, http.MethodPost, u, http.Header{"X-Request-Id": {rid}, "Grpc-Timeout": {"soon"}},
					strings.NewReader(hello))
			},
			status: http.StatusBadRequest, reason: "bad_header", detail: "the Grpc-Timeout header is not a valid timeout",
			body: invalidReply(`Invalid Request: the Grpc-Timeout header is not a valid timeout: want 1 to 8 digits and a unit (H, M, S, m, u, n)`),
		},
		{
			name: "bad_header/request_timeout",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendRequest(t, http.MethodPost, u, http.Header{"X-Request-Id": {rid}, "X-Request-Timeout": {"-1"}},
					strings.NewReader(hello))
			},
			status: http.StatusBadRequest, reason: "bad_header", detail: "the X-Request-Timeout header is not a valid timeout",
			body: invalidReply(`Invalid Request: the X-Request-Timeout header is not a valid timeout: want a positive timeout`),
		},
		{
			name: "bad_header/binary_metadata",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendRequest(t, http.MethodPost, u, http.Header{"X-Request-Id": {rid}, "Grpc-Metadata-Blob-Bin": {"%%%"}},
					strings.NewReader(hello))
			},
			status: http.StatusBadRequest, reason: "bad_header", detail: "the Grpc-Metadata-Blob-Bin header is not base64",
			body: invalidReply(`Invalid Request: the Grpc-Metadata-Blob-Bin header is not base64`),
		},
		{
			name: "bad_header/unprintable_metadata",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendRequest(t, http.MethodPost, u, http.Header{"X-Request-Id": {rid}, "Grpc-Metadata-Note": {"caf\xc3\xa9"}},
					strings.NewReader(hello))
			},
			status: http.StatusBadRequest, reason: "bad_header", detail: "the Grpc-Metadata-Note header has characters",
			body: invalidReply(`Invalid Request: the Grpc-Metadata-Note header has characters gRPC metadata cannot carry`),
		},
		{
			name: "metadata_too_large",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendRequest(t, http.MethodPost, u, http.Header{"X-Request-Id": {rid}, "Grpc-Metadata-Big": {strings.Repeat("x", 20000)}},
					strings.NewReader(hello))
			},
			// big: 3+20000+32; x-request-id: 12+26+32; x-forwarded-for: 15+9+32
			status: http.StatusRequestHeaderFieldsTooLarge, reason: "metadata_too_large",
			detail: "request metadata is 20161 bytes, over max_metadata_bytes (16384)",
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: request metadata is 20161 bytes, over max_metadata_bytes (16384)",` +
				`"data":{"setting":"max_metadata_bytes","limit":16384,"size":20161}}}`,
		},
		{
			name:   "unreadable_body",
			send:   sendTruncated,
			status: http.StatusBadRequest, reason: "unreadable_body", detail: "unexpected EOF",
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error: the request body could not be read"}}`,
		},
		{
			name: "method_not_allowed/GET",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendRequest(t, http.MethodGet, u, http.Header{"X-Request-Id": {rid}}, nil)
			},
			status: http.StatusMethodNotAllowed, allow: "POST", reason: "method_not_allowed", detail: "GET",
			body: invalidReply(`Invalid Request: JSON-RPC calls are sent with HTTP POST`),
		},
		{
			name: "method_not_allowed/HEAD",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendRequest(t, http.MethodHead, u, http.Header{"X-Request-Id": {rid}}, nil)
			},
			status: http.StatusMethodNotAllowed, allow: "POST", reason: "method_not_allowed", detail: "HEAD",
		},
		{
			name: "ws/method_not_allowed",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodPost, u, "/ws", upgradeHeaders(rid, nil), nil)
			},
			status: http.StatusMethodNotAllowed, allow: "GET", reason: "method_not_allowed", detail: "POST",
			body: `{"error":"WebSocket connections are opened with GET"}`,
		},
		{
			name: "ws/not_websocket",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodGet, u, "/ws", http.Header{"X-Request-Id": {rid}}, nil)
			},
			status: http.StatusUpgradeRequired, header: http.Header{"Upgrade": {"websocket"}},
			reason: "not_websocket", detail: "no Connection: upgrade header",
			body: `{"error":"GET /ws opens a WebSocket connection; send the WebSocket upgrade headers"}`,
		},
		{
			name: "ws/not_websocket/upgrade",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodGet, u, "/ws", upgradeHeaders(rid, http.Header{"Upgrade": {"h2c"}}), nil)
			},
			status: http.StatusUpgradeRequired, header: http.Header{"Upgrade": {"websocket"}},
			reason: "not_websocket", detail: "no Upgrade: websocket header",
			body: `{"error":"GET /ws opens a WebSocket connection; send the WebSocket upgrade headers"}`,
		},
		{
			name: "ws/bad_header",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodGet, u, "/ws", upgradeHeaders(rid, http.Header{"Grpc-Timeout": {"soon"}}), nil)
			},
			status: http.StatusBadRequest, reason: "bad_header", detail: "the Grpc-Timeout header is not a valid timeout",
			body: invalidReply(`Invalid Request: the Grpc-Timeout header is not a valid timeout: want 1 to 8 digits and a unit (H, M, S, m, u, n)`),
		},
		{
			name: "ws/bad_header/binary_metadata",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodGet, u, "/ws", upgradeHeaders(rid, http.Header{"Grpc-Metadata-Blob-Bin": {"%%%"}}), nil)
			},
			status: http.StatusBadRequest, reason: "bad_header", detail: "the Grpc-Metadata-Blob-Bin header is not base64",
			body: invalidReply(`Invalid Request: the Grpc-Metadata-Blob-Bin header is not base64`),
		},
		{
			name: "ws/metadata_too_large",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodGet, u, "/ws", upgradeHeaders(rid, http.Header{"Grpc-Metadata-Big": {strings.Repeat("x", 20000)}}), nil)
			},
			// big: 3+20000+32; x-request-id: 12+29+32; x-forwarded-for: 15+9+32
			status: http.StatusRequestHeaderFieldsTooLarge, reason: "metadata_too_large",
			detail: "request metadata is 20164 bytes, over max_metadata_bytes (16384)",
			body: `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: request metadata is 20164 bytes, over max_metadata_bytes (16384)",` +
				`"data":{"setting":"max_metadata_bytes","limit":16384,"size":20164}}}`,
		},
		{
			name: "openrpc/method_not_allowed",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodPost, u, "/openrpc.json", http.Header{"X-Request-Id": {rid}}, strings.NewReader("{}"))
			},
			status: http.StatusMethodNotAllowed, allow: "GET, HEAD", reason: "method_not_allowed", detail: "POST",
			body: `{"error":"method not allowed"}`,
		},
		{
			name: "openrpc/not_discovered",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodGet, u, "/openrpc.json", http.Header{"X-Request-Id": {rid}}, nil)
			},
			undiscovered: true,
			status:       http.StatusServiceUnavailable, reason: "not_discovered",
			body: `{"error":"the backend's services are not discovered yet"}`,
		},
		{
			name: "openrpc/not_discovered/HEAD",
			send: func(t *testing.T, u, rid string) (*http.Response, []byte) {
				return sendPath(t, http.MethodHead, u, "/openrpc.json", http.Header{"X-Request-Id": {rid}}, nil)
			},
			undiscovered: true,
			status:       http.StatusServiceUnavailable, reason: "not_discovered",
		},
	} {
		for _, v := range []struct {
			name             string
			metrics, logging bool
		}{
			{"metrics+log", true, true},
			{"metrics", true, false},
			{"log", false, true},
			{"neither", false, false},
		} {
			t.Run(tt.name+"/"+v.name, func(t *testing.T) {
				t.Parallel()
				opts := bridge.Options{Limits: bridge.Limits{MaxBodyBytes: refusalMaxBody}}
				if v.metrics {
					opts.Metrics = newMetrics(t)
				}
				var buf syncBuffer
				if v.logging {
					opts.AccessLog = slog.New(slog.NewJSONHandler(&buf, nil))
				}
				var shape []envOption
				if tt.undiscovered {
					shape = []envOption{onBufconn(), undiscovered(), servedBy(netHTTP)}
				}
				e := newEnv(t, opts, shape...)
				rid := "refusal-" + strings.ReplaceAll(tt.name, "/", "-")

				resp, body := tt.send(t, e.url, rid)
				if resp.StatusCode != tt.status {
					t.Errorf("got HTTP %d %s, want %d", resp.StatusCode, body, tt.status)
				}
				if string(body) != tt.body {
					t.Errorf("got body %s, want %s", body, tt.body)
				}
				if got := resp.Header.Get("Allow"); got != tt.allow {
					t.Errorf("got Allow %q, want %q", got, tt.allow)
				}
				if got := resp.Header.Get("X-Request-Id"); got != rid {
					t.Errorf("got X-Request-Id %q, want %q", got, rid)
				}
				for k, v := range tt.header {
					if got := resp.Header.Values(k); !slices.Equal(got, v) {
						t.Errorf("got %s %q, want %q", k, got, v)
					}
				}
				if got, want := resp.Header.Get("Content-Type"), "application/json"; got != want {
					t.Errorf("got Content-Type %q, want %q", got, want)
				}

				if v.metrics {
					fams := scrape(t, e)
					for _, reason := range refusalReasons {
						want := 0.0
						if reason == tt.reason {
							want = 1
						}
						s, ok := sample(fams, "jsonrpc_bridge_requests_refused_total", map[string]string{"reason": reason})
						if !ok || s.GetCounter().GetValue() != want {
							t.Errorf("requests_refused_total{reason=%q}: got %v, want %v", reason, s, want)
						}
					}
					if s, ok := sample(fams, "jsonrpc_bridge_requests_in_flight", nil); !ok || s.GetGauge().GetValue() != 0 {
						t.Errorf("requests_in_flight: got %v, want 0 after the refusal", s)
					}
				} else if code, _ := e.do(t, http.MethodGet, "/metrics", "", ""); code != http.StatusNotFound {
					t.Errorf("GET /metrics with metrics off: got HTTP %d, want 404", code)
				}

				if !v.logging {
					return
				}
				var lines []refusedLine
				sc := bufio.NewScanner(strings.NewReader(buf.String()))
				for sc.Scan() {
					var l refusedLine
					if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
						t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
					}
					lines = append(lines, l)
				}
				if len(lines) != 1 {
					t.Fatalf("got %d access log lines, want 1:\n%s", len(lines), buf.String())
				}
				l := lines[0]
				if l.Msg != "refused" || l.Level != "INFO" || l.Reason != tt.reason || l.RequestID != rid ||
					l.Identity == nil || *l.Identity != "anonymous" {
					t.Errorf("got %+v, want an INFO refused line with reason %s, request id %s and identity anonymous", l, tt.reason, rid)
				}
				if !strings.Contains(l.Detail, tt.detail) {
					t.Errorf("got detail %q, want it to contain %q", l.Detail, tt.detail)
				}
			})
		}
	}
}

// TestRefusalIdentity checks that a refusal after authentication is logged
// with the caller's identity, and that a long detail taken from the
// client is cut.
func TestRefusalIdentity(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	var buf syncBuffer
	e := newEnv(t, bridge.Options{Metrics: m, AccessLog: slog.New(slog.NewJSONHandler(&buf, nil)), Auth: newAuth(t)})
	h := bearer("reader-token-0123456789")
	h.Set("Grpc-Metadata-"+strings.Repeat("a", 1000)+"-Bin", "%%%")
	resp, _ := postAs(t, e.url, h, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("got HTTP %d, want 400", resp.StatusCode)
	}
	if s, ok := sample(scrape(t, e), "jsonrpc_bridge_requests_refused_total", map[string]string{"reason": "bad_header"}); !ok || s.GetCounter().GetValue() != 1 {
		t.Errorf("requests_refused_total{reason=bad_header}: got %v, want 1", s)
	}
	var l refusedLine
	if err := json.Unmarshal([]byte(buf.String()), &l); err != nil {
		t.Fatalf("want one JSON log line, got %q: %v", buf.String(), err)
	}
	if l.Reason != "bad_header" || l.Identity == nil || *l.Identity != "reader" {
		t.Errorf("got %+v, want reason bad_header and identity reader", l)
	}
	if len(l.Detail) != 256 || !strings.HasPrefix(l.Detail, "the Grpc-Metadata-Aaaa") {
		t.Errorf("got a detail of %d bytes %q, want the first 256 bytes of the error", len(l.Detail), l.Detail)
	}
}

// TestRefusalsNotCounted checks that the refusals of GET /ws the
// WebSocket library answers itself (a bad Sec-WebSocket-Version or -Key;
// a forbidden Origin is the bridge's own refusal, see TestWebSocketOriginAndHost),
// and the 503 of Shutdown, as well as
// requests that are not refused, are neither counted nor logged as
// refusals, and are answered as before.
func TestRefusalsNotCounted(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	var buf syncBuffer
	e := newEnv(t, bridge.Options{Metrics: m, AccessLog: slog.New(slog.NewJSONHandler(&buf, nil))})

	for _, tt := range []struct {
		name   string
		h      http.Header // added to the upgrade headers
		status int
		body   string
	}{
		{"bad_version", http.Header{"Sec-Websocket-Version": {"8"}}, http.StatusBadRequest,
			`unsupported WebSocket protocol version (only 13 is supported): "8"`},
		{"bad_key", http.Header{"Sec-Websocket-Key": {"short"}}, http.StatusBadRequest,
			`WebSocket protocol violation: invalid Sec-WebSocket-Key "short", must be a 16 byte base64 encoded string`},
	} {
		resp, body := sendPath(t, http.MethodGet, e.url, "/ws", upgradeHeaders("lib-"+tt.name, tt.h), nil)
		if resp.StatusCode != tt.status {
			t.Errorf("%s: got HTTP %d %s, want %d", tt.name, resp.StatusCode, body, tt.status)
		}
		if !strings.Contains(string(body), tt.body) {
			t.Errorf("%s: got body %q, want the library's answer %q", tt.name, body, tt.body)
		}
	}
	// Not refusals: a WebSocket connection and the document.
	w := dialWS(t, e)
	w.c.CloseNow()
	if code, _ := e.do(t, http.MethodGet, "/openrpc.json", "", ""); code != http.StatusOK {
		t.Errorf("GET /openrpc.json: got HTTP %d, want 200", code)
	}
	if err := e.bridge.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	resp, body := sendPath(t, http.MethodGet, e.url, "/ws", upgradeHeaders("shutdown", nil), nil)
	if resp.StatusCode != http.StatusServiceUnavailable || string(body) != `{"error":"the server is shutting down"}` {
		t.Errorf("GET /ws after Shutdown: got HTTP %d %s, want 503", resp.StatusCode, body)
	}

	fams := scrape(t, e)
	for _, reason := range refusalReasons {
		if s, ok := sample(fams, "jsonrpc_bridge_requests_refused_total", map[string]string{"reason": reason}); !ok || s.GetCounter().GetValue() != 0 {
			t.Errorf("requests_refused_total{reason=%q}: got %v, want 0", reason, s)
		}
	}
	if strings.Contains(buf.String(), `"msg":"refused"`) {
		t.Errorf("got refused records, want none:\n%s", buf.String())
	}
}
