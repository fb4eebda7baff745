package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// readHeaderTimeout bounds how long a client may take to send its headers.
const readHeaderTimeout = 10 * time.Second

// serve runs the bridge described by s until ctx is done, then shuts it
// down gracefully within s.ShutdownTimeout. Discovery runs in the
// background; once it has succeeded, onReady (if not nil) is called with the
// HTTP listener's address. serve returns nil after a clean shutdown.
func serve(ctx context.Context, s config.Settings, log *slog.Logger, onReady func(net.Addr)) error {
	conn, err := grpc.NewClient(s.Backend, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return usageError(fmt.Errorf("backend %q: %w", s.Backend, err))
	}
	defer conn.Close()
	lis, err := net.Listen("tcp", s.Listen)
	if err != nil {
		return failure(err)
	}

	srv := bridge.New(conn, bridge.Options{
		MaxBodyBytes:     s.MaxBodyBytes,
		MaxBatchSize:     s.MaxBatchSize,
		BatchParallelism: s.BatchParallelism,
		CallTimeout:      s.CallTimeout,
		EmitUnpopulated:  s.EmitUnpopulated,
		Logger:           log,
	})
	httpSrv := &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: readHeaderTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}

	// Both goroutines are waited for before conn closes; cancel (run
	// first) stops discovery, and Serve stops by Shutdown or on its own.
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() {
		if discover(ctx, conn, srv, log) && onReady != nil {
			onReady(lis.Addr())
		}
	})
	served := make(chan error, 1)
	wg.Go(func() { served <- httpSrv.Serve(lis) })
	log.Info("listening", "addr", lis.Addr().String(), "backend", s.Backend)

	select {
	case err := <-served:
		return failure(fmt.Errorf("serving HTTP: %w", err))
	case <-ctx.Done():
	}
	log.Info("shutting down", "timeout", s.ShutdownTimeout)
	cancel()
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), s.ShutdownTimeout)
	defer stop()
	if err := httpSrv.Shutdown(shutdownCtx); err != nil {
		httpSrv.Close()
		return failure(fmt.Errorf("shutdown: requests still running after %s: %w", s.ShutdownTimeout, err))
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return failure(fmt.Errorf("serving HTTP: %w", err))
	}
	log.Info("stopped")
	return nil
}

// discover finds the backend's methods, retrying until it succeeds or ctx
// is done, and installs them in srv. It reports whether it succeeded.
func discover(ctx context.Context, conn grpc.ClientConnInterface, srv *bridge.Server, log *slog.Logger) bool {
	reg, err := bridgereflect.DiscoverWithRetry(ctx, conn, bridgereflect.RetryOptions{Logger: log})
	if err != nil {
		log.Debug("discovery stopped", "error", err)
		return false
	}
	srv.Update(reg)
	log.Info("discovered the backend's methods", "services", len(reg.Services()), "methods", len(reg.Methods()))
	return true
}
