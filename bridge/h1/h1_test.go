package h1

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// echo answers every request with what the handler saw of it, in several
// ways chosen by the X-Reply header, so that a difference between how h1
// and net/http parse a request, frame a reply or keep a connection shows
// in the bytes the client reads.
func echo(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %d.%d host=%q len=%d close=%v err=%v\n", r.Method, r.RequestURI, r.Proto, r.ProtoMajor, r.ProtoMinor, r.Host, r.ContentLength, r.Close, err)
	keys := make([]string, 0, len(r.Header))
	for k := range r.Header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%q\n", k, r.Header[k])
	}
	fmt.Fprintf(&b, "body=%q\n", body)
	out := []byte(b.String())
	switch r.Header.Get("X-Reply") {
	case "length":
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		w.Write(out)
	case "sniff": // no Content-Type, no length: net/http sniffs and counts
		w.Write(out)
	case "large": // no length, more than is held: chunked
		w.Header().Set("Content-Type", "text/plain")
		for range 20 {
			w.Write(out)
			w.Write(bytes.Repeat([]byte("x"), 1000))
		}
	case "flush":
		w.Header().Set("Content-Type", "text/plain")
		w.Write(out)
		http.NewResponseController(w).Flush()
		w.Write(out)
	case "nocontent":
		w.WriteHeader(http.StatusNoContent)
	case "close":
		w.Header().Set("Connection", "close")
		w.Header().Set("Content-Type", "text/plain")
		w.Write(out)
	case "badheader":
		w.Header().Set("Content-Type", "text/plain")
		w.Header()["X-Split"] = []string{"a\r\nSet-Cookie: evil=1"}
		w.Header()["Bad Key"] = []string{"v"}
		w.Write(out)
	case "status":
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTeapot)
		w.Write(out)
	case "huge": // longer than one gathered write
		w.Header().Set("Content-Type", "text/plain")
		big := bytes.Repeat(out, (maxGather/len(out))+2)
		w.Header().Set("Content-Length", strconv.Itoa(len(big)))
		w.Write(big)
	default:
		w.Header().Set("Content-Type", "text/plain")
		w.Write(out)
	}
}

// pair is a net/http server and an h1 server of the same handler.
type pair struct {
	std, fast string
	h1        *Server
}

func newServer(h http.Handler) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, IdleTimeout: 5 * time.Second, ErrorLog: nil}
}

func startPair(t testing.TB, h http.Handler) *pair {
	t.Helper()
	return startPairWith(t, h, func(*Server) {})
}

// startPairWith is startPair with h1's server set up by with before it
// serves.
func startPairWith(t testing.TB, h http.Handler, with func(*Server)) *pair {
	t.Helper()
	std, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fast, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := newServer(h)
	go hs.Serve(std)
	s := New(newServer(h))
	with(s)
	go s.Serve(fast)
	t.Cleanup(func() {
		hs.Close()
		s.Close()
	})
	return &pair{std: std.Addr().String(), fast: fast.Addr().String(), h1: s}
}

// exchange writes raw to addr, ends the writing side and reads what comes
// back until the server closes the connection.
func exchange(t testing.TB, addr string, raw []byte) []byte {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	go func() {
		c.Write(raw)
		c.(*net.TCPConn).CloseWrite()
	}()
	out, _ := io.ReadAll(c)
	return out
}

// normal is the responses in raw, each as status, sorted headers without
// Date, and body, or the bytes left where they stop parsing.
func normal(raw []byte) string {
	var b strings.Builder
	br := bufio.NewReader(bytes.NewReader(raw))
	for {
		if _, err := br.Peek(1); err != nil {
			return b.String()
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			rest, _ := io.ReadAll(br)
			fmt.Fprintf(&b, "unparsed: %q\n", rest)
			return b.String()
		}
		resp.Header.Del("Date")
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = nil
		d, _ := httputil.DumpResponse(resp, false)
		lines := strings.Split(strings.TrimSpace(string(d)), "\r\n")
		slices.Sort(lines[1:])
		fmt.Fprintf(&b, "%s\nchunked=%v close=%v\n%s\nerr=%v\n\n", strings.Join(lines, "\n"), resp.TransferEncoding != nil, resp.Close, body, err)
	}
}

