package observe

import (
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc/connectivity"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// metricPrefix starts the name of every metric of the bridge.
const metricPrefix = "jsonrpc_bridge_"

// Method labels for calls that name no method of the table: the label
// never takes a client's text, so the number of series stays bounded.
const (
	labelInvalid = "(invalid)" // not a valid request object
	labelUnknown = "(unknown)" // a method the backend does not serve
)

// Metrics are the Prometheus metrics of one or more Servers, registered in
// a registry given by the caller. Its zero value is not usable, call
// NewMetrics; a nil *Metrics records nothing.
type Metrics struct {
	reg              *prometheus.Registry
	handler          http.Handler
	calls            *prometheus.CounterVec
	latency          *prometheus.HistogramVec
	batchSize        prometheus.Histogram
	callsInFlight    prometheus.Gauge
	requestsInFlight prometheus.Gauge
	refused          *prometheus.CounterVec
	authFailures     *prometheus.CounterVec
	discovered       *prometheus.GaugeVec
	lastRefresh      *prometheus.GaugeVec
	conns            *connCollector
	discovery        *discoveryCollector
	addrOnce         sync.Once
	addresses        *addressCollector // made by the first WatchAddresses

	invalid, unknown, discover *methodStats
}

// NewMetrics creates the bridge's metrics and registers them in reg. It
// fails if reg already holds metrics of the same names.
func NewMetrics(reg *prometheus.Registry) (*Metrics, error) {
	m := &Metrics{
		reg: reg,
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "calls_total",
			Help: "JSON-RPC calls answered (notifications included), by method and JSON-RPC code; code 0 is a result.",
		}, []string{"method", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricPrefix + "call_duration_seconds",
			Help:    "Time from the start of a call to its reply, by method.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method"}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    metricPrefix + "batch_size",
			Help:    "Members of each JSON-RPC batch that ran.",
			Buckets: []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000},
		}),
		callsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "calls_in_flight",
			Help: "JSON-RPC calls being answered now.",
		}),
		requestsInFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricPrefix + "requests_in_flight",
			Help: "JSON-RPC HTTP requests and WebSocket frames being answered now, which max_in_flight bounds.",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "requests_refused_total",
			Help: "HTTP requests refused before any call ran, by reason: unauthenticated (401), in_flight, rate_limit, body_reads or ws_connections (429), body_too_large (413), body_timeout (408), metadata_too_large (431), bad_header, unreadable_body or bad_encoding (400, 415), method_not_allowed (405), not_websocket (426), not_discovered or keys_not_loaded (503), host_not_allowed or origin_not_allowed (403).",
		}, []string{"reason"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricPrefix + "auth_failures_total",
			Help: "Requests whose credentials were refused, by reason: missing, invalid (a static token or certificate of no identity), malformed, too_large, or for a JWT expired, not_yet_valid, wrong_audience, wrong_issuer, unknown_key, bad_signature, algorithm_not_allowed (HTTP 401), keys_not_loaded (HTTP 503).",
		}, []string{"reason"}),
		discovered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricPrefix + "discovery_ready",
			Help: "1 when the backend's services have been discovered, 0 while they are being discovered.",
		}, []string{"backend"}),
		lastRefresh: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricPrefix + "discovery_last_refresh_timestamp_seconds",
			Help: "Unix time of the backend's last successful discovery.",
		}, []string{"backend"}),
		conns: &connCollector{desc: prometheus.NewDesc(metricPrefix+"backend_connection_state",
			"1 for the current state of the gRPC connection to the backend, 0 for the others.",
			[]string{"backend", "state"}, nil)},
	}
	m.discovery = &discoveryCollector{m: m}
	for _, c := range []prometheus.Collector{m.calls, m.latency, m.batchSize, m.callsInFlight,
		m.requestsInFlight, m.refused, m.authFailures, m.discovery, m.conns, fallbackCollector{fallbackDesc}} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	for _, reason := range []string{"unauthenticated", "in_flight", "rate_limit",
		"body_too_large", "metadata_too_large", "bad_header", "unreadable_body", "bad_encoding", "method_not_allowed",
		"not_websocket", "not_discovered", "body_timeout", "body_reads", "ws_connections",
		"host_not_allowed", "origin_not_allowed", "keys_not_loaded"} {
		m.refused.WithLabelValues(reason)
	}
	for _, reason := range AuthFailureReasons() {
		m.authFailures.WithLabelValues(reason)
	}
	m.invalid, m.unknown, m.discover = m.method(labelInvalid), m.method(labelUnknown), m.method("rpc.discover")
	m.handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})
	return m, nil
}

