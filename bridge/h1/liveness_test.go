package h1

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// boundaryCases are requests whose last bytes fall 1 to 3 bytes before
// the end of h1's read buffer, followed by those few bytes of something
// else: the wait for the next request's first 4 bytes then starts with
// the buffer's free space shorter than what it waits for. Each is one
// write of exactly n buffers' worth.
func boundaryCases() []struct{ name, raw string } {
	var out []struct{ name, raw string }
	for _, bufs := range []int{1, 2, 3} {
		for _, tail := range []string{"\r\n", "\n", "\r", "PO", "POS", "\r\nP", "\n\n\n"} {
			// One request, padded so that it and tail fill bufs buffers.
			// (X-Reply: length keeps echo's reply of it framed alike by
			// both servers: net/http chunks a reply of over 2 KiB
			// without a length, h1 one of over 4 KiB.)
			head := func(n int) string {
				return "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Reply: length\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n"
			}
			total := bufs*readBufferBytes - len(tail)
			fit := func(rest int) int { // the body length that fills rest with its head
				n := rest - len(head(rest))
				for len(head(n))+n != rest {
					n = rest - len(head(n))
				}
				return n
			}
			n := fit(total)
			raw := head(n) + `{"jsonrpc":"2.0","method":"m","id":1}` + strings.Repeat(" ", n-37)
			if len(raw) != total {
				panic(fmt.Sprintf("boundary case of %d bytes, want %d", len(raw), total))
			}
			out = append(out, struct{ name, raw string }{fmt.Sprintf("%d buffers, then %q", bufs, tail), raw + tail})
			// A short request first, so that the second ends at the boundary
			// with the buffer's start consumed.
			first := post("X-Reply: length\r\n", "a")
			n2 := fit(total - len(first))
			raw2 := first + head(n2) + strings.Repeat("b", n2)
			out = append(out, struct{ name, raw string }{fmt.Sprintf("two requests, %d buffers, then %q", bufs, tail), raw2 + tail})
		}
	}
	return out
}

// cpuTime is the CPU time this process has used.
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestWaitUsesNoCPU checks the liveness of a connection whose request
// ended 1 to 3 bytes before the end of h1's read buffer, its last bytes
// the start of something else: the server answers, then waits for the
// rest without using CPU, and closes the connection within IdleTimeout
// (or at once when the client leaves), as net/http does. The wait once
// read into the empty end of the buffer, which returns at once with no
// error: a loop on one core, forever, and a connection never closed.
func TestWaitUsesNoCPU(t *testing.T) {
	const idle = 1500 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Fprintf(w, "%d", n)
	})
	for _, lean := range []bool{false, true} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: idle}
		var srv interface{ Close() error } = hs
		if lean {
			s := New(hs)
			go s.Serve(lis)
			srv = s
		} else {
			go hs.Serve(lis)
		}
		name := map[bool]string{false: "net/http", true: "h1"}[lean]
		t.Run(name, func(t *testing.T) {
			// Every case at once, on its own connection: then the server
			// waits on all of them.
			cases := boundaryCases()
			readers := make([]*bufio.Reader, len(cases))
			for i, tc := range cases {
				c, err := net.Dial("tcp", lis.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				if _, err := c.Write([]byte(tc.raw)); err != nil {
					t.Fatal(err)
				}
				c.SetReadDeadline(time.Now().Add(idle + 10*time.Second))
				br := bufio.NewReader(c)
				for range strings.Count(tc.raw, "POST / HTTP/1.1\r\n") {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("%s: no reply: %v", tc.name, err)
					}
					io.ReadAll(resp.Body)
				}
				readers[i] = br
			}
			// The server now waits for the rest of a next request on each.
			// Sleep: the span over which the CPU used is measured.
			cpu0, wall0 := cpuTime(t), time.Now()
			time.Sleep(idle / 2)
			if used, wall := cpuTime(t)-cpu0, time.Since(wall0); used > wall/4 {
				t.Errorf("the server, waiting on %d connections, used %v of CPU in %v", len(cases), used, wall.Round(time.Millisecond))
			}
			// And closes each connection at IdleTimeout, not sooner (it waits
			// for the rest of the request as long as net/http does).
			for i, br := range readers {
				if _, err := br.ReadByte(); err != io.EOF {
					t.Errorf("%s: after the reply: %v, want the server to close the connection", cases[i].name, err)
				}
				if i == 0 {
					if d := time.Since(wall0); d < idle*8/10 {
						t.Errorf("closed after %v, want IdleTimeout (%v)", d.Round(time.Millisecond), idle)
					}
				}
			}
			if d := time.Since(wall0); d > idle+2*time.Second {
				t.Errorf("closed after %v, want within IdleTimeout (%v)", d.Round(time.Millisecond), idle)
			}
		})
		srv.Close()
	}
}