func post(headers, body string) string {
	return "POST / HTTP/1.1\r\nHost: example.com\r\n" + headers + "Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// differential is the corpus both servers must answer alike: the plain
// requests h1 serves, and every shape it hands to net/http, hostile ones
// included.
var differential = []struct{ name, raw string }{
	{"plain", post("", `{"jsonrpc":"2.0"}`)},
	{"no body", "POST / HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"keep-alive pipelined", post("", "a") + post("X-Reply: length\r\n", "bb") + post("", "ccc")},
	{"connection close", post("Connection: close\r\n", "a") + post("", "never")},
	{"connection keep-alive", post("Connection: Keep-Alive\r\n", "a") + post("", "b")},
	{"reply with length", post("X-Reply: length\r\n", "a")},
	{"reply sniffed", post("X-Reply: sniff\r\n", "<html>")},
	{"reply chunked", post("X-Reply: large\r\n", "a") + post("", "after")},
	{"reply flushed", post("X-Reply: flush\r\n", "a") + post("", "after")},
	{"reply 204", post("X-Reply: nocontent\r\n", "a") + post("", "after")},
	{"reply closes", post("X-Reply: close\r\n", "a") + post("", "never")},
	{"reply bad header", post("X-Reply: badheader\r\n", "a")},
	{"reply 418", post("X-Reply: status\r\n", "a")},
	{"reply huge", post("X-Reply: huge\r\n", "a") + post("", "after")},
	{"headers", post("Authorization: Bearer x\r\nx-lower: v\r\nX-Multi: 1\r\nX-Multi: 2\r\nX-Empty:\r\nX-Space:   padded\t \r\n", "a")},
	{"obs-text value", post("X-Latin: caf\xe9\r\n", "a")},
	{"CRLF after a POST", post("", "a") + "\r\n" + post("", "b")},
	{"4 CR and LF after a POST", post("", "a") + "\r\n\r\n" + post("", "b")},
	{"6 CR and LF after a POST", post("", "a") + "\r\n\r\n\r\n" + post("", "b")},
	{"LF after a POST", post("", "a") + "\n" + post("", "b")},
	{"CRLF before the first request", "\r\n" + post("", "a")},
	{"GET", "GET / HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"GET after POST", post("", "a") + "GET /x HTTP/1.1\r\nHost: h\r\n\r\n" + post("", "b")},
	{"other path", "POST /mcp HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\na"},
	{"query", "POST /?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\na"},
	{"absolute form", "POST http://h/ HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\na"},
	{"HTTP/1.0", "POST / HTTP/1.0\r\nContent-Length: 1\r\n\r\na"},
	{"lowercase method", "post / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\na"},
	{"no host", "POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\na"},
	{"two hosts", "POST / HTTP/1.1\r\nHost: a\r\nHost: b\r\nContent-Length: 1\r\n\r\na"},
	{"bad host", "POST / HTTP/1.1\r\nHost: a b\r\nContent-Length: 1\r\n\r\na"},
	{"chunked body", "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n" + post("", "b")},
	{"CL and TE", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" + post("", "b")},
	{"two lengths", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na" + post("", "b")},
	{"two lengths differ", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"},
	{"signed length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\na"},
	{"length with space", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 1 \r\n\r\na"},
	{"huge length", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\na"},
	{"expect", "POST / HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\na"},
	{"upgrade h2c", "POST / HTTP/1.1\r\nHost: h\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Length: 1\r\n\r\na"},
	{"connection list", post("Connection: keep-alive, X-Foo\r\nX-Foo: 1\r\n", "a")},
	{"pragma", post("Pragma: no-cache\r\n", "a")},
	{"space before colon", "POST / HTTP/1.1\r\nHost: h\r\nX-A : 1\r\nContent-Length: 1\r\n\r\na"},
	{"obs-fold", "POST / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\nContent-Length: 1\r\n\r\na"},
	{"bare LF", "POST / HTTP/1.1\nHost: h\nContent-Length: 1\n\na"},
	{"bare LF in a header", "POST / HTTP/1.1\r\nHost: h\r\nX-A: 1\nX-B: 2\r\nContent-Length: 1\r\n\r\na"},
	{"bare CR", "POST / HTTP/1.1\r\nHost: h\r\nX-A: 1\r2\r\nContent-Length: 1\r\n\r\na"},
	{"NUL in a value", "POST / HTTP/1.1\r\nHost: h\r\nX-A: a\x00b\r\nContent-Length: 1\r\n\r\na"},
	{"no colon", "POST / HTTP/1.1\r\nHost: h\r\nnocolon\r\nContent-Length: 1\r\n\r\na"},
	{"empty key", "POST / HTTP/1.1\r\nHost: h\r\n: v\r\nContent-Length: 1\r\n\r\na"},
	{"long header", post("X-Long: "+strings.Repeat("v", 70<<10)+"\r\n", "a")},
	{"short body", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc"},
	{"huge length, short body", "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999\r\n\r\na"},
	{"garbage", "\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03"},
	{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"},
	{"cut short after a request", "POST / HTTP/1.1\r\nHost:\r\n\r\n0"},
	{"3 bytes after a request", post("", "a") + "POS"},
	{"a line cut after a request", post("", "a") + "POST / HT"},
	{"a header cut after a request", post("", "a") + "POST / HTTP/1.1\r\nHost: h\r\nX-Cu"},
	{"CR and LF, then a few bytes, after a request", post("", "a") + "\r\nPO"},
}

func TestDifferential(t *testing.T) {
	p := startPair(t, http.HandlerFunc(echo))
	for _, tc := range append(differential, boundaryCases()...) {
		t.Run(tc.name, func(t *testing.T) {
			want := answer(t, p.std, []byte(tc.raw))
			got := answer(t, p.fast, []byte(tc.raw))
			if got != want {
				t.Errorf("h1 answered\n%s\nnet/http answered\n%s", got, want)
			}
		})
	}
}

// answer is what the server at addr answers raw, sent whole before the
// client ends its writing side, and whether the server then closed the
// connection (both servers close once they read the end): a server that
// never closes, such as one spinning on a read into no room, answers the
// same bytes as one that does.
func answer(t testing.TB, addr string, raw []byte) string {
	out, closed := exchangeClosed(t, addr, raw, 5*time.Second)
	return fmt.Sprintf("%sthe server closed: %v\n", normal(out), closed)
}

// FuzzDifferential holds h1 to net/http's answers for any bytes a client
// sends. Its seeds include requests that end 1 to 3 bytes before the end
// of h1's read buffer.
func FuzzDifferential(f *testing.F) {
	for _, tc := range append(differential, boundaryCases()...) {
		f.Add([]byte(tc.raw))
	}
	p := startPair(f, http.HandlerFunc(echo))
	f.Fuzz(func(t *testing.T, raw []byte) {
		want := answer(t, p.std, raw)
		got := answer(t, p.fast, raw)
		if got != want {
			t.Errorf("for %q h1 answered\n%s\nnet/http answered\n%s", raw, got, want)
		}
	})
}

// TestServedItself checks that the plain requests are h1's, not handed to
// net/http, and the others are handed over.
func TestServedItself(t *testing.T) {
	var viaH1 atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := w.(*response); ok {
			viaH1.Add(1)
		}
		io.Copy(io.Discard, r.Body)
	})
	p := startPair(t, h)
	exchange(t, p.fast, []byte(post("", "a")+post("", "b")+"GET / HTTP/1.1\r\nHost: h\r\n\r\n"+post("", "c")))
	if n := viaH1.Load(); n != 2 {
		t.Errorf("h1 served %d requests, want the 2 before the GET (the rest of the connection is net/http's)", n)
	}
}

// TestClientGone checks that a client that closes its connection during
// a long request cancels the request's context, as net/http does.
func TestClientGone(t *testing.T) {
	t.Parallel()
	cancelled := make(chan error, 1)
	started := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		close(started)
		select {
		case <-r.Context().Done():
			cancelled <- r.Context().Err()
		case <-time.After(5 * time.Second):
			cancelled <- errors.New("not cancelled within 5s")
		}
	})
	p := startPair(t, h)
	c, err := net.Dial("tcp", p.fast)
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte(post("", "a")))
	await.Receive(t, 10*time.Second, "the request running", started)
	c.Close()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Fatalf("the request's context: %v, want canceled", err)
	}
}

// TestWatchKeepsNextRequest checks that the byte the watch reads of a
// next request (a client pipelining during a long request) is kept.
//
// The watch starts after 50 ms rather than watchAfter's 500 (what is
// tested is what it reads, not when it starts).
func TestWatchKeepsNextRequest(t *testing.T) {
	t.Parallel()
	const after = 50 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if string(b) == "slow" {
			time.Sleep(5 * after) // a slow request: its length is the case, not a wait
		}
		w.Write(b)
	})
	watching := make(chan struct{}, 1)
	p := startPairWith(t, h, func(s *Server) {
		s.watchAfter = after
		s.beforeWatch = func() {
			select {
			case watching <- struct{}{}:
			default:
			}
		}
	})
	c, err := net.Dial("tcp", p.fast)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(post("", "slow")))
	await.Receive(t, 10*time.Second, "the watch starting", watching) // the watch is reading
	c.Write([]byte(post("", "next")))
	br := bufio.NewReader(c)
	for _, want := range []string{"slow", "next"} {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != want {
			t.Errorf("reply %q, want %q", b, want)
		}
	}
}

// TestTimeouts checks the server's timeouts on the connections h1 serves.
func TestTimeouts(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(&http.Server{Handler: h, ReadHeaderTimeout: 200 * time.Millisecond, IdleTimeout: 300 * time.Millisecond})
	go s.Serve(lis)
	defer s.Close()
	for _, tc := range []struct {
		name string
		send string
		max  time.Duration
	}{
		{"idle", "", 2 * time.Second},
		{"idle after a request", post("", "a"), 2 * time.Second},
		{"slow head", "POST / HTTP/1.1\r\nHost: h\r\n", 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", lis.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			start := time.Now()
			c.Write([]byte(tc.send))
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			io.ReadAll(c) // until the server closes
			if d := time.Since(start); d > tc.max {
				t.Errorf("closed after %v, want within %v", d, tc.max)
			}
		})
	}
}