// Handler serves the registry's metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Discovering records that backend's services are being discovered.
func (m *Metrics) Discovering(backend string) {
	if m != nil {
		m.discovered.WithLabelValues(backend).Set(0)
	}
}

// Discovered records that backend's services were discovered at t.
func (m *Metrics) Discovered(backend string, t time.Time) {
	if m != nil {
		m.discovered.WithLabelValues(backend).Set(1)
		m.lastRefresh.WithLabelValues(backend).Set(float64(t.UnixNano()) / 1e9)
	}
}

// A DiscoveryState is what the metrics say of one backend's discovery.
type DiscoveryState struct {
	Backend string
	// Ready is true when the last discovery of the backend succeeded.
	Ready bool
	// LastRefresh is the time of the last successful discovery; zero if
	// there was none.
	LastRefresh time.Time
}

// WatchDiscovery makes every scrape report the states f returns, besides
// those set with Discovered and Discovering.
func (m *Metrics) WatchDiscovery(f func() []DiscoveryState) {
	if m != nil {
		m.discovery.mu.Lock()
		defer m.discovery.mu.Unlock()
		m.discovery.f = f
	}
}

// discoveryCollector collects the discovery gauges, first refreshing them
// from the function given to WatchDiscovery.
type discoveryCollector struct {
	m  *Metrics
	mu sync.Mutex
	f  func() []DiscoveryState
}

func (c *discoveryCollector) Describe(ch chan<- *prometheus.Desc) {
	c.m.discovered.Describe(ch)
	c.m.lastRefresh.Describe(ch)
}

func (c *discoveryCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f != nil {
		for _, st := range f() {
			if st.Ready {
				c.m.discovered.WithLabelValues(st.Backend).Set(1)
			} else {
				c.m.discovered.WithLabelValues(st.Backend).Set(0)
			}
			if !st.LastRefresh.IsZero() {
				c.m.lastRefresh.WithLabelValues(st.Backend).Set(float64(st.LastRefresh.UnixNano()) / 1e9)
			}
		}
	}
	c.m.discovered.Collect(ch)
	c.m.lastRefresh.Collect(ch)
}

// A StateReporter is a gRPC connection whose state can be read;
// *grpc.ClientConn is one.
type StateReporter interface {
	GetState() connectivity.State
}

// WatchBackend reports the state of conn, the connection to backend, at
// every scrape.
func (m *Metrics) WatchBackend(backend string, conn StateReporter) {
	if m != nil {
		m.conns.add(backend, conn)
	}
}

// WatchRateLimitStore reports, at every scrape, the round trips to the
// rate limit store that failed (errors, a running count) and whether the
// store answers (up): jsonrpc_bridge_rate_limit_store_errors_total and
// jsonrpc_bridge_rate_limit_store_up. It fails if called twice.
func (m *Metrics) WatchRateLimitStore(errors func() uint64, up func() bool) error {
	if m == nil {
		return nil
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: metricPrefix + "rate_limit_store_errors_total",
			Help: "Round trips to the rate limit store (rate_limit_store) that failed: unreachable, slower than rate_limit_store_timeout, or refused; the probes during an outage included.",
		}, func() float64 { return float64(errors()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: metricPrefix + "rate_limit_store_up",
			Help: "1 while the rate limit store answers, 0 during an outage, while rate_limit_store_fallback decides.",
		}, func() float64 {
			if up() {
				return 1
			}
			return 0
		}),
	} {
		if err := m.reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// RequestStarted counts a request (a POST / or a WebSocket frame) among
// those being answered; RequestDone counts it out.
func (m *Metrics) RequestStarted() {
	if m != nil {
		m.requestsInFlight.Inc()
	}
}

// RequestDone counts out a request RequestStarted counted.
func (m *Metrics) RequestDone() {
	if m != nil {
		m.requestsInFlight.Dec()
	}
}

// Batch records the size of a batch that ran.
func (m *Metrics) Batch(n int) {
	if m != nil {
		m.batchSize.Observe(float64(n))
	}
}

// Refusal counts a request refused before any of its calls ran, by
// reason (see Observer.Refused).
func (m *Metrics) Refusal(reason string) {
	if m != nil {
		m.refused.WithLabelValues(reason).Inc()
	}
}

// AuthFailureReasons are the values of the reason label of
// jsonrpc_bridge_auth_failures_total (see docs/observability.md).
func AuthFailureReasons() []string {
	return []string{"missing", "invalid", "malformed", "too_large", "expired", "not_yet_valid", "wrong_audience",
		"wrong_issuer", "unknown_key", "bad_signature", "algorithm_not_allowed", "keys_not_loaded"}
}

// AuthFailure counts a request whose credentials were refused, by the
// failure's reason (AuthFailureReasons).
func (m *Metrics) AuthFailure(reason string) {
	if m != nil {
		m.authFailures.WithLabelValues(reason).Inc()
	}
}

// WatchAuthReloads reports, at every scrape, the reloads of the
// identities file or of a key set file that failed (a running count):
// jsonrpc_bridge_auth_reload_errors_total. It fails if called twice.
func (m *Metrics) WatchAuthReloads(errors func() uint64) error {
	if m == nil {
		return nil
	}
	return m.reg.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: metricPrefix + "auth_reload_errors_total",
		Help: "Reloads of auth.file or of a key set file (auth.jwt.jwks_file) that failed to read or validate: the last good identities and keys stay.",
	}, func() float64 { return float64(errors()) }))
}

