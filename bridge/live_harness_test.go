package bridge_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// The live forms' Accept values, as the tests send them.
const (
	acceptSSE    = "text/event-stream"
	acceptNDJSON = "application/x-ndjson"
	acceptJSONL  = "application/jsonl"
)

// liveEvent is one thing a live reply carried: a JSON-RPC message, or a
// keepalive (an SSE comment, an empty NDJSON line), and when it arrived.
type liveEvent struct {
	at        time.Time
	raw       string
	msg       map[string]any // nil for a keepalive
	keepalive bool
}

// liveReply reads a live reply as it arrives, on a goroutine of its own,
// so that a test can wait for each event with a bound.
type liveReply struct {
	t      testing.TB
	resp   *http.Response
	events chan liveEvent
	err    error // why the reading stopped (io.EOF at the end), once events is closed
}

// readLive reads resp, a live reply of the form accept, event by event.
func readLive(t testing.TB, resp *http.Response, accept string) *liveReply {
	t.Helper()
	lr := &liveReply{t: t, resp: resp, events: make(chan liveEvent, 1<<16)}
	go func() {
		defer close(lr.events)
		br := bufio.NewReaderSize(resp.Body, 64<<10)
		var data []string
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				if err == io.EOF && line != "" {
					err = errors.New("the reply ends in the middle of a line: " + line)
				}
				lr.err = err
				return
			}
			now := time.Now()
			line = strings.TrimSuffix(line, "\n")
			if accept != acceptSSE {
				if line == "" {
					lr.events <- liveEvent{at: now, keepalive: true}
				} else {
					lr.events <- liveEvent{at: now, raw: line, msg: decodeObject(t, line)}
				}
				continue
			}
			switch {
			case strings.HasPrefix(line, ":"):
				lr.events <- liveEvent{at: now, raw: line, keepalive: true}
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[len("data: "):])
			case line == "" && data != nil:
				raw := strings.Join(data, "\n")
				data = nil
				lr.events <- liveEvent{at: now, raw: raw, msg: decodeObject(t, raw)}
			case line == "":
			default:
				lr.err = errors.New("not an SSE line of the bridge's: " + line)
				return
			}
		}
	}()
	return lr
}

// decodeObject decodes one JSON-RPC message of a live reply.
func decodeObject(t testing.TB, s string) map[string]any {
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil || d.More() {
		t.Errorf("live message %q is not one JSON object: %v", s, err)
		return map[string]any{}
	}
	return m
}

// next returns the next message, skipping keepalives, within d.
func (lr *liveReply) next(d time.Duration) liveEvent {
	lr.t.Helper()
	for {
		ev := lr.nextAny(d)
		if !ev.keepalive {
			return ev
		}
	}
}

// nextAny returns the next event, a keepalive or a message, within d.
func (lr *liveReply) nextAny(d time.Duration) liveEvent {
	lr.t.Helper()
	select {
	case ev, ok := <-lr.events:
		if !ok {
			lr.t.Fatalf("the live reply ended (%v), want another event", lr.err)
		}
		return ev
	case <-time.After(d):
		lr.t.Fatalf("no event of the live reply within %s", d)
	}
	panic("unreachable")
}

// rest returns every message left until the reply ends, which must be
// within d, and fails unless it ends cleanly.
func (lr *liveReply) rest(d time.Duration) []liveEvent {
	lr.t.Helper()
	var msgs []liveEvent
	deadline := time.After(d)
	for {
		select {
		case ev, ok := <-lr.events:
			if !ok {
				if lr.err != io.EOF {
					lr.t.Fatalf("the live reply ended with %v after %d messages, want its end", lr.err, len(msgs))
				}
				return msgs
			}
			if !ev.keepalive {
				msgs = append(msgs, ev)
			}
		case <-deadline:
			lr.t.Fatalf("the live reply did not end within %s (%d messages so far)", d, len(msgs))
		}
	}
}

// liveClient is one way of reaching the bridge's HTTP front: its base
// URL and the client to call it with.
type liveClient struct {
	name   string
	url    string
	client *http.Client
	proto  string // the protocol the replies must come over: HTTP/1.1 or HTTP/2.0
}

