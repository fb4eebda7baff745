package bridge

import (
	"context"
	"sync"
)

// This file is the lifecycle of a Server: Drain, then Shutdown. cmd's
// serve calls them (after shutdown_delay between the two); so does a
// library user's code.

// Drain makes /readyz answer 503 from now on, so that load balancers stop
// sending new requests; requests keep being served, their HTTP/1 replies
// with Connection: close (ServeHTTP), but streams answered
// live over POST / end with the error 14 (DRAINING), those open and those
// that open later, so that their clients open them again elsewhere. It
// is the first step of a graceful shutdown and cannot be undone.
func (s *Server) Drain() { s.guard.draining.Store(true); s.lives.Drain() }

// Draining reports whether Drain was called.
func (s *Server) Draining() bool { return s.guard.draining.Load() }

// A FrontServer is a server of a Server's handler: an *http.Server, or an
// *h1.Server in front of one.
type FrontServer interface {
	// Shutdown stops accepting connections and waits for the requests
	// in flight, or for ctx to end.
	Shutdown(ctx context.Context) error
	// Close closes every connection at once.
	Close() error
}

// Shutdown shuts s down gracefully, with fronts, the servers that serve
// it, in this order:
//
//  1. Drain (see there): readiness 503, Connection: close, live streams
//     ended with DRAINING.
//  2. Each front server shuts down: it stops accepting connections,
//     HTTP/2 ones get GOAWAY, and the requests in flight (live streams
//     among them) finish. The MCP sessions, whose open streams it would
//     wait for, are closed once it stops accepting (RegisterOnShutdown,
//     when it has that method; at once otherwise).
//  3. Meanwhile the WebSocket connections, which the front servers
//     neither close nor wait for (they are hijacked), shut down: new ones
//     are refused with HTTP 503, and each open one is closed with status
//     1001 (going away) once its calls and streams have ended; those
//     still running shortly before ctx's deadline (see
//     ws.Server.Shutdown) are closed with 1001 then, which cancels them.
//
// Shutdown waits for all of it or for ctx to end. When a front server
// still has requests running as ctx ends, every front server is closed
// and so, at once, is every WebSocket connection. The error is then a
// *ShutdownError saying what was still running. Shutdown is safe to call
// more than once.
func (s *Server) Shutdown(ctx context.Context, fronts ...FrontServer) error {
	s.Drain()
	hooked := false
	for _, f := range fronts {
		if h, ok := f.(interface{ RegisterOnShutdown(func()) }); ok {
			h.RegisterOnShutdown(s.CloseMCP)
			hooked = true
		}
	}
	if !hooked {
		s.CloseMCP()
	}
	frontErrs := make([]error, len(fronts))
	var wg sync.WaitGroup
	for i, f := range fronts {
		wg.Go(func() { frontErrs[i] = f.Shutdown(ctx) })
	}
	wsCtx, closeWS := context.WithCancel(ctx)
	defer closeWS()
	wsDone := make(chan error, 1)
	go func() { wsDone <- s.ws.Shutdown(wsCtx) }()
	wg.Wait()
	for _, err := range frontErrs {
		if err != nil {
			for _, f := range fronts {
				f.Close()
			}
			closeWS()
			<-wsDone
			return &ShutdownError{Running: "requests still running", Err: err}
		}
	}
	if err := <-wsDone; err != nil {
		return &ShutdownError{Running: "WebSocket connections still open", Err: err}
	}
	return nil
}

// A ShutdownError says what was still running when the context of
// Shutdown ended.
type ShutdownError struct {
	Running string // "requests still running", "WebSocket connections still open"
	Err     error  // the context's error
}

func (e *ShutdownError) Error() string { return e.Running + ": " + e.Err.Error() }
func (e *ShutdownError) Unwrap() error { return e.Err }
