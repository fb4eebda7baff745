package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// run serves p until ctx is done, discovery fails or the front server
// stops, then shuts p down: drain (/readyz 503 for shutdown_delay), then
// bridge.Server.Shutdown with the front server, within shutdown_timeout.
// Every goroutine is waited for before the connections close; cancel (run
// first) stops discovery and the SIGHUP loop, and Serve stops by Shutdown
// or on its own.
func (p *instance) run(ctx context.Context, onReady func(net.Addr)) error {
	s, log := p.s, p.log
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if p.files != nil { // nothing to discover: ready before serving
		p.srv.Update(p.files)
		descriptorsLoaded(p.metrics, p.sources, time.Now())
		log.Info("serving the services of the descriptor files", "methods", len(p.files.Methods()))
		if onReady != nil {
			onReady(p.lis.Addr())
		}
	}
	wg.Go(func() { p.auth.run(ctx) }) // the providers' keys, and reloads of the files as they change
	discovered := make(chan error, 1)
	wg.Go(func() {
		if p.files != nil {
			return
		}
		var once sync.Once
		discovered <- p.watcher.Run(ctx, func(c *bridgereflect.Catalog) {
			p.srv.Update(c)
			if onReady != nil {
				once.Do(func() { onReady(p.lis.Addr()) })
			}
		})
	})
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	wg.Go(func() { p.onSIGHUP(ctx, hup) })
	wg.Go(func() { trimWhenIdle(ctx, p.srv.Served, idleTrim, freeMemory) })
	served := make(chan error, 1)
	wg.Go(func() { served <- p.front.Serve(p.lis) })

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
	p.drain(context.WithoutCancel(ctx))
	shutdownCtx, stop := context.WithTimeout(context.WithoutCancel(ctx), s.ShutdownTimeout)
	defer stop()
	if err := p.srv.Shutdown(shutdownCtx, p.front); err != nil {
		var se *bridge.ShutdownError
		if errors.As(err, &se) {
			return failure(fmt.Errorf("shutdown: %s after %s: %w", se.Running, s.ShutdownTimeout, se.Err))
		}
		return failure(fmt.Errorf("shutdown: %w", err))
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

// onSIGHUP rereads auth.file and the key set files at each SIGHUP on hup,
// and rediscovers the backends' services (or rereads the descriptor
// files), until ctx is done.
func (p *instance) onSIGHUP(ctx context.Context, hup <-chan os.Signal) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			p.auth.reload()
			if p.files != nil {
				p.log.Info("SIGHUP: rereading the descriptor files")
				if reloadDescriptors(ctx, p.s, p.srv, p.log) {
					descriptorsLoaded(p.metrics, p.sources, time.Now())
				}
				continue
			}
			p.log.Info("SIGHUP: rediscovering the backends' services")
			p.watcher.Refresh()
		}
	}
}

// drain starts a graceful shutdown: /readyz answers 503 at once
// (bridge.Server.Drain), and the bridge keeps serving for
// s.ShutdownDelay (or until ctx is done) before Shutdown stops accepting
// connections. Idle keep-alive connections stay open meanwhile: a proxy's
// next request on one is answered, with Connection: close
// (bridge.Server.ServeHTTP), never lost to a connection closed under it.
// A proxy whose idle upstream connections time out within the delay
// (deploy/nginx/bridge.conf: keepalive_timeout) has none left when it
// ends.
func (p *instance) drain(ctx context.Context) {
	p.srv.Drain()
	if p.s.ShutdownDelay <= 0 {
		return
	}
	p.log.Info("draining: /readyz answers 503; still serving", "delay", p.s.ShutdownDelay.String())
	t := time.NewTimer(p.s.ShutdownDelay)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
