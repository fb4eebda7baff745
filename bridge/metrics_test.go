package bridge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newMetrics(t *testing.T) *bridge.Metrics {
	t.Helper()
	m, err := bridge.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// scrape fetches /metrics and parses it.
func scrape(t *testing.T, e *env) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := testClient.Get(e.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: HTTP %d", resp.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// sample returns the value of the series of family name whose labels
// include want, and whether there is one.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (*dto.Metric, bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

func TestMetricsAfterKnownCalls(t *testing.T) {
	t.Parallel()
	m := newMetrics(t)
	e := newEnv(t, bridge.Options{Metrics: m, Auth: newAuth(t)})
	m.WatchBackend("main", e.conn)
	m.Discovered("main", time.Unix(1700000000, 0))
	m.Discovering("other")
	m.WatchDiscovery(func() []bridge.DiscoveryState {
		return []bridge.DiscoveryState{{Backend: "watched", Ready: true, LastRefresh: time.Unix(1700000100, 0)}}
	})
	admin, reader := bearer("admin-token-0123456789"), bearer("reader-token-0123456789")
	hello := `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`
	notFound := `{"jsonrpc":"2.0","method":"test.v1.TestService.Fail","params":{"code":5},"id":2}`
	for range 3 {
		postAs(t, e.url, admin, hello)
	}
	for range 2 {
		postAs(t, e.url, admin, notFound)
	}
	postAs(t, e.url, admin, `{"jsonrpc":"2.0","method":"no.such.Method","id":3}`)
	postAs(t, e.url, admin, `{"jsonrpc":"2.0","id":4}`)
	postAs(t, e.url, reader, notFound)               // refused: PERMISSION_DENIED
	postAs(t, e.url, admin, "["+hello+","+hello+"]") // a batch of two
	postAs(t, e.url, nil, hello)                     // 401: no call

	fams := scrape(t, e)
	for _, tt := range []struct {
		method, code string
		want         float64
	}{
		{"helloworld.Greeter.SayHello", "0", 5},
		{"test.v1.TestService.Fail", "5", 2},
		{"test.v1.TestService.Fail", "7", 1},
		{"(unknown)", "-32601", 1},
		{"(invalid)", "-32600", 1},
	} {
		s, ok := sample(fams, "jsonrpc_bridge_calls_total", map[string]string{"method": tt.method, "code": tt.code})
		if got := s.GetCounter().GetValue(); !ok || got != tt.want {
			t.Errorf("calls_total{method=%q,code=%q} = %v, want %v", tt.method, tt.code, got, tt.want)
		}
	}
	if s, ok := sample(fams, "jsonrpc_bridge_call_duration_seconds", map[string]string{"method": "helloworld.Greeter.SayHello"}); !ok || s.GetHistogram().GetSampleCount() != 5 {
		t.Errorf("call_duration_seconds of SayHello: got %v, want 5 observations", s)
	}
	if s, ok := sample(fams, "jsonrpc_bridge_batch_size", nil); !ok || s.GetHistogram().GetSampleCount() != 1 || s.GetHistogram().GetSampleSum() != 2 {
		t.Errorf("batch_size: got %v, want one batch of 2", s)
	}
	if s, ok := sample(fams, "jsonrpc_bridge_requests_refused_total", map[string]string{"reason": "unauthenticated"}); !ok || s.GetCounter().GetValue() != 1 {
		t.Errorf("requests_refused_total{reason=unauthenticated}: got %v, want 1", s)
	}
	for _, reason := range []string{"in_flight", "rate_limit", "body_too_large", "metadata_too_large", "bad_header", "unreadable_body", "method_not_allowed", "not_websocket", "not_discovered"} {
		if s, ok := sample(fams, "jsonrpc_bridge_requests_refused_total", map[string]string{"reason": reason}); !ok || s.GetCounter().GetValue() != 0 {
			t.Errorf("requests_refused_total{reason=%s}: got %v, want a 0 registered from the start", reason, s)
		}
	}
	for _, name := range []string{"jsonrpc_bridge_calls_in_flight", "jsonrpc_bridge_requests_in_flight"} {
		if s, ok := sample(fams, name, nil); !ok || s.GetGauge().GetValue() != 0 {
			t.Errorf("%s: got %v, want 0 after the calls", name, s)
		}
	}
	if s, ok := sample(fams, "jsonrpc_bridge_discovery_ready", map[string]string{"backend": "main"}); !ok || s.GetGauge().GetValue() != 1 {
		t.Errorf("discovery_ready{backend=main}: got %v, want 1", s)
	}
	if s, ok := sample(fams, "jsonrpc_bridge_discovery_ready", map[string]string{"backend": "other"}); !ok || s.GetGauge().GetValue() != 0 {
		t.Errorf("discovery_ready{backend=other}: got %v, want 0", s)
	}
	if s, ok := sample(fams, "jsonrpc_bridge_discovery_last_refresh_timestamp_seconds", map[string]string{"backend": "main"}); !ok || s.GetGauge().GetValue() != 1700000000 {
		t.Errorf("discovery_last_refresh_timestamp_seconds: got %v, want 1700000000", s)
	}
	if s, ok := sample(fams, "jsonrpc_bridge_discovery_last_refresh_timestamp_seconds", map[string]string{"backend": "watched"}); !ok || s.GetGauge().GetValue() != 1700000100 {
		t.Errorf("discovery_last_refresh_timestamp_seconds{backend=watched}: got %v, want 1700000100", s)
	}
	if s, ok := sample(fams, "jsonrpc_bridge_backend_connection_state", map[string]string{"backend": "main", "state": "READY"}); !ok || s.GetGauge().GetValue() != 1 {
		t.Errorf("backend_connection_state{state=READY}: got %v, want 1", s)
	}
	// A client's method names never become labels.
	for _, m := range fams["jsonrpc_bridge_calls_total"].GetMetric() {
		for _, l := range m.GetLabel() {
			if strings.Contains(l.GetValue(), "no.such") {
				t.Errorf("a client's method name became a label: %v", m)
			}
		}
	}
}

func TestAccessLog(t *testing.T) {
	t.Parallel()
	var buf syncBuffer
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	rec := new(recorder)
	e := newEnv(t, bridge.Options{AccessLog: log, Auth: newAuth(t)}, recording(rec))
	h := bearer("reader-token-0123456789")
	h.Set("X-Request-Id", "req-42")
	h.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	h.Set("Grpc-Metadata-X-Bridge-Identity", "admin") // a forged identity is dropped
	resp, _ := postAs(t, e.url, h, `[{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1},{"jsonrpc":"2.0","method":"test.v1.TestService.Fail","id":2}]`)
	if got := resp.Header.Get("X-Request-Id"); got != "req-42" {
		t.Errorf("got X-Request-Id %q, want the client's req-42", got)
	}
	resp, _ = postAs(t, e.url, bearer("admin-token-0123456789"), `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello"}`)
	generated := resp.Header.Get("X-Request-Id")
	if generated == "" {
		t.Errorf("got no X-Request-Id, want a generated one")
	}
	postAs(t, e.url, http.Header{"X-Request-Id": {"bad id with spaces"}}, `{}`)

	calls := rec.take()
	if len(calls) != 2 {
		t.Fatalf("got %d backend calls, want 2", len(calls))
	}
	for key, want := range map[string]string{
		"x-bridge-identity": "reader",
		"x-request-id":      "req-42",
		"traceparent":       "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	} {
		if got := calls[0].md.Get(key); len(got) != 1 || got[0] != want {
			t.Errorf("backend metadata %s = %v, want [%s]", key, got, want)
		}
	}
	if got := calls[1].md.Get("x-request-id"); len(got) != 1 || got[0] != generated {
		t.Errorf("backend metadata x-request-id = %v, want the generated %s", got, generated)
	}

	type line struct {
		Msg          string   `json:"msg"`
		Method       *string  `json:"method"`
		Code         *int     `json:"code"`
		DurationMS   *float64 `json:"duration_ms"`
		Identity     *string  `json:"identity"`
		RequestID    *string  `json:"request_id"`
		Reason       string   `json:"reason"`
		Notification bool     `json:"notification"`
	}
	var lines []line
	sc := bufio.NewScanner(strings.NewReader(buf.String()))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("log line %q is not JSON: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) != 4 {
		t.Fatalf("got %d log lines, want 4:\n%s", len(lines), buf.String())
	}
	calls3 := map[string]line{}
	for _, l := range lines[:3] {
		if l.Msg != "call" || l.Method == nil || l.Code == nil || l.DurationMS == nil || l.Identity == nil || l.RequestID == nil {
			t.Fatalf("got %+v, want a call line with every field", l)
		}
		calls3[*l.Method+"/"+*l.Identity] = l
	}
	if l := calls3["helloworld.Greeter.SayHello/reader"]; *l.Code != 0 || *l.RequestID != "req-42" {
		t.Errorf("got %+v, want code 0 and request id req-42", l)
	}
	if l := calls3["test.v1.TestService.Fail/reader"]; *l.Code != 7 || *l.RequestID != "req-42" {
		t.Errorf("got %+v, want code 7 (refused)", l)
	}
	if l := calls3["helloworld.Greeter.SayHello/admin"]; *l.RequestID != generated || !l.Notification {
		t.Errorf("got %+v, want the generated request id on a notification", l)
	}
	if l := lines[3]; l.Msg != "refused" || l.Reason != "unauthenticated" || l.RequestID == nil || *l.RequestID == "" || *l.RequestID == "bad id with spaces" {
		t.Errorf("got %+v, want a refused line with a generated request id", l)
	}
}

// TestFastPathFallbackMetric: a request the mapping's fast path leaves to
// protojson (a FieldMask, which has no fast form) is counted in
// jsonrpc_bridge_fast_path_fallbacks_total, by direction and reason.
func TestFastPathFallbackMetric(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Metrics: newMetrics(t)})
	before := fallbacks(t, scrape(t, e))
	r, _ := postAs(t, e.url, nil, `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Echo","params":{"wktFieldMask":"a.b"}}`)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d", r.StatusCode)
	}
	if after := fallbacks(t, scrape(t, e)); after <= before {
		t.Errorf("fast_path_fallbacks_total{direction=request}: %v before the call, %v after, want more", before, after)
	}
}

// fallbacks sums the request samples of fast_path_fallbacks_total.
func fallbacks(t *testing.T, fams map[string]*dto.MetricFamily) float64 {
	t.Helper()
	var n float64
	if f := fams["jsonrpc_bridge_fast_path_fallbacks_total"]; f != nil {
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "direction" && l.GetValue() == "request" {
					n += s.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