// TestWaitEndsWhenClientLeaves checks that the connection of a client
// that leaves while the server waits for its next request (its last
// bytes at the end of the read buffer) is closed at once, not left in
// CLOSE-WAIT.
func TestWaitEndsWhenClientLeaves(t *testing.T) {
	p := startPair(t, http.HandlerFunc(echo))
	for _, tc := range boundaryCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, addr := range []string{p.std, p.fast} {
				start := time.Now()
				out, closed := exchangeClosed(t, addr, []byte(tc.raw), 3*time.Second)
				if !closed {
					t.Errorf("%s: the server had not closed the connection %v after the client's end (%d bytes read)", addr, time.Since(start).Round(time.Millisecond), len(out))
				}
			}
		})
	}
}

// exchangeClosed writes raw, ends the writing side and reads until the
// server closes the connection or wait passes; it tells which.
func exchangeClosed(t testing.TB, addr string, raw []byte, wait time.Duration) ([]byte, bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(wait))
	go func() {
		c.Write(raw)
		c.(*net.TCPConn).CloseWrite()
	}()
	out, err := io.ReadAll(c)
	return out, err == nil
}

// TestLateWatchTakesNothing checks that the watch of a request whose
// handler ends just as the watch starts never reads from the next
// request on the connection: a late watch once read a byte of the next
// request's body, whose handler then waited for a byte the client had
// sent, and answered 408 after the body's timeout; with the next request
// pipelined, the byte overwrote what was buffered.
//
// The handlers run about as long as the watch waits: the real 500 ms on
// 48 connections; and a watch of 1 ms whose start is 2 ms late, as a
// timer's goroutine is on a loaded machine, which finds the race on
// nearly every call.
func TestLateWatchTakesNothing(t *testing.T) {
	for _, tc := range []struct {
		name   string
		after  time.Duration
		late   time.Duration
		conns  int
		rounds int
	}{
		{"watch after 1ms, 2ms late", time.Millisecond, 2 * time.Millisecond, 16, 30},
		{"watch after 500ms", watchAfter, 0, 48, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if d := r.Header.Get("X-Sleep"); d != "" {
					io.Copy(io.Discard, r.Body)
					us, _ := strconv.Atoi(d)
					time.Sleep(time.Duration(us) * time.Microsecond) // the handler's length is the case
					w.Write([]byte("slept"))
					return
				}
				ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
				defer cancel()
				n := 0
				buf := make([]byte, 32<<10)
				for {
					m, err := r.Body.Read(buf)
					n += m
					if err != nil {
						break
					}
					if ctx.Err() != nil {
						w.WriteHeader(http.StatusRequestTimeout)
						return
					}
				}
				fmt.Fprintf(w, "%d", n)
			})
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			s := New(&http.Server{Handler: h, ReadTimeout: 3 * time.Second})
			s.watchAfter = tc.after
			if tc.late > 0 {
				s.beforeWatch = func() { time.Sleep(tc.late) } // a late timer, the case itself
			}
			go s.Serve(lis)
			defer s.Close()
			const size = 300 << 10
			big := post("", strings.Repeat("x", size))
			var wg sync.WaitGroup
			var mu sync.Mutex
			var bad []string
			calls := 0
			for i := range tc.conns {
				wg.Go(func() {
					c, err := net.Dial("tcp", lis.Addr().String())
					if err != nil {
						t.Error(err)
						return
					}
					defer c.Close()
					br := bufio.NewReader(c)
					for j := range tc.rounds {
						// The handler sleeps about as long as the watch waits,
						// varied by a few microseconds around it.
						us := int(tc.after/time.Microsecond) - 60 + (i*7+j*13)%120
						if us < 0 {
							us = 0
						}
						pipelined := j%3 == 2
						req := post("X-Sleep: "+strconv.Itoa(us)+"\r\n", "")
						if pipelined {
							req += big // the next request waits in the buffer
						}
						c.SetDeadline(time.Now().Add(10 * time.Second))
						if _, err := c.Write([]byte(req)); err != nil {
							t.Error(err)
							return
						}
						want := []string{"slept"}
						resp, err := http.ReadResponse(br, nil)
						if err != nil {
							t.Error(err)
							return
						}
						b, _ := io.ReadAll(resp.Body)
						got := []string{string(b)}
						if !pipelined {
							if _, err := c.Write([]byte(big)); err != nil {
								t.Error(err)
								return
							}
						}
						want = append(want, strconv.Itoa(size))
						resp, err = http.ReadResponse(br, nil)
						if err != nil {
							t.Error(err)
							return
						}
						b, _ = io.ReadAll(resp.Body)
						got = append(got, resp.Status+" "+string(b))
						mu.Lock()
						calls += 2
						if got[0] != want[0] || got[1] != "200 OK "+want[1] {
							bad = append(bad, fmt.Sprintf("%q", got))
						}
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if len(bad) > 0 {
				t.Errorf("%d of %d calls were not answered whole, such as %s", len(bad), calls, bad[0])
			}
		})
	}
}

// TestDrainKeepsNewConnections checks that a connection that has not sent
// its first request is not closed at the drain's start
// (SetKeepAlivesEnabled(false)), as with net/http, which gives such a
// connection 5 s (Go issue 22682): its request, sent later, is answered
// with Connection: close. Load balancers and clients open connections
// ahead of need.
func TestDrainKeepsNewConnections(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Write([]byte("served"))
	})
	for _, tc := range []struct {
		name  string
		drain func(s frontServer)
	}{
		{"keep-alives off", func(s frontServer) { s.SetKeepAlivesEnabled(false) }},
	} {
		for _, lean := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lean=%v", tc.name, lean), func(t *testing.T) {
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				var opened atomic.Int32 // the connections net/http has accepted
				hs := &http.Server{Handler: h, ConnState: func(_ net.Conn, st http.ConnState) {
					if st == http.StateNew {
						opened.Add(1)
					}
				}}
				var s frontServer = hs
				if lean {
					s = New(hs)
				}
				go s.Serve(lis)
				defer s.Close()
				// A connection that has served a request, and one that has not.
				idle, err := net.Dial("tcp", lis.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer idle.Close()
				idle.Write([]byte(post("", "a")))
				idleBr := bufio.NewReader(idle)
				if resp, err := http.ReadResponse(idleBr, nil); err != nil {
					t.Fatal(err)
				} else {
					io.ReadAll(resp.Body)
				}
				fresh, err := net.Dial("tcp", lis.Addr().String())
				if err != nil {
					t.Fatal(err)
				}
				defer fresh.Close()
				await.Until(t, 10*time.Second, "both connections accepted", func() bool {
					if lean {
						return servedConns(s.(*Server)) == 2
					}
					return opened.Load() == 2
				})
				tc.drain(s)
				// Sleep: the request comes a while after the drain began,
				// and what is asserted is that nothing closed the connection
				// meanwhile: a "never" has no condition to await.
				time.Sleep(500 * time.Millisecond)
				fresh.SetDeadline(time.Now().Add(5 * time.Second))
				fresh.Write([]byte(post("", "late")))
				resp, err := http.ReadResponse(bufio.NewReader(fresh), nil)
				if err != nil {
					t.Fatalf("the connection that had not spoken got no reply: %v", err)
				}
				b, _ := io.ReadAll(resp.Body)
				if string(b) != "served" || !resp.Close {
					t.Errorf("reply %q close=%v, want served with Connection: close", b, resp.Close)
				}
				// The idle keep-alive connection was closed, as net/http closes it.
				idle.SetReadDeadline(time.Now().Add(2 * time.Second))
				if _, err := idleBr.ReadByte(); err != io.EOF {
					t.Errorf("the idle connection: %v, want it closed", err)
				}
			})
		}
	}
}