// liveFronts serves h behind each HTTP front the bridge is served
// through: bridge/h1 (serve's default), net/http's HTTP/1.1, HTTP/2 with
// prior knowledge (h2c) and HTTP/2 over TLS.
func liveFronts(t *testing.T, h http.Handler) []liveClient {
	t.Helper()
	var fronts []liveClient
	// h1, as serveBridge serves the tests.
	fronts = append(fronts, liveClient{name: "h1", url: serveBridge(t, h, nil), client: newHTTPClient(t), proto: "HTTP/1.1"})

	// net/http alone, HTTP/1.1 and h2c on the same listener.
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, Protocols: p}
	go hs.Serve(lis)
	t.Cleanup(func() { shutdownServer(hs) })
	plain := "http://" + lis.Addr().String()
	fronts = append(fronts, liveClient{name: "net/http HTTP/1.1", url: plain, client: newHTTPClient(t), proto: "HTTP/1.1"})
	h2c := new(http.Protocols)
	h2c.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: h2c}
	t.Cleanup(tr.CloseIdleConnections)
	fronts = append(fronts, liveClient{name: "h2c", url: plain, client: &http.Client{Transport: tr}, proto: "HTTP/2.0"})

	// HTTP/2 over TLS, by ALPN.
	ts := httptest.NewUnstartedServer(h)
	ts.EnableHTTP2 = true
	ts.StartTLS()
	t.Cleanup(ts.Close)
	tlsTr := ts.Client().Transport.(*http.Transport).Clone()
	tlsTr.ForceAttemptHTTP2 = true
	tlsTr.TLSClientConfig = &tls.Config{RootCAs: ts.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs, NextProtos: []string{"h2"}}
	t.Cleanup(tlsTr.CloseIdleConnections)
	fronts = append(fronts, liveClient{name: "h2 TLS", url: ts.URL, client: &http.Client{Transport: tlsTr}, proto: "HTTP/2.0"})
	return fronts
}

func shutdownServer(hs *http.Server) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(ctx)
	hs.Close()
}

// postLive posts body to url asking for the live form accept (none when
// empty), with the headers h, and returns the response, its body unread.
func postLive(t testing.TB, client *http.Client, url, accept, body string, h http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// checkLiveHead checks the head of a live reply of the form accept.
func checkLiveHead(t testing.TB, resp *http.Response, accept string) {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("got HTTP %d %s, want 200", resp.StatusCode, b)
	}
	for k, want := range map[string]string{"Content-Type": accept, "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if resp.Header.Get("Content-Encoding") != "" || resp.Header.Get("Content-Length") != "" {
		t.Errorf("a live reply with Content-Encoding %q, Content-Length %q, want neither",
			resp.Header.Get("Content-Encoding"), resp.Header.Get("Content-Length"))
	}
}

// notificationOf checks that m is the rpc.stream.message notification of
// the stream of request id and returns its message.
func notificationOf(t testing.TB, m map[string]any, id string) map[string]any {
	t.Helper()
	p, _ := m["params"].(map[string]any)
	if m["jsonrpc"] != "2.0" || m["method"] != "rpc.stream.message" || p == nil || len(m) != 3 {
		t.Fatalf("got %v, want an rpc.stream.message notification", m)
	}
	if got, _ := json.Marshal(p["stream"]); string(got) != id {
		t.Fatalf("notification %v names stream %s, want %s", m, got, id)
	}
	msg, ok := p["message"].(map[string]any)
	if !ok || len(p) != 2 {
		t.Fatalf("notification %v: want params of stream and message", m)
	}
	return msg
}

// newEnvPath is newEnv on the direct path, or newEnvGRPCGo.
func newEnvPath(t testing.TB, opts bridge.Options, direct bool) *env {
	t.Helper()
	if direct {
		return newEnv(t, opts)
	}
	return newEnv(t, opts, onBufconn())
}

// sendClock records when the backend sent each note of a stream, as a
// stream interceptor of the backend's server, so that latencies are
// measured from the backend's send.
type sendClock struct{ sent sync.Map } // note id -> time.Time

func (c *sendClock) intercept(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	return h(srv, clockStream{ss, c})
}

type clockStream struct {
	grpc.ServerStream
	c *sendClock
}

func (s clockStream) SendMsg(m any) error {
	if n, ok := m.(interface{ GetId() string }); ok {
		s.c.sent.Store(n.GetId(), time.Now())
	}
	return s.ServerStream.SendMsg(m)
}

// since is how long ago, at, the backend sent the note id.
func (c *sendClock) since(t testing.TB, id string, at time.Time) time.Duration {
	t.Helper()
	v, ok := c.sent.Load(id)
	if !ok {
		t.Fatalf("the backend did not send note %s", id)
	}
	return at.Sub(v.(time.Time))
}

// liveTries is how many messages a latency bound gets: on a loaded
// machine (the package's tests run at once, with the race detector) one
// message may be held up by the scheduler, where a bridge or proxy that
// buffers holds up every one.
const liveTries = 3

// withinLatency runs measure, which sends one message and returns how
// long it took to arrive, until a message arrives within liveLatency, at
// most liveTries times; it fails t if none does.
func withinLatency(t testing.TB, what string, measure func() time.Duration) time.Duration {
	t.Helper()
	var got []time.Duration
	for range liveTries {
		d := measure()
		if d <= liveLatency {
			if len(got) > 0 {
				t.Logf("%s: %s after %v (a loaded machine)", what, d, got)
			}
			return d
		}
		got = append(got, d)
	}
	t.Errorf("%s: %d messages arrived %v after the backend sent them, want one within %s", what, liveTries, got, liveLatency)
	return got[len(got)-1]
}
