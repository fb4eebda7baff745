package bridge_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// mdRecorder is a backend interceptor that records the incoming metadata
// of each call and sends response headers and trailers.
type mdRecorder struct {
	mu  sync.Mutex
	got []metadata.MD
}

func (m *mdRecorder) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	m.mu.Lock()
	m.got = append(m.got, md.Copy())
	m.mu.Unlock()
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-backend-version", "7", "x-internal", "secret"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-checksum-bin", "\x00\x01\xff", "x-cost", "3"))
	return h(ctx, req)
}

func (m *mdRecorder) last(t *testing.T) metadata.MD {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.got) == 0 {
		t.Fatal("the backend saw no call")
	}
	return m.got[len(m.got)-1]
}

func serveWith(e *env, body string, header http.Header) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	for k, v := range header {
		req.Header[k] = v
	}
	w := httptest.NewRecorder()
	e.bridge.ServeHTTP(w, req)
	return w
}

const echoCall = `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Echo","params":{"fString":"x"}}`

func TestMetadataForwarding(t *testing.T) {
	t.Parallel()
	var rec mdRecorder
	e := newEnv(t, bridge.Options{Metadata: bridge.Metadata{
		RequestHeaders:  []string{"authorization", "X-Request-Id", "Keep-Alive", "Host", "x-raw-bin"},
		ResponseHeaders: []string{"X-Backend-Version", "x-checksum-bin", "x-cost", "content-type"},
	}}, withServer(grpc.UnaryInterceptor(rec.intercept)))

	w := serveWith(e, echoCall, http.Header{
		"Authorization":             {"Bearer t0ken"},
		"X-Request-Id":              {"r-1"},
		"X-Not-Listed":              {"no"},
		"Keep-Alive":                {"timeout=5"},
		"Te":                        {"trailers"},
		"Grpc-Metadata-Tenant":      {"acme"},
		"Grpc-Metadata-Trace-Bin":   {base64.StdEncoding.EncodeToString([]byte{0, 1, 2, 0xfe})},
		"Grpc-Metadata-Connection":  {"close"},
		"Grpc-Metadata-Grpc-Status": {"0"},
		"X-Raw-Bin":                 {base64.RawURLEncoding.EncodeToString([]byte{0xfb, 0xff})},
	})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"result"`) {
		t.Fatalf("got HTTP %d %s, want a result", w.Code, w.Body)
	}
	md := rec.last(t)
	want := map[string][]string{
		"authorization": {"Bearer t0ken"},
		"x-request-id":  {"r-1"},
		"tenant":        {"acme"},
		"trace-bin":     {"\x00\x01\x02\xfe"},
		"x-raw-bin":     {"\xfb\xff"},
	}
	for k, v := range want {
		if got := md.Get(k); strings.Join(got, "|") != strings.Join(v, "|") {
			t.Errorf("metadata %s: got %q, want %q", k, got, v)
		}
	}
	for _, k := range []string{"x-not-listed", "keep-alive", "connection", "grpc-metadata-tenant", "host"} {
		if got := md.Get(k); len(got) > 0 {
			t.Errorf("metadata %s: got %q, want it not forwarded", k, got)
		}
	}
	if got := md.Get("grpc-status"); len(got) > 0 {
		t.Errorf("reserved grpc-status forwarded: %q", got)
	}

	// Allowlisted response headers and trailers come back; others do not.
	h := w.Header()
	if got := h.Values("X-Backend-Version"); len(got) != 1 || got[0] != "7" {
		t.Errorf("X-Backend-Version: got %q, want 7", got)
	}
	if got := h.Get("X-Cost"); got != "3" {
		t.Errorf("X-Cost (a trailer): got %q, want 3", got)
	}
	if got := h.Get("X-Checksum-Bin"); got != base64.StdEncoding.EncodeToString([]byte{0, 1, 0xff}) {
		t.Errorf("X-Checksum-Bin: got %q, want base64 of 00 01 ff", got)
	}
	if got := h.Get("X-Internal"); got != "" {
		t.Errorf("X-Internal: got %q, want it not returned", got)
	}
	if got := h.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type: got %q, want application/json", got)
	}

	// A batch returns no backend headers: whose would they be?
	w = serveWith(e, "["+echoCall+"]", nil)
	if w.Code != 200 || w.Header().Get("X-Backend-Version") != "" {
		t.Errorf("batch: got HTTP %d with X-Backend-Version %q, want none", w.Code, w.Header().Get("X-Backend-Version"))
	}
}

func TestConnectionOptionIsNotForwarded(t *testing.T) {
	t.Parallel()
	var rec mdRecorder
	e := newEnv(t, bridge.Options{Metadata: bridge.Metadata{RequestHeaders: []string{"X-Hop", "X-Keep"}}}, withServer(grpc.UnaryInterceptor(rec.intercept)))
	serveWith(e, echoCall, http.Header{"Connection": {"keep-alive, x-hop"}, "X-Hop": {"1"}, "X-Keep": {"2"}})
	md := rec.last(t)
	if got := md.Get("x-hop"); len(got) != 0 {
		t.Errorf("x-hop named by Connection: got %q, want it not forwarded", got)
	}
	if got := md.Get("x-keep"); len(got) != 1 {
		t.Errorf("x-keep: got %q, want it forwarded", got)
	}
}

func TestNoMetadataConfigured(t *testing.T) {
	t.Parallel()
	var rec mdRecorder
	e := newEnv(t, bridge.Options{}, withServer(grpc.UnaryInterceptor(rec.intercept)))
	w := serveWith(e, echoCall, http.Header{"Authorization": {"Bearer x"}, "Grpc-Metadata-Tenant": {"acme"}})
	md := rec.last(t)
	if len(md.Get("authorization")) != 0 || len(md.Get("tenant")) != 1 {
		t.Errorf("got metadata %v, want only tenant", md)
	}
	if w.Header().Get("X-Backend-Version") != "" {
		t.Errorf("got response headers %v, want none configured", w.Header())
	}
}

func TestBadMetadataIsInvalidRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Metadata: bridge.Metadata{RequestHeaders: []string{"X-Name"}}})
	tests := []struct {
		name   string
		header http.Header
	}{
		{name: "bin not base64", header: http.Header{"Grpc-Metadata-Trace-Bin": {"%%%"}}},
		{name: "non-ASCII value", header: http.Header{"X-Name": {"caf\xc3\xa9"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serveWith(e, echoCall, tt.header)
			if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "-32600") {
				t.Errorf("got HTTP %d %s, want 400 with -32600", w.Code, w.Body)
			}
		})
	}
}

func TestForbiddenHeader(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Connection", "te", "Transfer-Encoding", "Upgrade", "Host", "content-type", "grpc-timeout", ":authority", "bad header", ""} {
		if bridge.ForbiddenHeader(name) == "" {
			t.Errorf("ForbiddenHeader(%q) = \"\", want a reason", name)
		}
	}
	for _, name := range []string{"Authorization", "x-request-id", "X-Trace-Bin", "cookie"} {
		if r := bridge.ForbiddenHeader(name); r != "" {
			t.Errorf("ForbiddenHeader(%q) = %q, want \"\"", name, r)
		}
	}
}

// TestRepeatedHeadersForwardEveryValue sends one allowlisted header and
// one Grpc-Metadata-* header twice each, over HTTP/1.1 and HTTP/2: every
// value reaches the backend, in order, as values of one metadata key.
func TestRepeatedHeadersForwardEveryValue(t *testing.T) {
	t.Parallel()
	var rec mdRecorder
	e := newEnv(t, bridge.Options{Metadata: bridge.Metadata{RequestHeaders: []string{"x-foo"}}}, withServer(grpc.UnaryInterceptor(rec.intercept)))
	tests := []struct {
		name  string
		http2 bool
	}{
		{name: "HTTP/1.1"},
		{name: "HTTP/2", http2: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(e.bridge)
			srv.EnableHTTP2 = tt.http2
			srv.StartTLS()
			t.Cleanup(srv.Close)
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, strings.NewReader(echoCall))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Add("X-Foo", "a")
			req.Header.Add("x-foo", "b")
			req.Header.Add("Grpc-Metadata-Bar", "1")
			req.Header.Add("Grpc-Metadata-Bar", "2")
			req.Header.Add("Grpc-Metadata-X-Foo", "c")
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.ProtoMajor != map[bool]int{false: 1, true: 2}[tt.http2] {
				t.Fatalf("got %s %d, want 200 over %s", resp.Proto, resp.StatusCode, tt.name)
			}
			md := rec.last(t)
			for key, want := range map[string]string{"x-foo": "a|b|c", "bar": "1|2"} {
				got := md.Get(key)
				// The two headers' order between themselves is the map's.
				if key == "x-foo" && len(got) == 3 && got[0] == "c" {
					got = append(got[1:], got[0])
				}
				if strings.Join(got, "|") != want {
					t.Errorf("metadata %s: got %q, want %s", key, got, want)
				}
			}
		})
	}
}
