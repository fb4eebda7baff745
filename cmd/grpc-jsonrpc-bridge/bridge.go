package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// serve runs the bridge described by s until ctx is done, then shuts it
// down gracefully within s.ShutdownTimeout (lifecycle.go). Discovery runs
// in the background and goes on (refresh_interval, SIGHUP, a backend
// reconnecting); once the first discovery of every backend has succeeded,
// onReady (if not nil) is called with the HTTP listener's address. serve
// returns nil after a clean shutdown, and an error if a service is offered
// by two backends. When descriptor files (protoset, proto) give the
// services, nothing is discovered: they are installed before serving.
func serve(ctx context.Context, s config.Settings, log *slog.Logger, logOut io.Writer, onReady func(net.Addr)) error {
	setGCPercent()
	p := &instance{s: s, log: log}
	defer p.close()
	if err := p.assemble(ctx, logOut); err != nil {
		return err
	}
	return p.run(ctx, onReady)
}

// instance is what serve runs: the bridge, its front server and listener,
// and what they were made of.
type instance struct {
	s       config.Settings
	log     *slog.Logger
	auth    *authentication
	files   *bridgereflect.Registry // the services, when descriptor files give them
	sources []bridgereflect.Source
	watcher *bridgereflect.Watcher
	metrics *bridge.Metrics
	lis     net.Listener
	srv     *bridge.Server
	front   frontServer
	closers []func() // run last first by close
}

// close runs the closers: the store, the backends' connections, tracing's
// exporter and the access log, in that order, once the HTTP server has
// stopped.
func (p *instance) close() {
	for i := len(p.closers) - 1; i >= 0; i-- {
		p.closers[i]()
	}
}

// assemble makes everything p serves, in the order that keeps what is
// wrong with the settings or their files from listening: a bad
// identities or key set file exits 2.
func (p *instance) assemble(ctx context.Context, logOut io.Writer) error {
	s, log := p.s, p.log
	access, closeAccess, err := newAccessLog(s, logOut)
	if err != nil {
		return usageError(err)
	}
	p.closers = append(p.closers, closeAccess)
	if p.auth, err = newAuth(s, log); err != nil {
		return usageError(err)
	}
	if s.Descriptors.Enabled() {
		if p.files, err = loadDescriptors(ctx, s); err != nil {
			return usageError(err)
		}
	}
	// The last spans are exported once the HTTP server has stopped.
	tr, err := newTracing(ctx, s.Tracing)
	if err != nil {
		return usageError(err)
	}
	p.closers = append(p.closers, func() { tr.shutdown(context.WithoutCancel(ctx), log) })
	dial := bridge.BackendDialOptions(bridgeOptions(s, parts{}))
	for _, b := range s.BackendList() {
		conn, err := backendConn(b, s.LB(b), s.DirectCalls && tr == nil, s.BackendKeepalive, log, append(tr.dialOptions(), dial...)...)
		if err != nil {
			return usageError(err)
		}
		p.closers = append(p.closers, func() { conn.Close() })
		p.sources = append(p.sources, bridgereflect.Source{Name: backendName(b), Conn: conn, Include: b.Include, Exclude: b.Exclude})
	}
	if p.lis, err = listen(s, log); err != nil {
		return err
	}
	// Logged before discovery starts, so that it always comes first.
	names := make([]string, len(p.sources))
	for i, src := range p.sources {
		names[i] = src.Name
	}
	log.Info("listening", "addr", p.lis.Addr().String(), "tls", s.TLS.Enabled(), "backends", names)
	p.watcher = bridgereflect.NewWatcher(p.sources, bridgereflect.WatchOptions{Interval: s.RefreshInterval, Retry: bridgereflect.RetryOptions{Logger: log}})
	if p.metrics, err = newMetrics(s, p.sources, p.watcher); err != nil {
		return failure(err)
	}
	if p.auth.auth != nil {
		if err := p.metrics.WatchAuthReloads(p.auth.files.Errors); err != nil {
			return failure(err)
		}
	}
	store, err := newRateLimitStore(s, p.auth.auth, p.metrics, log)
	if err != nil {
		return usageError(err)
	}
	if store != nil {
		p.closers = append(p.closers, func() { store.Close() })
	}
	var conn grpc.ClientConnInterface // every Catalog routes its methods; one backend is the fallback
	if len(p.sources) == 1 {
		conn = p.sources[0].Conn
	}
	p.srv = bridge.New(conn, bridgeOptions(s, parts{log: log, access: access, auth: p.auth, metrics: p.metrics, store: store, http: true,
		readiness: withAuthDetails(withStoreDetails(readiness(s, p.watcher, p.sources), store), p.auth), addr: dialable(p.lis.Addr())}))
	p.front = newFront(httpServer(tr.handler(p.srv), s, log), s)
	return nil
}

// backendName is the name of b in logs and /readyz.
func backendName(b config.Backend) string {
	if b.Name != "" {
		return b.Name
	}
	return b.Address
}

// backendConn is the connection the bridge calls b through, over every
// address its target resolves to, balanced by lb: plaintext or TLS, with
// the bridge's own client for unary calls when direct is set and b's
// address allows it, and the options opts (such as tracing's).
func backendConn(b config.Backend, lb config.LB, direct bool, ka config.Keepalive, log *slog.Logger, opts ...grpc.DialOption) (*backend.Conn, error) {
	if ka.Time > 0 {
		opts = append(opts, grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: ka.Time, Timeout: ka.Timeout, PermitWithoutStream: ka.PermitWithoutStream}))
	}
	creds := insecure.NewCredentials()
	if b.TLS != nil {
		c, err := backendCredentials(b, log)
		if err != nil {
			return nil, fmt.Errorf("backend %q: %w", backendName(b), err)
		}
		creds = c
	}
	conn, err := backend.Dial(b.Address, backend.Options{
		Name:            backendName(b),
		Balance:         lb.Balance,
		ResolveInterval: lb.ResolveInterval,
		HealthCheck:     lb.HealthCheck,
		HealthService:   lb.HealthService,
		Outlier:         outlier(lb.Outlier),
		Direct:          direct,
		DialOptions:     opts,
		DirectOptions: backend.DirectOptions{Creds: creds, Logger: log,
			KeepaliveTime: ka.Time, KeepaliveTimeout: ka.Timeout, KeepalivePermitWithoutStream: ka.PermitWithoutStream},
	})
	if err != nil {
		return nil, fmt.Errorf("backend %q: %w", backendName(b), err)
	}
	return conn, nil
}

// listen opens the listener of s, with TLS if configured.
func listen(s config.Settings, log *slog.Logger) (net.Listener, error) {
	var cfg *tls.Config
	if s.TLS.Enabled() {
		c, err := listenerTLS(s.TLS, log)
		if err != nil {
			return nil, usageError(err)
		}
		cfg = c
	}
	lis, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return nil, failure(err)
	}
	if cfg != nil {
		lis = tls.NewListener(lis, cfg)
	}
	return lis, nil
}
