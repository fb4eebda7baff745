package bridge_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

func TestMetadataSize(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		md   metadata.MD
		want int64
	}{
		{nil, 0},
		{metadata.MD{"a": {"b"}}, 1 + 1 + 32},
		{metadata.MD{"a": {"b", "cd"}}, 34 + 35},
		// -bin values count as sent: base64 without padding, 3 bytes as 4.
		{metadata.MD{"x-bin": {"\x00\x01\x02"}}, 5 + 4 + 32},
		{metadata.MD{"x-bin": {"\x00"}}, 5 + 2 + 32},
		{metadata.MD{"x-request-id": {"r"}, "tenant": {"acme"}}, 12 + 1 + 32 + 6 + 4 + 32},
	} {
		if got := bridge.MetadataSize(tt.md); got != tt.want {
			t.Errorf("MetadataSize(%v) = %d, want %d", tt.md, got, tt.want)
		}
	}
}

// countingEnv is a bridge whose backend counts the calls it sees
// (reflection's aside), through the direct path or grpc-go's.
type countingEnv struct {
	*env
	calls *atomic.Int64
	log   *syncBuffer
}

func newCountingEnv(t *testing.T, direct bool, opts bridge.Options) countingEnv {
	t.Helper()
	calls := new(atomic.Int64)
	unary := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		calls.Add(1)
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		if !strings.HasPrefix(info.FullMethod, "/grpc.reflection.") {
			calls.Add(1)
		}
		return h(srv, ss)
	}
	var log syncBuffer
	opts.Metrics = newMetrics(t)
	opts.AccessLog = slog.New(slog.NewJSONHandler(&log, nil))
	e := newEnv(t, opts, withServer(grpc.UnaryInterceptor(unary), grpc.StreamInterceptor(stream)), directIf(direct), servedBy(netHTTP))
	return countingEnv{env: e, calls: calls, log: &log}
}

