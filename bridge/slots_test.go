package bridge_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// The attacks of issue 13, points 1 to 3, scaled down to small limits:
// each runs against a real bridge on loopback in front of a real backend,
// checks that a legitimate client is answered while it lasts, and checks
// the bound that holds.

// inFlight reads jsonrpc_bridge_requests_in_flight, the quantity
// max_in_flight bounds.
func inFlight(t *testing.T, e *env) float64 {
	t.Helper()
	s, ok := sample(scrape(t, e), "jsonrpc_bridge_requests_in_flight", nil)
	if !ok {
		t.Fatal("no jsonrpc_bridge_requests_in_flight")
	}
	return s.GetGauge().GetValue()
}

// rawAnswer is what one raw HTTP/1.1 client got: the status (0 when the
// connection ended without a response), its body and when it came.
type rawAnswer struct {
	i      int
	status int
	header http.Header
	close  bool // the server closes the connection after it
	body   string
	at     time.Time
}

// slowBody opens a connection from local (nil: any address) to u, sends
// the headers of a POST / announcing a body of 100 bytes and one byte of
// it, and then nothing; the answer, if any, goes to answers.
func slowBody(t *testing.T, u string, local net.IP, header string, i int, answers chan<- rawAnswer) net.Conn {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	if local != nil {
		d.LocalAddr = &net.TCPAddr{IP: local}
	}
	c, err := d.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatalf("dial from %v: %v", local, err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "POST / HTTP/1.1\r\nHost: "+pu.Host+"\r\n"+header+"Content-Length: 100\r\n\r\n{"); err != nil {
		t.Fatal(err)
	}
	go func() {
		a := rawAnswer{i: i}
		if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
			b, _ := io.ReadAll(resp.Body)
			a.status, a.header, a.close, a.body = resp.StatusCode, resp.Header, resp.Close, string(b)
		}
		a.at = time.Now()
		answers <- a
	}()
	return c
}

// TestSlowBodiesTakeNoSlot is point 1: connections that send their
// headers and one byte of their body, then nothing, took the max_in_flight
// slots, so every other caller got 429 until read_timeout. Now a request
// takes its slot once its body is read: the legitimate caller is answered
// throughout, no slot is held, at most max_body_reads_per_client bodies of
// the attacker are read at once (the others get 429 at once), and
// body_timeout ends those with 408.
func TestSlowBodiesTakeNoSlot(t *testing.T) {
	// Not parallel: its checks race body_timeout (2 s), which a busy
	// machine lost once beside parallel tests.
	const maxInFlight, reads, attackers = 4, 8, 40
	const bodyTimeout = 2 * time.Second
	for _, tt := range []struct {
		name string
		auth bool // the attacker has a token of an identity allowed nothing
	}{{"by identity", true}, {"by address", false}} {
		t.Run(tt.name, func(t *testing.T) {
			opts := bridge.Options{MaxInFlight: maxInFlight, BodyTimeout: bodyTimeout, MaxBodyReadsPerClient: reads, Metrics: newMetrics(t)}
			var attackHeader string
			var from net.IP       // the attacker's address
			var legit http.Header // the legitimate caller's headers
			if tt.auth {
				opts.Auth = newAuth(t)
				attackHeader = "Authorization: Bearer nobody-token-0123456789\r\n"
				legit = bearer("admin-token-0123456789")
			} else {
				from = net.ParseIP("127.0.0.2") // any 127/8 address is loopback on Linux
			}
			e := newEnv(t, opts)
			answers := make(chan rawAnswer, attackers)
			start := time.Now() // before any body deadline starts
			for i := range attackers {
				slowBody(t, e.url, from, attackHeader, i, answers)
			}
			// Past max_body_reads_per_client, the attacker is refused at once.
			got := map[int]rawAnswer{}
			settled := time.After(bodyTimeout / 2)
		collect:
			for len(got) < attackers-reads {
				select {
				case a := <-answers:
					got[a.i] = a
				case <-settled:
					break collect
				}
			}
			// While the other bodies are being read, legitimate calls are
			// answered and no slot is held.
			for i := range 2 * maxInFlight {
				resp, body := postAs(t, e.url, legit, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`)
				if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"result"`) {
					t.Fatalf("legitimate call %d during the attack: got HTTP %d %s, want a result", i, resp.StatusCode, body)
				}
			}
			if n := inFlight(t, e); n != 0 {
				t.Errorf("during the attack %v requests hold max_in_flight slots, want 0", n)
			}
			if len(got) != attackers-reads {
				t.Fatalf("%d of the %d attackers were refused at once, want %d (all but max_body_reads_per_client)", len(got), attackers, attackers-reads)
			}
			for _, a := range got {
				if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, "max_body_reads_per_client") ||
					a.header.Get("Retry-After") != "1" || !a.close {
					t.Fatalf("attacker %d: got HTTP %d %v %s, want 429 naming max_body_reads_per_client, closing the connection", a.i, a.status, a.header, a.body)
				}
			}
			select {
			case a := <-answers:
				t.Fatalf("attacker %d was answered HTTP %d after %s, want its body still being read", a.i, a.status, a.at.Sub(start))
			default:
			}
			// body_timeout ends the bodies still being read.
			for range reads {
				select {
				case a := <-answers:
					took := a.at.Sub(start)
					if a.status != http.StatusRequestTimeout || !strings.Contains(a.body, `"code":-32600`) || !strings.Contains(a.body, "body_timeout") {
						t.Errorf("attacker %d: got HTTP %d %s, want 408 with -32600 naming body_timeout", a.i, a.status, a.body)
					}
					if took < bodyTimeout-50*time.Millisecond {
						t.Errorf("attacker %d: answered after %s, want about body_timeout (%s)", a.i, took, bodyTimeout)
					}
				case <-time.After(bodyTimeout + 10*time.Second):
					t.Fatalf("the bodies being read were not ended %s after body_timeout", time.Since(start)-bodyTimeout)
				}
			}
		})
	}
}