// TestShutdown checks that Shutdown closes idle connections at once and
// lets a running request finish with its reply.
func TestShutdown(t *testing.T) {
	started := make(chan struct{})
	var s *Server
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		if r.Header.Get("X-Slow") != "" {
			close(started)
			// Running until Shutdown has begun: the request it lets finish.
			_ = await.Try(10*time.Second, func() error {
				if !s.shutdown.Load() {
					return errors.New("no Shutdown yet")
				}
				return nil
			})
		}
		w.Write([]byte("done"))
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s = New(&http.Server{Handler: h})
	served := make(chan error, 1)
	go func() { served <- s.Serve(lis) }()
	idle, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	idle.Write([]byte(post("", "a")))
	if _, err := http.ReadResponse(bufio.NewReader(idle), nil); err != nil {
		t.Fatal(err)
	}
	busy, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	busy.Write([]byte(post("X-Slow: 1\r\n", "a")))
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatalf("the running request got no reply: %v", err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "done" || !resp.Close {
		t.Errorf("reply %q close=%v, want done and Connection: close", b, resp.Close)
	}
	idle.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := idle.Read(make([]byte, 1)); n != 0 || err == nil {
		t.Errorf("the idle connection is still open: %d, %v", n, err)
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		t.Errorf("Serve: %v, want ErrServerClosed", err)
	}
}

// TestUnreadBody checks what happens to a body the handler does not read:
// a short one is dropped and the connection serves the next request, a
// long one closes the connection after a reply that says so.
func TestUnreadBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("refused")) })
	p := startPair(t, h)
	for _, tc := range []struct {
		name    string
		size    int
		replies int
		close   bool
	}{
		{"short", 1000, 2, false},
		{"just under the bound", maxDiscard - 1, 2, false},
		{"at the bound", maxDiscard, 1, true},
		{"long", maxDiscard + 1, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			raw := post("", strings.Repeat("a", tc.size)) + post("", "b")
			for _, addr := range []string{p.std, p.fast} {
				out := normal(exchange(t, addr, []byte(raw)))
				if n := strings.Count(out, "HTTP/1.1 200"); n != tc.replies {
					t.Errorf("%s: %d replies, want %d:\n%s", addr, n, tc.replies, out)
				}
				if c := strings.Contains(out, "close=true"); c != tc.close {
					t.Errorf("%s: Connection: close %v, want %v", addr, c, tc.close)
				}
			}
		})
	}
}