// codeSlots indexes the JSON-RPC codes a call can end with: 0 to 16 (a
// result, then the gRPC codes), then the five standard codes, then any
// other.
const codeSlots = 17 + 5 + 1

func codeSlot(c mapping.Code) int {
	switch {
	case c >= 0 && c <= 16:
		return int(c)
	case c == mapping.CodeParseError:
		return 17
	case c >= mapping.CodeInternalError && c <= mapping.CodeInvalidRequest: // -32603 .. -32600
		return 18 + int(mapping.CodeInvalidRequest-c)
	}
	return codeSlots - 1
}

// methodStats are the metrics of one method label, prepared when a table
// is built so that a call takes no map lookups or allocations.
type methodStats struct {
	name    string
	calls   *prometheus.CounterVec
	latency prometheus.Observer
	codes   [codeSlots]atomic.Pointer[counterRef] // made on first use
}

type counterRef struct{ c prometheus.Counter }

// method returns the stats of the method label name; nil for a nil m.
func (m *Metrics) method(name string) *methodStats {
	if m == nil {
		return nil
	}
	return &methodStats{name: name, calls: m.calls, latency: m.latency.WithLabelValues(name)}
}

func (ms *methodStats) record(code mapping.Code, d time.Duration) {
	slot := codeSlot(code)
	ref := ms.codes[slot].Load()
	if ref == nil {
		label := strconv.Itoa(int(code))
		if slot == codeSlots-1 {
			label = "other"
		}
		ref = &counterRef{ms.calls.WithLabelValues(ms.name, label)}
		ms.codes[slot].Store(ref)
	}
	ref.c.Inc()
	ms.latency.Observe(d.Seconds())
}

// connCollector reports the state of each watched backend connection.
type connCollector struct {
	desc  *prometheus.Desc
	mu    sync.Mutex
	conns []watchedConn
}

type watchedConn struct {
	backend string
	conn    StateReporter
}

func (c *connCollector) add(backend string, conn StateReporter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.conns = append(c.conns, watchedConn{backend, conn})
}

func (c *connCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *connCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	conns := append([]watchedConn(nil), c.conns...)
	c.mu.Unlock()
	states := []connectivity.State{connectivity.Idle, connectivity.Connecting, connectivity.Ready,
		connectivity.TransientFailure, connectivity.Shutdown}
	for _, w := range conns {
		now := w.conn.GetState()
		for _, st := range states {
			v := 0.0
			if st == now {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, w.backend, stateLabel(st))
		}
	}
}

// stateLabel is the canonical name of a connectivity state, as gRPC's
// documents spell it.
func stateLabel(s connectivity.State) string {
	switch s {
	case connectivity.Idle:
		return "IDLE"
	case connectivity.Connecting:
		return "CONNECTING"
	case connectivity.Ready:
		return "READY"
	case connectivity.TransientFailure:
		return "TRANSIENT_FAILURE"
	case connectivity.Shutdown:
		return "SHUTDOWN"
	}
	return "UNKNOWN"
}

// fallbackDesc describes the conversions the mapping's fast path left to
// protojson (mapping.Fallbacks), which are counted process-wide.
var fallbackDesc = prometheus.NewDesc(metricPrefix+"fast_path_fallbacks_total",
	"JSON <-> protobuf conversions the fast path left to protojson, by direction (request, result) and reason; see docs/performance.md.",
	[]string{"direction", "reason"}, nil)

// fallbackCollector reads mapping.Fallbacks at each scrape.
type fallbackCollector struct{ desc *prometheus.Desc }

func (c fallbackCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c fallbackCollector) Collect(ch chan<- prometheus.Metric) {
	for _, f := range mapping.Fallbacks() {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(f.Count), string(f.Direction), f.Reason)
	}
}
