package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// serve runs the bridge described by s until ctx is done, then shuts it
// down gracefully within s.ShutdownTimeout. Discovery runs in the
// background and goes on (refresh_interval, SIGHUP, a backend
// reconnecting); once the first discovery of every backend has succeeded,
// onReady (if not nil) is called with the HTTP listener's address. serve
// returns nil after a clean shutdown, and an error if a service is offered
// by two backends. When descriptor files (protoset, proto) give the
// services, nothing is discovered: they are installed before serving.
func serve(ctx context.Context, s config.Settings, log *slog.Logger, logOut io.Writer, onReady func(net.Addr)) error {
	setGCPercent()
	access, closeAccess, err := newAccessLog(s, logOut)
	if err != nil {
		return usageError(err)
	}
	defer closeAccess()          // after the HTTP server has stopped: deferred first
	auth, err := newAuth(s, log) // before listening: a bad identities or key set file exits 2
	if err != nil {
		return usageError(err)
	}
	var files *bridgereflect.Registry // the services, when descriptor files give them
	if s.Descriptors.Enabled() {
		reg, err := loadDescriptors(ctx, s)
		if err != nil {
			return usageError(err)
		}
		files = reg
	}
	// Deferred before the connections close, so run after them: the last
	// spans are exported once the HTTP server has stopped.
	tr, err := newTracing(ctx, s.Tracing)
	if err != nil {
		return usageError(err)
	}
	defer tr.shutdown(context.WithoutCancel(ctx), log)
	backends := s.BackendList()
	sources := make([]bridgereflect.Source, 0, len(backends))
	for _, b := range backends {
		opts := append(tr.dialOptions(), bridge.BackendDialOptions(streamingOptions(bridge.Options{}, s))...)
		conn, err := backendConn(b, s.LB(b), s.DirectCalls && tr == nil, s.BackendKeepalive, log, opts...)
		if err != nil {
			return usageError(err)
		}
		defer conn.Close()
		sources = append(sources, bridgereflect.Source{Name: backendName(b), Conn: conn, Include: b.Include, Exclude: b.Exclude})
	}
	lis, err := listen(s, log)
	if err != nil {
		return err
	}
	// Logged before discovery starts, so that it always comes first.
	names := make([]string, len(sources))
	for i, src := range sources {
		names[i] = src.Name
	}
	log.Info("listening", "addr", lis.Addr().String(), "tls", s.TLS.Enabled(), "backends", names)
	watcher := bridgereflect.NewWatcher(sources, bridgereflect.WatchOptions{
		Interval: s.RefreshInterval,
		Retry:    bridgereflect.RetryOptions{Logger: log},
	})
	var conn grpc.ClientConnInterface // every Catalog routes its methods; one backend is the fallback
	if len(sources) == 1 {
		conn = sources[0].Conn
	}
	metrics, err := newMetrics(s, sources, watcher)
	if err != nil {
		return failure(err)
	}
	if auth.auth != nil {
		if err := metrics.WatchAuthReloads(auth.files.Errors); err != nil {
			return failure(err)
		}
	}
	store, err := newRateLimitStore(s, auth.auth, metrics, log)
	if err != nil {
		return usageError(err)
	}
	if store != nil {
		defer store.Close()
	}
	srv := bridge.New(conn, guardOptions(streamingOptions(bridge.Options{
		Version:          version(),
		MaxBodyBytes:     s.MaxBodyBytes,
		MaxBatchSize:     s.MaxBatchSize,
		BatchParallelism: s.BatchParallelism,
		CallTimeout:      s.CallTimeout,
		MaxCallTimeout:   s.MaxCallTimeout,
		Metadata:         bridge.Metadata{RequestHeaders: s.Metadata.RequestHeaders, ResponseHeaders: s.Metadata.ResponseHeaders},
		MaxMetadataBytes: s.MaxMetadataBytes,
		ReadinessDetails: withAuthDetails(withStoreDetails(readiness(s, watcher, sources), store), auth),
		EmitUnpopulated:  s.EmitUnpopulated,
		Document:         documentInfo(s, dialable(lis.Addr())),
		Logger:           log,
		DisableMCP:       !s.MCP,
		MCPStateless:     s.MCPStateless,
	}, s), s, auth, metrics, access, store))
	httpSrv := httpServer(tr.handler(srv), s, log)
	httpSrv.RegisterOnShutdown(srv.CloseMCP) // Shutdown would wait for the MCP sessions' open streams
	front := newFront(httpSrv, s)

	// Every goroutine is waited for before the connections close; cancel
	// (run first) stops discovery and the SIGHUP loop, and Serve stops by
	// Shutdown or on its own.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if files != nil { // nothing to discover: ready before serving
		srv.Update(files)
		descriptorsLoaded(metrics, sources, time.Now())
		log.Info("serving the services of the descriptor files", "methods", len(files.Methods()))
		if onReady != nil {
			onReady(lis.Addr())
		}
	}
	wg.Go(func() { auth.run(ctx) }) // the providers' keys, and reloads of the files as they change
	discovered := make(chan error, 1)
	wg.Go(func() {
		if files != nil {
			return
		}
		var once sync.Once
		discovered <- watcher.Run(ctx, func(c *bridgereflect.Catalog) {
			srv.Update(c)
			if onReady != nil {
				once.Do(func() { onReady(lis.Addr()) })
			}
		})
	})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				auth.reload()
				if files != nil {
					log.Info("SIGHUP: rereading the descriptor files")
					if reloadDescriptors(ctx, s, srv, log) {
						descriptorsLoaded(metrics, sources, time.Now())
					}
					continue
				}
				log.Info("SIGHUP: rediscovering the backends' services")
				watcher.Refresh()
			}
		}
	})
	wg.Go(func() { trimWhenIdle(ctx, srv.Served, idleTrim, freeMemory) })
	served := make(chan error, 1)
	wg.Go(func() { served <- front.Serve(lis) })

	var runErr error
	select {
	case err := <-served:
		return failure(fmt.Errorf("serving HTTP: %w", err))
	case err := <-discovered:
		if err != nil { // nil: ctx is done
			runErr = failure(err)
			log.Error("cannot serve these backends together", "error", err)
		}
	case <-ctx.Done():
	}
	log.Info("shutting down", "delay", s.ShutdownDelay.String(), "timeout", s.ShutdownTimeout.String())
	cancel()
	drain(context.WithoutCancel(ctx), s, srv, log)
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), s.ShutdownTimeout)
	defer stop()
	// WebSocket connections are hijacked: http.Server.Shutdown neither
	// closes nor waits for them. They close (1001) as their calls end,
	// while the HTTP requests in flight finish.
	wsDone := make(chan error, 1)
	wg.Go(func() { wsDone <- srv.Shutdown(shutdownCtx) })
	if err := front.Shutdown(shutdownCtx); err != nil {
		front.Close()
		stop() // closes the WebSocket connections at once
		<-wsDone
		return failure(fmt.Errorf("shutdown: requests still running after %s: %w", s.ShutdownTimeout, err))
	}
	if err := <-wsDone; err != nil {
		return failure(fmt.Errorf("shutdown: WebSocket connections still open after %s: %w", s.ShutdownTimeout, err))
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return failure(fmt.Errorf("serving HTTP: %w", err))
	}
	if runErr != nil {
		return runErr
	}
	log.Info("stopped")
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
		Outlier:         lb.Outlier.Backend(),
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