// TestMaxMetadataBytes: a request whose forwarded metadata (the selected
// headers, Grpc-Metadata-*, the bridge's own x-request-id and trace
// context; -bin values in base64) is over max_metadata_bytes is refused
// with HTTP 431 and -32600 before the backend sees anything, on both call
// paths, for single calls, batches and streams over POST, and for the
// WebSocket upgrade. Headers the bridge does not forward do not count.
func TestMaxMetadataBytes(t *testing.T) {
	t.Parallel()
	const limit = 1024
	const rid = "rid-1" // x-request-id: 12 + 5 + 32 = 49 bytes
	hello := `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"a"}}`
	batch := `[` + hello + `,{"jsonrpc":"2.0","id":2,"method":"demo.v1.Notes.GetCounter"}]`
	stream := `{"jsonrpc":"2.0","id":3,"method":"test.v1.TestService.ServerStream","params":{"count":2}}`
	// binary is a Grpc-Metadata-Blob-Bin value of n bytes, base64 with
	// padding as a client may send it: counted as the 4/3 n bytes gRPC
	// sends, not the n bytes decoded.
	binary := func(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }
	// tracestate is a valid W3C tracestate of 32 members, 479 bytes.
	var members []string
	for i := range 32 {
		members = append(members, fmt.Sprintf("v%02d=0123456789", i))
	}
	tracestate := strings.Join(members, ",")
	tests := []struct {
		name   string
		h      http.Header
		body   string
		size   int64 // over limit: refused with it; 0: allowed
		reason string
	}{
		// x-request-id: 12 + 5 + 32 = 49, x-forwarded-for: 15 + 9 + 32 = 56 (the
		// peer 127.0.0.1); big: 3 + 884 + 32 = 919; 1024 in all, the limit.
		{name: "at the limit", h: http.Header{"Grpc-Metadata-Big": {strings.Repeat("x", 884)}}, body: hello},
		{name: "one over", h: http.Header{"Grpc-Metadata-Big": {strings.Repeat("x", 885)}}, body: hello, size: 1025},
		{name: "batch", h: http.Header{"Grpc-Metadata-Big": {strings.Repeat("x", 885)}}, body: batch, size: 1025},
		{name: "stream", h: http.Header{"Grpc-Metadata-Big": {strings.Repeat("x", 885)}}, body: stream, size: 1025},
		// Several values count one field each.
		{name: "values", h: http.Header{"Grpc-Metadata-V": {strings.Repeat("x", 500), strings.Repeat("x", 500)}}, body: hello, size: 105 + 2*(1+500+32)},
		// blob-bin: 8 + 32 = 40, plus 879 for 659 bytes (1024), 880 for 660.
		{name: "binary within", h: http.Header{"Grpc-Metadata-Blob-Bin": {binary(659)}}, body: hello},
		{name: "binary over as sent", h: http.Header{"Grpc-Metadata-Blob-Bin": {binary(660)}}, body: hello, size: 1025},
		// A header in metadata.request_headers counts under its own name.
		{name: "request header", h: http.Header{"Authorization": {strings.Repeat("x", 1000)}}, body: hello, size: 105 + 13 + 1000 + 32},
		// Trace context the bridge passes on counts too.
		{name: "tracestate", h: http.Header{
			"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			"Tracestate":  {tracestate},
		}, body: hello}, // 105 + 98 + 521 = 724
		// A value of 500 fits beside the trace context's 98 bytes, not with
		// the tracestate's 521 too.
		{name: "tracestate and big", h: http.Header{
			"Traceparent":       {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			"Tracestate":        {tracestate},
			"Grpc-Metadata-Big": {strings.Repeat("x", 500)},
		}, body: hello, size: 105 + (11 + 55 + 32) + int64(10+len(tracestate)+32) + (3 + 500 + 32)},
		// Headers the bridge does not forward do not count.
		{name: "not forwarded", h: http.Header{"X-Other": {strings.Repeat("x", 5000)}}, body: hello},
	}
	for _, path := range []struct {
		name   string
		direct bool
	}{{"direct", true}, {"grpc-go", false}} {
		t.Run(path.name, func(t *testing.T) {
			e := newCountingEnv(t, path.direct, bridge.Options{Limits: bridge.Limits{MaxMetadataBytes: limit},
				Metadata: bridge.Metadata{RequestHeaders: []string{"Authorization"}}})
			refusals := 0
			for _, tt := range tests {
				h := tt.h.Clone()
				h.Set("X-Request-Id", rid)
				before := e.calls.Load()
				resp, body := sendRequest(t, http.MethodPost, e.url, h, strings.NewReader(tt.body))
				seen := e.calls.Load() - before
				if tt.size == 0 {
					if resp.StatusCode != http.StatusOK || strings.Contains(string(body), `"error"`) || seen == 0 {
						t.Errorf("%s: got HTTP %d %s with %d backend calls, want results", tt.name, resp.StatusCode, body, seen)
					}
					continue
				}
				refusals++
				n := strconv.FormatInt(tt.size, 10)
				want := `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: request metadata is ` + n +
					` bytes, over max_metadata_bytes (1024)","data":{"setting":"max_metadata_bytes","limit":1024,"size":` + n + `}}}`
				if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || string(body) != want {
					t.Errorf("%s: got HTTP %d %s, want 431 %s", tt.name, resp.StatusCode, body, want)
				}
				if seen != 0 {
					t.Errorf("%s: the backend saw %d calls, want none", tt.name, seen)
				}
			}

			// The WebSocket upgrade carries the connection's metadata: over
			// the limit, it is refused before the upgrade.
			before := e.calls.Load()
			big := http.Header{"Grpc-Metadata-Big": {strings.Repeat("x", 885)}}
			resp, body := sendPath(t, http.MethodGet, e.url, "/ws", upgradeHeaders(rid, big), nil)
			if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge || !strings.Contains(string(body), `"size":1025`) ||
				resp.Header.Get("Upgrade") != "" {
				t.Errorf("GET /ws: got HTTP %d %v %s, want 431 without an upgrade", resp.StatusCode, resp.Header, body)
			}
			refusals++
			big.Set("X-Request-Id", rid)
			if _, resp, err := websocket.Dial(t.Context(), e.url+"/ws", &websocket.DialOptions{HTTPHeader: big}); err == nil ||
				resp == nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
				t.Errorf("websocket.Dial: got %v, %v, want the 431 refusal", resp, err)
			}
			refusals++
			// Within the limit the connection opens and its calls carry it.
			within := http.Header{"Grpc-Metadata-Big": {strings.Repeat("x", 884)}, "X-Request-Id": {rid}}
			ws := dialWSWith(t, e.env, &websocket.DialOptions{HTTPHeader: within})
			ws.send(hello)
			if got := ws.recv(); got["result"] == nil {
				t.Errorf("call over a connection within the limit: got %v, want a result", got)
			}
			ws.c.CloseNow()
			if got := e.calls.Load() - before; got != 1 {
				t.Errorf("the backend saw %d calls from WebSocket, want 1 (from the connection within the limit)", got)
			}

			if s, ok := sample(scrape(t, e.env), "jsonrpc_bridge_requests_refused_total", map[string]string{"reason": "metadata_too_large"}); !ok ||
				s.GetCounter().GetValue() != float64(refusals) {
				t.Errorf("requests_refused_total{reason=metadata_too_large}: got %v, want %d", s, refusals)
			}
			logged := 0
			sc := bufio.NewScanner(strings.NewReader(e.log.String()))
			for sc.Scan() {
				var l refusedLine
				if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "refused" && l.Reason == "metadata_too_large" &&
					strings.HasPrefix(l.Detail, "request metadata is ") && l.RequestID == rid {
					logged++
				}
			}
			if logged != refusals {
				t.Errorf("got %d refused records with reason metadata_too_large, want %d:\n%s", logged, refusals, e.log.String())
			}
		})
	}
}