// smallBuffers makes the socket buffers of accepted connections small, so
// that a reply a client does not read fills them quickly.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(32 << 10)
	}
	return c, err
}

// TestUnreadRepliesFreeSlots is point 2: clients that ask for a large
// reply and never read it held their max_in_flight slots until they
// disconnected. Now the reply has a write deadline, reply_timeout: its
// expiry frees the slot while the clients are still connected, and the
// legitimate caller is answered again.
func TestUnreadRepliesFreeSlots(t *testing.T) {
	t.Parallel()
	const maxInFlight = 4
	const replyTimeout = time.Second
	e := newEnv(t, bridge.Options{MaxInFlight: maxInFlight, ReplyTimeout: replyTimeout,
		Limits: bridge.Limits{MaxBodyBytes: 4 << 20}, MaxResponseBytes: 8 << 20, Metrics: newMetrics(t)})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: e.bridge}
	go hs.Serve(smallBuffers{lis})
	t.Cleanup(func() { hs.Close() })
	addr := lis.Addr().String()

	big := `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fString":"` + strings.Repeat("x", 2<<20) + `"},"id":1}`
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	start := time.Now() // before any reply deadline starts
	for range maxInFlight {
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// The request is sent whole; the reply is never read.
		if _, err := fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s", addr, len(big), big); err != nil {
			t.Fatal(err)
		}
	}
	await.Until(t, 10*time.Second, "the attackers to hold every slot", func() bool { return inFlight(t, e) == maxInFlight })
	full := time.Now()
	legit := func() int {
		resp, _ := postAs(t, "http://"+addr, nil, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`)
		return resp.StatusCode
	}
	if status, held := legit(), time.Since(start) < replyTimeout; held && status != http.StatusTooManyRequests {
		t.Fatalf("with every slot held: got HTTP %d, want 429", status)
	}
	// The attackers stay connected, never reading; the deadline frees
	// their slots all the same.
	await.Until(t, 10*time.Second, "the slots to be freed", func() bool { return inFlight(t, e) == 0 })
	t.Logf("the unread replies freed their slots %s after they were full (reply_timeout %s)", time.Since(full), replyTimeout)
	for i := range 2 * maxInFlight {
		if status := legit(); status != http.StatusOK {
			t.Fatalf("legitimate call %d after reply_timeout: got HTTP %d, want 200", i, status)
		}
	}
}

// sleepBatch is a batch of n Sleep calls, with ids from first on.
func sleepBatch(n, first int) string {
	calls := make([]string, n)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","method":"test.v1.TestService.Sleep","params":{},"id":%d}`, first+i)
	}
	return "[" + strings.Join(calls, ",") + "]"
}

