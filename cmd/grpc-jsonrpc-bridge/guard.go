package main

import (
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/h1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// newMetrics creates the metrics of the bridge in a registry of their own,
// with the Go runtime and process collectors, the backends' connection
// states and the watcher's discovery states (or, when descriptor files
// give the services, what descriptorsLoaded reports); nil when s turns
// them off.
func newMetrics(s config.Settings, sources []bridgereflect.Source, watcher *bridgereflect.Watcher) (*bridge.Metrics, error) {
	if !s.Metrics {
		return nil, nil
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, err
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, err
	}
	m, err := bridge.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	for _, src := range sources {
		if c, ok := src.Conn.(bridge.StateReporter); ok {
			m.WatchBackend(src.Name, c)
		}
		if c, ok := src.Conn.(*backend.Conn); ok {
			m.WatchAddresses(src.Name, func() []bridge.AddressState {
				st := c.Addresses().Addresses
				out := make([]bridge.AddressState, len(st))
				for i, a := range st {
					out[i] = bridge.AddressState{Address: a.Address, State: a.State, Calls: a.Calls, Ejections: a.Ejections}
				}
				return out
			})
		}
	}
	if s.Descriptors.Enabled() {
		return m, nil // nothing is discovered: serve reports the files loaded
	}
	m.WatchDiscovery(func() []bridge.DiscoveryState {
		st := watcher.Status()
		out := make([]bridge.DiscoveryState, len(st.Backends))
		for i, b := range st.Backends {
			out[i] = bridge.DiscoveryState{Backend: b.Name, Ready: b.State == bridgereflect.StateReady, LastRefresh: b.LastRefresh}
		}
		return out
	})
	return m, nil
}

// httpServer is the HTTP server of h with the timeouts of s, and its
// limit of streams per HTTP/2 connection. It speaks HTTP/1.1 and HTTP/2:
// over TLS by ALPN, and on a plain listener HTTP/2 with prior knowledge
// (h2c, as curl --http2-prior-knowledge and gRPC-style clients send it).
func httpServer(h http.Handler, s config.Settings, log *slog.Logger) *http.Server {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetHTTP2(true)
	protocols.SetUnencryptedHTTP2(true)
	return &http.Server{
		Protocols:         protocols,
		Handler:           h,
		ReadHeaderTimeout: s.ReadHeaderTimeout,
		ReadTimeout:       s.ReadTimeout,
		WriteTimeout:      s.WriteTimeout,
		IdleTimeout:       s.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: s.HTTP2MaxConcurrentStreams},
	}
}

// frontServer is the HTTP server serve runs: net/http's, or bridge/h1 in
// front of it.
type frontServer interface {
	bridge.FrontServer
	Serve(net.Listener) error
	SetKeepAlivesEnabled(bool)
}

// newFront is hs, behind bridge/h1 when s.LeanHTTP1 is on.
func newFront(hs *http.Server, s config.Settings) frontServer {
	if s.LeanHTTP1 {
		return h1.New(hs)
	}
	return hs
}

// descriptorsLoaded tells m that the descriptor files were loaded at t:
// every backend's services are known, as after a successful discovery.
func descriptorsLoaded(m *bridge.Metrics, sources []bridgereflect.Source, t time.Time) {
	for _, src := range sources {
		m.Discovered(src.Name, t)
	}
}
