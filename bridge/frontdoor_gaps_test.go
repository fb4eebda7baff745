package bridge_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/h1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// Attacks of issue 13 that its first tests left out, each against a real
// bridge on loopback: replies a WebSocket client never reads (point 4's
// per-connection bytes, for the replies of calls), the identity's rate
// limit and max_ws_connections over WebSocket (point 3), and replies that
// are never read when gzip-compressed or of GET /openrpc.json (point 2).

// TestWSUnreadRepliesBounded: one WebSocket connection sends small frames
// calling for replies of 3 MB and never reads. Each reply used to wait in
// memory for the socket until the write timed out (ws_ping_interval), so
// 40 frames of 90 bytes held 120 MB. Now the replies waiting for the
// socket count in ws_buffer_bytes: once the replies already waiting would
// go past it, a reply is dropped and its call answered SLOW_CLIENT, so
// the heap comes back near its start while the attacker stays connected,
// and other clients keep being answered.
func TestWSUnreadRepliesBounded(t *testing.T) {
	const frames, size = 40, 3 << 20
	// Pings (and with them write timeouts) far off: the connection stays
	// open, holding what it holds, for the whole test.
	e, _ := newBigEnv(t, bridge.Options{Streaming: bridge.Streaming{WSPingInterval: time.Minute}}, true)
	stop := legitClients(t, e)
	h := watchHeap(t)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	attacker, _, err := websocket.Dial(ctx, e.url+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.CloseNow()
	attacker.SetReadLimit(8 << 20)
	for i := range frames {
		frame := fmt.Sprintf(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fInt32":%d},"id":%d}`, size, i+1)
		if err := attacker.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	// The replies are built as their calls end; those that do not fit
	// beside the waiting ones are let go. Without the bound all 40 stay.
	var live int64
	var sampled time.Time
	await.Until(t, 30*time.Second, "the heap under 24 MiB above its start", func() bool {
		if time.Since(sampled) < 500*time.Millisecond {
			return false // each sample collects garbage: twice a second is enough
		}
		sampled, live = time.Now(), h.live()
		return live < 24<<20
	})
	peak, _ := h.end()
	t.Logf("%d frames calling for %d MiB each, never read: heap +%.1f MiB after GC (peak +%.1f MiB)", frames, size>>20, mb(live), mb(peak))
	if live >= 24<<20 {
		t.Errorf("the heap holds %.1f MiB more for a client that reads nothing, want under 24 MiB (ws_buffer_bytes 4 MiB and one reply)", mb(live))
	}
	// A well-behaved WebSocket client on another connection is answered.
	w := dialWS(t, e)
	if r := w.result(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fInt32":5},"id":1}`); fmt.Sprint(r) != "map[fString:xxxxx]" {
		t.Errorf("well-behaved client: got %v", r)
	}
	stop()

	// The attacker, reading at last, gets every reply: the ones that fit
	// with their results, the others SLOW_CLIENT naming ws_buffer_bytes.
	results, dropped := 0, 0
	for range frames {
		_, b, err := attacker.Read(ctx)
		if err != nil {
			t.Fatalf("read: %v", err)
		}
		r, _ := decode(t, b).(map[string]any)
		if _, ok := r["result"]; ok {
			results++
			continue
		}
		eo, _ := r["error"].(map[string]any)
		d, _ := eo["data"].(map[string]any)
		details, _ := d["details"].([]any)
		var meta map[string]any
		if len(details) == 1 {
			meta, _ = details[0].(map[string]any)["metadata"].(map[string]any)
		}
		if errCode(t, r) != 8 || errReason(eo) != "SLOW_CLIENT" || meta["limit"] != "ws_buffer_bytes" || meta["value"] != "4194304" || r["id"] == nil {
			t.Fatalf("got %.300v, want a result or error 8 SLOW_CLIENT naming ws_buffer_bytes, with its id", r)
		}
		dropped++
	}
	t.Logf("%d results, %d dropped", results, dropped)
	if results == 0 || dropped == 0 {
		t.Errorf("%d results and %d dropped, want some of each", results, dropped)
	}
	// The connection is still usable.
	if err := attacker.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fInt32":2},"id":99}`)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := attacker.Read(ctx); err != nil || !strings.Contains(string(b), `"result":{"fString":"xx"}`) {
		t.Errorf("after reading: got %s, %v, want the result", b, err)
	}
}

// TestWSRateLimit: the calls of WebSocket frames, every batch member
// counting one, take from the identity's rate limit exactly as POST /
// does, sharing its tokens: past them a frame gets error 8 naming
// rate_limit and nothing runs, over WebSocket and HTTP alike; another
// identity is still answered.
func TestWSRateLimit(t *testing.T) {
	checkLeaks(t)
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Auth: newAuth(t), RateLimit: 0.001, RateBurst: 3, Streaming: bridge.Streaming{WSPingInterval: -1}}, recording(rec))
	admin := bearer(callers[0].token)
	w := dialWSWith(t, e, &websocket.DialOptions{HTTPHeader: admin})
	hello := func(id int) string {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"ws"},"id":%d}`, id)
	}
	w.send("[" + hello(1) + "," + hello(2) + "]")
	if b, err := w.recvRaw(); err != nil || strings.Count(string(b), `"result"`) != 2 {
		t.Fatalf("a batch of 2 within the burst: got %s, %v, want two results", b, err)
	}
	w.result(hello(3))
	// The burst of 3 is used up: the next frame runs nothing.
	w.send(hello(4))
	r := w.recv()
	if errCode(t, r) != 8 || !strings.Contains(fmt.Sprint(r["error"]), "rate_limit") {
		t.Errorf("a frame past the rate limit: got %v, want error 8 naming rate_limit", r)
	}
	// The same identity over HTTP shares the limit.
	resp, body := postAs(t, e.url, admin, hello(5))
	check429(t, resp, body)
	// Another identity has its own.
	if resp, body := postAs(t, e.url, bearer(callers[1].token), hello(6)); resp.StatusCode != http.StatusOK {
		t.Errorf("another identity: got HTTP %d %s, want 200", resp.StatusCode, body)
	}
	if n := len(rec.take()); n != 4 {
		t.Errorf("the backend ran %d calls, want 4 (3 within the burst, 1 of another identity)", n)
	}
}

// TestMaxWSConnections: past max_ws_connections, whoever the client, an
// upgrade gets 429 and no connection; closing one makes room; POST / is
// answered throughout.
func TestMaxWSConnections(t *testing.T) {
	checkLeaks(t)
	const limit = 3
	e := newEnv(t, bridge.Options{MaxWSConnections: limit, Auth: newAuth(t), Metrics: newMetrics(t), Streaming: bridge.Streaming{WSPingInterval: -1}})
	var open []*wsClient
	for i := range limit { // three identities: the limit is not per client
		open = append(open, dialWSWith(t, e, &websocket.DialOptions{HTTPHeader: bearer(callers[i].token)}))
	}
	dial := func() (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		return websocket.Dial(ctx, e.url+"/ws", &websocket.DialOptions{HTTPHeader: bearer(callers[3].token)})
	}
	c, resp, err := dial()
	if err == nil {
		c.CloseNow()
		t.Fatalf("connection %d was opened, want 429 past max_ws_connections (%d)", limit+1, limit)
	}
	if resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("connection %d: got %v %v, want HTTP 429 with Retry-After: 1", limit+1, resp, err)
	}
	if n := refusedCount(t, e, "ws_connections"); n != 1 {
		t.Errorf("requests_refused_total{reason=ws_connections} = %v, want 1", n)
	}
	if resp, body := postAs(t, e.url, bearer(callers[3].token), `{"jsonrpc":"2.0","method":"test.v1.TestService.Peek","params":{"key":"k"},"id":1}`); resp.StatusCode != http.StatusOK {
		t.Errorf("POST / while WebSocket connections are full: got HTTP %d %s", resp.StatusCode, body)
	}
	open[0].c.Close(websocket.StatusNormalClosure, "")
	await.NoError(t, waitTimeout, "room after a connection closed", func() error {
		c, _, err := dial()
		if err == nil {
			c.CloseNow()
		}
		return err
	})
}

// incompressible is n bytes of random base64: gzip saves a quarter.
func incompressible(n int) string {
	b := make([]byte, n*3/4)
	rand.Read(b)
	return base64.StdEncoding.EncodeToString(b)
}

// unreadConn sends req on a new connection to addr with a 4 KiB receive
// buffer and reads nothing.
func unreadConn(t *testing.T, addr, req string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) { syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestUnreadGzipRepliesFreeSlots is point 2 for clients that ask for
// gzip, and for both HTTP/1.1 servers the command runs (net/http, and h1
// in front of it, which serves plain POST / itself): the reply, compressed
// or not, is written under reply_timeout, so clients that never read it
// free their slots when it expires.
func TestUnreadGzipRepliesFreeSlots(t *testing.T) {
	t.Parallel()
	const maxInFlight = 2
	const replyTimeout = time.Second
	big := `{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fString":"` + incompressible(2<<20) + `"},"id":1}`
	for _, front := range []string{"net/http", "h1"} {
		for _, enc := range []string{"identity", "gzip"} {
			t.Run(front+"/"+enc, func(t *testing.T) {
				e := newEnv(t, bridge.Options{MaxInFlight: maxInFlight, ReplyTimeout: replyTimeout, Metrics: newMetrics(t)})
				lis, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				hs := &http.Server{Handler: e.bridge}
				if front == "h1" {
					f := h1.New(hs)
					go f.Serve(smallBuffers{lis})
					t.Cleanup(func() { f.Close() })
				} else {
					go hs.Serve(smallBuffers{lis})
					t.Cleanup(func() { hs.Close() })
				}
				addr := lis.Addr().String()
				for range maxInFlight {
					unreadConn(t, addr, fmt.Sprintf("POST / HTTP/1.1\r\nHost: %s\r\nAccept-Encoding: %s\r\nContent-Length: %d\r\n\r\n%s", addr, enc, len(big), big))
				}
				await.Until(t, 10*time.Second, "the attackers to hold every slot", func() bool { return inFlight(t, e) == maxInFlight })
				// Still connected, never reading: the deadline frees the slots.
				await.Until(t, 10*time.Second, "the slots to be freed", func() bool { return inFlight(t, e) == 0 })
				for i := range 4 {
					resp, body := postAs(t, "http://"+addr, http.Header{"Accept-Encoding": {enc}}, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`)
					if resp.StatusCode != http.StatusOK {
						t.Fatalf("legitimate call %d after reply_timeout: got HTTP %d %s, want 200", i, resp.StatusCode, body)
					}
				}
			})
		}
	}
}

// TestUnreadDocumentHasDeadline: GET /openrpc.json takes no slot, but a
// client that never reads a large document held its connection and the
// handler for good (write_timeout is off by default). Now the document is
// written under reply_timeout: when it expires the connection is closed,
// and the client, reading at last, gets less than the whole document.
func TestUnreadDocumentHasDeadline(t *testing.T) {
	t.Parallel()
	const replyTimeout = time.Second
	e := newEnv(t, bridge.Options{ReplyTimeout: replyTimeout})
	_, doc := e.do(t, http.MethodGet, "/openrpc.json", "", "")
	if len(doc) < 64<<10 {
		t.Skipf("the document has %d bytes: too few to fill the socket buffers", len(doc))
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan struct{})
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(served)
		e.bridge.ServeHTTP(w, r)
	})}
	go hs.Serve(tinyBuffers{lis})
	t.Cleanup(func() { hs.Close() })
	addr := lis.Addr().String()
	c := unreadConn(t, addr, "GET /openrpc.json HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	// The client reads nothing until the bridge has given the reply up.
	await.Receive(t, replyTimeout+10*time.Second, "the bridge to give up the document's write at reply_timeout", served)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no response: %v", err)
	}
	got, err := io.ReadAll(resp.Body)
	if err == nil && len(got) == len(doc) {
		t.Fatalf("the whole document (%d bytes) was written to a client that did not read it for longer than reply_timeout", len(got))
	}
	t.Logf("the client got %d of the document's %d bytes, then %v", len(got), len(doc), err)
	// The bridge serves it whole to a client that reads.
	if code, b := e.do(t, http.MethodGet, "/openrpc.json", "", ""); code != http.StatusOK || len(b) != len(doc) {
		t.Errorf("a reading client: got HTTP %d and %d bytes, want 200 and %d", code, len(b), len(doc))
	}
}

// tinyBuffers makes the send buffers of accepted connections as small as
// the kernel allows.
type tinyBuffers struct{ net.Listener }

func (l tinyBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

// TestMCPSlowBodies is point 1 at /mcp: bodies being read there count
// among the client's, as those of POST / do, so a client that sends many
// bodies slowly has at most max_body_reads_per_client of them read (the
// others get 429 at once), body_timeout ends those, and other clients are
// answered meanwhile.
func TestMCPSlowBodies(t *testing.T) {
	// Not parallel: its checks race body_timeout (2 s), as
	// TestSlowBodiesTakeNoSlot's.
	const reads, attackers = 2, 6
	const bodyTimeout = 2 * time.Second
	e := newEnv(t, bridge.Options{MaxBodyReadsPerClient: reads, BodyTimeout: bodyTimeout, Metrics: newMetrics(t)})
	addr := strings.TrimPrefix(e.url, "http://")
	answers := make(chan rawAnswer, attackers)
	start := time.Now()
	for i := range attackers {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := io.WriteString(c, "POST /mcp HTTP/1.1\r\nHost: "+addr+"\r\nContent-Type: application/json\r\n"+
			"Accept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{"); err != nil {
			t.Fatal(err)
		}
		go func() {
			a := rawAnswer{i: i}
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				b, _ := io.ReadAll(resp.Body)
				a.status, a.body = resp.StatusCode, string(b)
			}
			a.at = time.Now()
			answers <- a
		}()
	}
	refused := 0
	settled := time.After(bodyTimeout / 2)
collect:
	for refused < attackers-reads {
		select {
		case a := <-answers:
			if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, "max_body_reads_per_client") {
				t.Fatalf("attacker %d: got HTTP %d %s, want 429 naming max_body_reads_per_client", a.i, a.status, a.body)
			}
			refused++
		case <-settled:
			break collect
		}
	}
	if refused != attackers-reads {
		t.Fatalf("%d of %d slow MCP bodies were refused at once, want %d (all but max_body_reads_per_client)", refused, attackers, attackers-reads)
	}
	// Another client is answered, at /mcp and at POST /.
	if code, body := e.post(t, `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`); code != http.StatusOK {
		t.Errorf("POST / during the attack: got HTTP %d %s", code, body)
	}
	req, _ := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "protocolVersion") {
		t.Errorf("MCP initialize during the attack: got HTTP %d %s", resp.StatusCode, b)
	}
	// body_timeout ends the bodies being read.
	for range reads {
		select {
		case a := <-answers:
			if took := a.at.Sub(start); took < bodyTimeout-50*time.Millisecond {
				t.Errorf("attacker %d: answered HTTP %d after %s, before body_timeout (%s)", a.i, a.status, took, bodyTimeout)
			}
		case <-time.After(bodyTimeout + 10*time.Second):
			t.Fatal("the MCP bodies being read were not ended after body_timeout")
		}
	}
}
