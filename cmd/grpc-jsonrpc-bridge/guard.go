package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/explorer"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/h1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit"
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

// guardOptions fills the authentication, limit and observability options
// of o from s.
func guardOptions(o bridge.Options, s config.Settings, auth *authentication, m *bridge.Metrics, access *slog.Logger, store *redislimit.Limiter) bridge.Options {
	if auth != nil {
		o = auth.options(o, s)
	}
	o.IdentityMetadataKey = s.Auth.IdentityMetadataKey
	o.MaxInFlight = s.MaxInFlight
	o.MaxResponseBytes = s.MaxResponseBytes
	o.RateLimit = float64(s.RateLimit)
	o.RateBurst = s.RateBurst
	if store != nil {
		o.RateLimiter = store
	}
	o.BodyTimeout = s.BodyTimeout
	o.ReplyTimeout = s.ReplyTimeout
	o.MaxBodyReadsPerClient = s.MaxBodyReadsPerClient
	o.MaxBodyReadsPerConnection = s.MaxBodyReadsPerConnection
	o.MaxWSConnections = s.MaxWSConnections
	o.MaxWSConnectionsPerClient = s.MaxWSConnectionsPerClient
	o.Metrics = m
	if s.Explorer {
		o.Explorer = explorer.Handler()
	}
	o.AccessLog = access
	return o
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
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
	SetKeepAlivesEnabled(bool)
}

// newFront is hs, behind bridge/h1 when s.LeanHTTP1 is on.
func newFront(hs *http.Server, s config.Settings) frontServer {
	if s.LeanHTTP1 {
		return h1.New(hs)
	}
	return hs
}

// drain starts a graceful shutdown: /readyz answers 503 at once, and the
// bridge keeps serving for s.ShutdownDelay (or until ctx is done) before
// the caller stops accepting connections. Idle keep-alive connections
// stay open meanwhile: a proxy's next request on one is answered, with
// Connection: close (bridge.Server.ServeHTTP), never lost to a connection
// closed under it. A proxy whose idle upstream connections time out
// within the delay (deploy/nginx/bridge.conf: keepalive_timeout) has none
// left when it ends.
func drain(ctx context.Context, s config.Settings, srv *bridge.Server, log *slog.Logger) {
	srv.Drain()
	if s.ShutdownDelay <= 0 {
		return
	}
	log.Info("draining: /readyz answers 503; still serving", "delay", s.ShutdownDelay.String())
	t := time.NewTimer(s.ShutdownDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// descriptorsLoaded tells m that the descriptor files were loaded at t:
// every backend's services are known, as after a successful discovery.
func descriptorsLoaded(m *bridge.Metrics, sources []bridgereflect.Source, t time.Time) {
	for _, src := range sources {
		m.Discovered(src.Name, t)
	}
}