// TestReplyInPiecesHeldBounded checks that a reply written in many small
// pieces without a length (as a compressing writer does) leaves in writes
// of at most about maxGather bytes rather than being held whole.
func TestReplyInPiecesHeldBounded(t *testing.T) {
	const pieces, size = 400, 1000 // 400 KB
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		piece := bytes.Repeat([]byte("x"), size)
		for range pieces {
			w.Write(piece)
			if rw, ok := w.(*response); ok && len(rw.out) > maxGather+size+64 {
				t.Errorf("the reply holds %d bytes unwritten, want at most about %d", len(rw.out), maxGather)
				return
			}
		}
	})
	p := startPair(t, h)
	for _, addr := range []string{p.std, p.fast} {
		out := normal(exchange(t, addr, []byte(post("", "a"))))
		if n := strings.Count(out, strings.Repeat("x", size)); n != pieces {
			t.Errorf("%s: %d pieces of body, want %d", addr, n, pieces)
		}
	}
}

// closedBoth sends parts to net/http's server (std) and h1's (fast) at
// once, pausing gap after each one but the last, and returns how long
// after each connection was opened its server closed it, and what it
// wrote before; the two waits for a timeout overlap.
func closedBoth(t *testing.T, std, fast string, parts []string, gap time.Duration) (dStd, dFast time.Duration, outStd, outFast []byte) {
	t.Helper()
	cs := make([]net.Conn, 2)
	for i, addr := range []string{std, fast} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		cs[i] = c
	}
	var wg sync.WaitGroup
	wg.Go(func() { dStd, outStd = closedAfterOn(cs[0], parts, gap) })
	wg.Go(func() { dFast, outFast = closedAfterOn(cs[1], parts, gap) })
	wg.Wait()
	return dStd, dFast, outStd, outFast
}