// TestWebSocketCallsCount is point 3: WebSocket frames were not counted
// by max_in_flight, connections were unlimited, and max_calls_per_connection
// counted a batch once: one connection sending 30 frames of batches of
// 100 slow calls had 3,004 backend calls running at once. Now every frame
// takes a max_in_flight slot as a POST / does, every batch member counts
// in max_calls_per_connection, and a client's connections are capped.
func TestWebSocketCallsCount(t *testing.T) {
	t.Run("the attack", func(t *testing.T) {
		checkLeaks(t)
		const perConn, conns, frames, batch = 40, 2, 30, 20
		g := newGate()
		e := newEnv(t, bridge.Options{MaxInFlight: 8, Streaming: bridge.Streaming{MaxCallsPerConnection: perConn, WSPingInterval: -1}, MaxWSConnectionsPerClient: conns,
			Auth: newAuth(t), Metrics: newMetrics(t)}, withServer(grpc.ChainUnaryInterceptor(g.intercept)))
		attacker := &websocket.DialOptions{HTTPHeader: bearer("admin-token-0123456789")}
		var ws []*wsClient
		for range conns {
			ws = append(ws, dialWSWith(t, e, attacker))
		}
		// A client's connections are capped.
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		if c, resp, err := websocket.Dial(ctx, e.url+"/ws", attacker); err == nil {
			c.CloseNow()
			t.Errorf("connection %d of the attacker was opened, want 429 past max_ws_connections_per_client (%d)", conns+1, conns)
		} else if resp == nil || resp.StatusCode != http.StatusTooManyRequests {
			t.Errorf("connection %d of the attacker: got %v, want HTTP 429", conns+1, err)
		}
		var wg sync.WaitGroup
		for _, w := range ws {
			wg.Go(func() {
				for f := range frames {
					ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
					err := w.c.Write(ctx, websocket.MessageText, []byte(sleepBatch(batch, f*batch)))
					cancel()
					if err != nil {
						return // the test is over
					}
				}
			})
		}
		g.wait(t, conns*perConn)
		// Legitimate calls are answered while the attack holds its calls.
		for i := range 4 {
			resp, body := postAs(t, e.url, bearer("greeter-token-0123456789"), `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("legitimate call %d during the attack: got HTTP %d %s, want 200", i, resp.StatusCode, body)
			}
		}
		// Calls past the bound would arrive late: the bound holds a while.
		await.Holds(t, 200*time.Millisecond, "at most max_calls_per_connection x connections calls at the backend", func() bool { return g.peak.Load() <= int64(conns*perConn) })
		if peak, bound := g.peak.Load(), int64(conns*perConn); peak > bound {
			t.Errorf("the backend ran %d calls of the attacker at once, want at most %d (max_calls_per_connection x connections)", peak, bound)
		}
		if n := inFlight(t, e); n > float64(conns*perConn/batch) {
			t.Errorf("%v frames hold max_in_flight slots, want at most %d", n, conns*perConn/batch)
		}
		close(g.open)
		// Every frame is answered in the end, every call with its result.
		for _, w := range ws {
			for range frames {
				b, err := w.recvRaw()
				if err != nil {
					t.Fatalf("read: %v", err)
				}
				replies, ok := decode(t, b).([]any)
				if !ok || len(replies) != batch {
					t.Fatalf("got %.200s, want %d replies", b, batch)
				}
				for _, r := range replies {
					if errCode(t, r.(map[string]any)) != 0 {
						t.Fatalf("got %v, want a result", r)
					}
				}
			}
			w.c.Close(websocket.StatusNormalClosure, "")
		}
		wg.Wait()
	})
	t.Run("frames take max_in_flight slots", func(t *testing.T) {
		checkLeaks(t)
		g := newGate()
		e := newEnv(t, bridge.Options{MaxInFlight: 2, Metrics: newMetrics(t), Streaming: bridge.Streaming{WSPingInterval: -1}}, withServer(grpc.ChainUnaryInterceptor(g.intercept)))
		w := dialWS(t, e)
		w.send(sleepBatch(3, 1))
		w.send(`{"jsonrpc":"2.0","method":"test.v1.TestService.Sleep","params":{},"id":4}`)
		g.wait(t, 4)
		if n := inFlight(t, e); n != 2 {
			t.Errorf("two frames being answered hold %v slots, want 2", n)
		}
		// max_in_flight is full: other frames, and POST /, are refused.
		resp, body := postAs(t, e.url, http.Header{"X-Request-Timeout": {"1s"}}, sleepCall)
		check429(t, resp, body)
		w.send(`{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":5}`)
		r := w.recv()
		if fmt.Sprint(r["id"]) != "5" || errCode(t, r) != 8 || !strings.Contains(fmt.Sprint(r["error"]), "max_in_flight") {
			t.Errorf("a frame past max_in_flight: got %v, want error 8 with id 5 naming max_in_flight", r)
		}
		w.send(`[{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":6},{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello"},{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":7}]`)
		b, err := w.recvRaw()
		if err != nil {
			t.Fatal(err)
		}
		if got := string(b); !strings.HasPrefix(got, `[{"jsonrpc":"2.0","id":6,"error":{"code":8,`) || !strings.Contains(got, `},{"jsonrpc":"2.0","id":7,"error":{"code":8,`) {
			t.Errorf("a batch past max_in_flight: got %s, want error 8 for ids 6 and 7", got)
		}
		fams := scrape(t, e)
		if s, ok := sample(fams, "jsonrpc_bridge_requests_refused_total", map[string]string{"reason": "in_flight"}); !ok || s.GetCounter().GetValue() != 3 {
			t.Errorf("requests_refused_total{reason=in_flight}: got %v, want 3", s)
		}
		close(g.open)
		for range 2 { // the replies of the first two frames
			if _, err := w.recvRaw(); err != nil {
				t.Fatal(err)
			}
		}
		await.Until(t, 10*time.Second, "the slots to be freed", func() bool { return inFlight(t, e) == 0 })
	})
}