// frontServer is what serve runs: net/http's server or h1's.
type frontServer interface {
	Serve(net.Listener) error
	Shutdown(context.Context) error
	Close() error
	SetKeepAlivesEnabled(bool)
}

// TestDrainClosesSilentConnectionsLater checks that Shutdown closes a
// connection that never sent a request once it is 5 s old, as net/http
// does (Go issue 22682), not at once.
func TestDrainClosesSilentConnectionsLater(t *testing.T) {
	t.Parallel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(&http.Server{Handler: h})
	go s.Serve(lis)
	defer s.Close()
	c, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	await.Until(t, 10*time.Second, "the connection accepted", func() bool { return servedConns(s) == 1 })
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if d := time.Since(start); d < 4*time.Second || d > 8*time.Second {
		t.Errorf("Shutdown returned after %v, want about 5 s after the connection opened", d.Round(time.Millisecond))
	}
}

// TestInformationalHasNoLength checks that a 1xx reply carries no
// Content-Length or Transfer-Encoding (RFC 9110 8.6, 15.2), as net/http
// writes it, even when the handler has set them for its final reply.
func TestInformationalHasNoLength(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Link", "</style.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		w.Write([]byte("ok"))
	})
	p := startPair(t, h)
	for _, addr := range []string{p.std, p.fast} {
		out := string(exchange(t, addr, []byte(post("", "a"))))
		early, _, _ := strings.Cut(out, "\r\n\r\n")
		if !strings.HasPrefix(early, "HTTP/1.1 103 Early Hints\r\n") || !strings.Contains(early, "Link: </style.css>") {
			t.Errorf("%s: the 103 reply is %q", addr, early)
		}
		if strings.Contains(early, "Content-Length") || strings.Contains(early, "Transfer-Encoding") {
			t.Errorf("%s: the 103 reply carries a body's framing: %q", addr, early)
		}
		if !strings.HasSuffix(out, "\r\n\r\nok") {
			t.Errorf("%s: the final reply: %q", addr, out)
		}
	}
}