// closedAfterOn is one connection's part of closedBoth; it closes c.
func closedAfterOn(c net.Conn, parts []string, gap time.Duration) (time.Duration, []byte) {
	defer c.Close()
	start := time.Now()
	done := make(chan []byte, 1)
	go func() {
		c.SetReadDeadline(start.Add(20 * time.Second))
		out, _ := io.ReadAll(c)
		done <- out
	}()
	for i, p := range parts {
		if _, err := c.Write([]byte(p)); err != nil {
			break // closed by the server
		}
		if i < len(parts)-1 {
			select {
			case out := <-done:
				return time.Since(start), out
			case <-time.After(gap):
			}
		}
	}
	out := <-done
	return time.Since(start), out
}

// TestHeadTimeoutHolds checks that the time a client has to send a
// request head is ReadHeaderTimeout from the start, as with net/http,
// whatever it sends: nothing at all on a new connection (which once
// waited IdleTimeout), or a head handed to net/http after part of that
// time went by (which once gave the client a second ReadHeaderTimeout).
func TestHeadTimeoutHolds(t *testing.T) {
	t.Parallel() // its own servers; the time it measures is a timeout's, idle
	const rht = 2 * time.Second
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	srv := func(lean bool) string {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		hs := &http.Server{Handler: h, ReadHeaderTimeout: rht, IdleTimeout: 10 * time.Second}
		if lean {
			s := New(hs)
			go s.Serve(lis)
			t.Cleanup(func() { s.Close() })
		} else {
			go hs.Serve(lis)
			t.Cleanup(func() { hs.Close() })
		}
		return lis.Addr().String()
	}
	std, fast := srv(false), srv(true)
	long := "POST / HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("X-Pad: "+strings.Repeat("v", 90)+"\r\n", (maxHeadBytes-2000)/100)
	trickle := func(first ...string) []string {
		for range 100 {
			first = append(first, "X-More: 1\r\n")
		}
		return first
	}
	for _, tc := range []struct {
		name  string
		parts []string
		gap   time.Duration
	}{
		{"nothing sent", []string{""}, 0},
		{"a head handed over late for its length", trickle(long, strings.Repeat("X-Pad: v\r\n", 400)), 1500 * time.Millisecond},
		{"a head handed over late for its version", trickle("POST / HT", "TP/1.0\r\nHost: h\r\n"), 1500 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dStd, dFast, _, _ := closedBoth(t, std, fast, tc.parts, tc.gap)
			for i, d := range []time.Duration{dStd, dFast} {
				if addr := []string{std, fast}[i]; d < rht-100*time.Millisecond || d > rht+900*time.Millisecond {
					t.Errorf("%s: closed after %v, want ReadHeaderTimeout (%v)", addr, d.Round(time.Millisecond), rht)
				}
			}
		})
	}
}

