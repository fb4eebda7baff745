package h1

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestShutdownLosesNoRequest runs clients that each open a connection,
// send one request and read its reply, again and again, as a proxy does
// to a replica whose replies say Connection: close, while the server
// shuts down. A client either cannot connect (the server stopped
// listening: a proxy sends the request elsewhere, safely) or gets its
// reply: no connection that took a request is closed or reset without
// answering it, which a proxy could not retry (the call may have run).
// Once, a request that came on a connection accepted just before
// Shutdown was read and dropped (as net/http drops it), and connections
// still in the listener's queue when it closed were reset: 1 to 19 of
// each round's requests.
//
// The 24 clients open about 5,000 connections a second, far more than a
// proxy does. Where the kernel refuses a listening socket the filter
// that drops new SYNs while the queue empties (this project's CI machine
// does), a handshake under way as the listener stops is still reset:
// about 1 round in 20 then loses one request, and a round may lose 2.
func TestShutdownLosesNoRequest(t *testing.T) {
	allowed := int64(0)
	if !canDropSYNs() {
		allowed = 2
		t.Logf("this kernel refuses socket filters on listeners: up to %d lost requests a round are allowed", allowed)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Connection", "close")
		w.Write([]byte("ok"))
	})
	for round := range 5 {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := lis.Addr().String()
		s := New(&http.Server{Handler: h})
		go s.Serve(lis)
		var answered, refused, lost atomic.Int64
		var mu sync.Mutex
		var why []string
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var ended atomic.Int64
		const clients = 24
		for range clients {
			wg.Go(func() {
				defer ended.Add(1)
				for {
					select {
					case <-stop:
						return
					default:
					}
					c, err := net.DialTimeout("tcp", addr, 5*time.Second)
					if err != nil {
						refused.Add(1)
						if errors.Is(err, syscall.ECONNREFUSED) {
							return
						}
						continue
					}
					c.SetDeadline(time.Now().Add(10 * time.Second))
					_, err = c.Write([]byte(post("", "a")))
					var resp *http.Response
					if err == nil {
						resp, err = http.ReadResponse(bufio.NewReader(c), nil)
					}
					if err == nil {
						var b []byte
						b, err = io.ReadAll(resp.Body)
						if err == nil && string(b) != "ok" {
							err = fmt.Errorf("reply %q", b)
						}
					}
					c.Close()
					if err != nil {
						lost.Add(1)
						mu.Lock()
						why = append(why, err.Error())
						mu.Unlock()
						continue
					}
					answered.Add(1)
				}
			})
		}
		await.Until(t, 10*time.Second, "the clients' first 100 replies", func() bool { return answered.Load() >= 100 })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := s.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		cancel()
		// Each client ends at its first refused connection: the server
		// has stopped listening.
		await.Until(t, 10*time.Second, "every client refused", func() bool { return ended.Load() == clients })
		close(stop)
		wg.Wait()
		s.Close()
		if n := lost.Load(); n > 0 {
			t.Logf("round %d: %d lost (%d answered, %d refused): %s", round, n, answered.Load(), refused.Load(), why[0])
		}
		if n := lost.Load(); n > allowed {
			t.Errorf("round %d: %d requests sent on an accepted connection got no reply (%d answered, %d refused), such as: %s", round, n, answered.Load(), refused.Load(), why[0])
		}
	}
}

// TestShutdownServesLateRequest checks that a request that comes during
// Shutdown on a connection accepted before it is answered, with
// Connection: close, where net/http reads it and closes the connection
// without a reply: its client, a proxy, could not have known to send it
// elsewhere, and cannot retry it (the call may have run).
func TestShutdownServesLateRequest(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("served"))
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(&http.Server{Handler: h})
	go s.Serve(lis)
	defer s.Close()
	fresh, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	await.Until(t, 10*time.Second, "the connection accepted", func() bool { return servedConns(s) == 1 })
	shut := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		shut <- s.Shutdown(ctx)
	}()
	// Shutdown is waiting for the connection: it has stopped listening
	// (Serve's accept loop has returned).
	s.mu.Lock()
	accepting := s.accepting
	s.mu.Unlock()
	await.Receive(t, 10*time.Second, "Serve's accept loop ended", accepting)
	fresh.SetDeadline(time.Now().Add(5 * time.Second))
	fresh.Write([]byte(post("", "late")))
	resp, err := http.ReadResponse(bufio.NewReader(fresh), nil)
	if err != nil {
		t.Fatalf("the request sent during Shutdown got no reply: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if string(b) != "served" || !resp.Close {
		t.Errorf("reply %q close=%v, want served with Connection: close", b, resp.Close)
	}
	if err := <-shut; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if _, err := net.Dial("tcp", lis.Addr().String()); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("a new connection after Shutdown: %v, want refused", err)
	}
}