// TestHeadTimeoutAnswers checks that a head cut short by
// ReadHeaderTimeout is answered as net/http answers it (400 when a
// header line was cut, nothing when the request line was), as a head cut
// short by the end of the connection already is.
func TestHeadTimeoutAnswers(t *testing.T) {
	t.Parallel() // its own servers; what it waits for is a timeout, idle
	p := startPair(t, http.HandlerFunc(echo))
	for _, tc := range []struct{ name, raw string }{
		{"request line cut", "POST / HTTP/1.1"},
		{"a few bytes", "PO"},
		{"header line cut", "POST / HTTP/1.1\r\nHost: h\r\nX-Cut"},
		{"header line cut after a request", post("", "a") + "POST / HTTP/1.1\r\nHost: h\r\nX-Cut"},
		{"complete lines, no end", "POST / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, w, g := closedBoth(t, p.std, p.fast, []string{tc.raw}, 0)
			if got, want := normal(g), normal(w); got != want {
				t.Errorf("h1 answered\n%s\nnet/http answered\n%s", got, want)
			}
		})
	}
}

// TestHandedOverHalfCloses checks that a connection handed to net/http
// keeps its CloseWrite, so that net/http, closing a connection whose
// request body is left unread, ends its writing side first and the
// client reads the reply and then the end, not a reset, as from
// net/http alone.
func TestHandedOverHalfCloses(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("refused")) })
	p := startPair(t, h)
	for _, addr := range []string{p.std, p.fast} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		c.Write([]byte("POST /other HTTP/1.1\r\nHost: h\r\nContent-Length: 4000000\r\n\r\n" + strings.Repeat("a", 300<<10)))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
		io.ReadAll(resp.Body)
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: after the reply: %v, want EOF (the server's CloseWrite)", addr, err)
		}
		c.Close()
	}
}

// TestNoHTTP2AfterRequests checks that with unencrypted HTTP/2 on, the
// HTTP/2 preface starts HTTP/2 only at the start of a connection, as
// with net/http alone: after requests h1 served, the connection handed
// to net/http once switched to HTTP/2 there, since net/http looks for the
// preface at the start of every connection it is given; now it is closed
// (net/http alone answers the preface's request line as HTTP/1, closing
// the connection after it).
func TestNoHTTP2AfterRequests(t *testing.T) {
	h := http.HandlerFunc(echo)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	s := New(&http.Server{Handler: h, ReadHeaderTimeout: 2 * time.Second, Protocols: p})
	go s.Serve(lis)
	defer s.Close()
	const preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00" // and an empty SETTINGS frame
	addr := lis.Addr().String()
	for _, tc := range []struct {
		name, raw string
		http2     bool
	}{
		{"at the start", preface, true},
		{"after a request", post("", "a") + preface, false},
		{"after a request, in pieces", post("", "a") + preface[:8], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			c.Write([]byte(tc.raw))
			br := bufio.NewReader(c)
			if !tc.http2 {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				io.ReadAll(resp.Body)
			}
			if tc.name == "after a request, in pieces" {
				// The rest once the request is answered: the server has
				// read the first piece and waits for the next.
				c.Write([]byte(preface[8:]))
			}
			// An HTTP/2 server's first frame is its SETTINGS: 9 bytes, type 4.
			frame := make([]byte, 9)
			_, err = io.ReadFull(br, frame)
			if got := err == nil && frame[3] == 4; got != tc.http2 {
				t.Errorf("got a SETTINGS frame %v (%q, %v), want %v", got, frame, err, tc.http2)
			}
		})
	}
}

// servedConns is how many connections s holds: accepted and not yet closed.
func servedConns(s *Server) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
