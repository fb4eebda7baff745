package bridge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/goleak"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// checkLeaks makes t fail when goroutines that t started outlive it. Call
// it first, so that its check runs after every other cleanup.
func checkLeaks(t *testing.T) {
	t.Helper()
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) })
}

// waitTimeout bounds every wait of the WebSocket tests; the tests do not
// sleep, they only wait for something to happen.
const waitTimeout = 20 * time.Second

// wsClient is a real WebSocket client of the bridge.
type wsClient struct {
	t testing.TB
	c *websocket.Conn
	// pending holds the notifications call read while it waited for a
	// reply; recv returns them first.
	pending []map[string]any
}

func dialWS(t testing.TB, e *env) *wsClient {
	t.Helper()
	return dialWSWith(t, e, nil)
}

func dialWSWith(t testing.TB, e *env, opts *websocket.DialOptions) *wsClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c, _, err := websocket.Dial(ctx, e.url+"/ws", opts)
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	c.SetReadLimit(1 << 24)
	t.Cleanup(func() { c.CloseNow() })
	return &wsClient{t: t, c: c}
}

// send writes one text frame.
func (w *wsClient) send(frame string) {
	w.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := w.c.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
		w.t.Fatalf("write %s: %v", frame, err)
	}
}

// recvRaw reads one frame.
func (w *wsClient) recvRaw() ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	typ, b, err := w.c.Read(ctx)
	if err == nil && typ != websocket.MessageText {
		err = errors.New("got a binary frame")
	}
	return b, err
}

// recv returns the next object from the bridge: a pending notification,
// or one read from a frame holding one JSON-RPC object, checked: a reply
// (with an id) or a notification of the bridge's.
func (w *wsClient) recv() map[string]any {
	w.t.Helper()
	if len(w.pending) > 0 {
		m := w.pending[0]
		w.pending = w.pending[1:]
		return m
	}
	return w.read()
}

// read reads one frame, as recv does, ignoring pending notifications.
func (w *wsClient) read() map[string]any {
	w.t.Helper()
	b, err := w.recvRaw()
	if err != nil {
		w.t.Fatalf("read: %v", err)
	}
	m, ok := decode(w.t, b).(map[string]any)
	if !ok {
		w.t.Fatalf("frame %s is not an object", b)
	}
	checkFrame(w.t, m)
	return m
}

// checkFrame checks one object sent by the bridge: a reply, or a stream
// notification with the shape docs/streaming.md gives.
func checkFrame(t testing.TB, m map[string]any) {
	t.Helper()
	if _, ok := m["id"]; ok {
		checkEnvelope(t, m)
		return
	}
	if m["jsonrpc"] != "2.0" || len(m) != 3 {
		t.Fatalf("notification %v: want exactly jsonrpc 2.0, method and params", m)
	}
	p, ok := m["params"].(map[string]any)
	if !ok {
		t.Fatalf("notification %v: params is not an object", m)
	}
	if _, ok := p["stream"].(string); !ok {
		t.Fatalf("notification %v: params.stream is not a string", m)
	}
	switch m["method"] {
	case "rpc.stream.message":
		if _, ok := p["message"].(map[string]any); !ok || len(p) != 2 {
			t.Fatalf("notification %v: want params {stream, message}", m)
		}
	case "rpc.stream.end":
		if e, ok := p["error"]; ok {
			checkEnvelope(t, map[string]any{"jsonrpc": "2.0", "id": nil, "error": e})
			if len(p) != 2 {
				t.Fatalf("notification %v: want params {stream, error}", m)
			}
		} else if len(p) != 1 {
			t.Fatalf("notification %v: want params {stream}", m)
		}
	default:
		t.Fatalf("notification %v: unknown method", m)
	}
}

// call sends a request and reads frames until its reply, which it
// returns; frames before it must be notifications, which are returned and
// also kept for recv.
func (w *wsClient) call(frame string) (map[string]any, []map[string]any) {
	w.t.Helper()
	var req struct{ ID json.RawMessage }
	if err := json.Unmarshal([]byte(frame), &req); err != nil || req.ID == nil {
		w.t.Fatalf("call %s: want a request with an id", frame)
	}
	w.send(frame)
	var notes []map[string]any
	for {
		m := w.read()
		if id, ok := m["id"]; ok {
			if b, _ := json.Marshal(id); string(b) != string(req.ID) {
				w.t.Fatalf("call %s: got the reply %v of another call", frame, m)
			}
			return m, notes
		}
		notes = append(notes, m)
		w.pending = append(w.pending, m)
	}
}

// streamID returns the stream id of the reply to a call that opened a
// stream.
func streamID(t testing.TB, reply map[string]any) string {
	t.Helper()
	r, ok := reply["result"].(map[string]any)
	id, _ := r["stream"].(string)
	if !ok || len(r) != 1 || id == "" {
		t.Fatalf("reply %v: want result {\"stream\": id}", reply)
	}
	return id
}

// drain reads the notifications of stream id until its end and returns
// the messages and the end's error (nil for success). Frames of other
// streams are a failure.
func (w *wsClient) drain(id string) ([]map[string]any, map[string]any) {
	w.t.Helper()
	var msgs []map[string]any
	for {
		m := w.recv()
		p, _ := m["params"].(map[string]any)
		if p == nil || p["stream"] != id {
			w.t.Fatalf("got %v while reading stream %s", m, id)
		}
		if m["method"] == "rpc.stream.end" {
			e, _ := p["error"].(map[string]any)
			return msgs, e
		}
		msgs = append(msgs, p["message"].(map[string]any))
	}
}

// closeStatus reads until the connection closes and returns its status.
func (w *wsClient) closeStatus() websocket.StatusCode {
	w.t.Helper()
	for {
		if _, err := w.recvRaw(); err != nil {
			return websocket.CloseStatus(err)
		}
	}
}

func errReason(e map[string]any) string {
	d, _ := e["data"].(map[string]any)
	details, _ := d["details"].([]any)
	for _, x := range details {
		if info, ok := x.(map[string]any); ok && info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo" {
			r, _ := info["reason"].(string)
			return r
		}
	}
	return ""
}

func code(e map[string]any) int64 {
	n, _ := e["code"].(json.Number).Int64()
	return n
}

func TestWSUpgrade(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	for _, method := range []string{http.MethodPost, http.MethodPut} {
		code, body := e.do(t, method, "/ws", "", "")
		if code != http.StatusMethodNotAllowed {
			t.Errorf("%s /ws: got HTTP %d %s, want 405", method, code, body)
		}
	}
	code, body := e.do(t, http.MethodGet, "/ws", "", "")
	if code != http.StatusUpgradeRequired {
		t.Errorf("GET /ws without an upgrade: got HTTP %d %s, want 426", code, body)
	}
}

func TestWSUnaryAndBatch(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	w := dialWS(t, e)
	reply, _ := w.call(`{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"ws"},"id":1}`)
	if err := match(map[string]any{"result": map[string]any{"message": "Hello, ws!"}}, reply, "$"); err != nil {
		t.Error(err)
	}
	// A notification gets nothing; the next frame is the reply to id 2.
	w.send(`{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"n"}}`)
	reply, _ = w.call(`{"jsonrpc":"2.0","method":"nope","id":2}`)
	if got := code(reply["error"].(map[string]any)); got != -32601 {
		t.Errorf("unknown method: got code %d, want -32601", got)
	}
	w.send(`{"jsonrpc":"2.0",`)
	if got := code(w.recv()["error"].(map[string]any)); got != -32700 {
		t.Errorf("parse error: got code %d, want -32700", got)
	}
	w.send(`[{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"a"},"id":"a"},` +
		`{"jsonrpc":"2.0","method":"test.v1.TestService.ServerStream","params":{"count":2},"id":"b"}]`)
	b, err := w.recvRaw()
	if err != nil {
		t.Fatal(err)
	}
	batch, ok := decode(t, b).([]any)
	if !ok || len(batch) != 2 {
		t.Fatalf("batch reply %s: want an array of 2", b)
	}
	id := streamID(t, batch[1].(map[string]any))
	msgs, end := w.drain(id)
	if len(msgs) != 2 || end != nil {
		t.Errorf("stream opened in a batch: got %v, end %v; want 2 messages and success", msgs, end)
	}
}

func TestWSCloseCodes(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{WSMaxMessageBytes: 1024}})
	t.Run("binary frame", func(t *testing.T) {
		w := dialWS(t, e)
		if err := w.c.Write(t.Context(), websocket.MessageBinary, []byte("{}")); err != nil {
			t.Fatal(err)
		}
		if got := w.closeStatus(); got != websocket.StatusUnsupportedData {
			t.Errorf("got close status %v, want %v", got, websocket.StatusUnsupportedData)
		}
	})
	t.Run("too big", func(t *testing.T) {
		w := dialWS(t, e)
		w.send(`{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":{"name":"` + strings.Repeat("x", 2000) + `"},"id":1}`)
		if got := w.closeStatus(); got != websocket.StatusMessageTooBig {
			t.Errorf("got close status %v, want %v", got, websocket.StatusMessageTooBig)
		}
	})
	t.Run("client closes", func(t *testing.T) {
		w := dialWS(t, e)
		w.call(`{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1}`)
		if err := w.c.Close(websocket.StatusNormalClosure, "bye"); err != nil {
			t.Errorf("close: %v", err)
		}
	})
}

func TestWSShutdown(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	w := dialWS(t, e)
	reply, _ := w.call(`{"jsonrpc":"2.0","method":"test.v1.TestService.ServerStream","params":{"count":1,"hold":true,"key":"shutdown"},"id":1}`)
	id := streamID(t, reply)
	if m := w.recv(); m["method"] != "rpc.stream.message" {
		t.Fatalf("got %v, want the stream's message", m)
	}
	idle := dialWS(t, e) // nothing runs on it
	busy := dialWS(t, e) // a unary call runs on it
	busy.send(`{"jsonrpc":"2.0","method":"test.v1.TestService.Sleep","params":{"duration":"0.5s"},"id":7}`)
	time.Sleep(100 * time.Millisecond) // the call has started
	const timeout = 2 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- e.bridge.Shutdown(ctx) }()
	// An idle connection goes at once; a busy one once its call has
	// answered; one whose stream does not end just before the deadline.
	if got := idle.closeStatus(); got != websocket.StatusGoingAway || time.Since(start) > 500*time.Millisecond {
		t.Errorf("idle connection: got close status %v after %s, want %v at once", got, time.Since(start), websocket.StatusGoingAway)
	}
	if m := busy.recv(); fmt.Sprint(m["id"]) != "7" || m["result"] == nil {
		t.Errorf("the call running at Shutdown: got %v, want its result", m)
	}
	if got := busy.closeStatus(); got != websocket.StatusGoingAway || time.Since(start) > timeout/2 {
		t.Errorf("busy connection: got close status %v after %s, want %v once its call answered", got, time.Since(start), websocket.StatusGoingAway)
	}
	if got := w.closeStatus(); got != websocket.StatusGoingAway {
		t.Errorf("got close status %v, want %v", got, websocket.StatusGoingAway)
	}
	if took := time.Since(start); took < timeout*3/4 || took > timeout {
		t.Errorf("the held stream's connection closed after %s, want shortly before Shutdown's deadline (%s)", took, timeout)
	}
	waitFor(t, e.backend.Cancelled("shutdown"), "the backend to see stream "+id+" cancelled")
	if err := <-done; err != nil {
		t.Errorf("Shutdown: %v", err)
	}
	if err := e.bridge.Shutdown(context.Background()); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if _, resp, err := websocket.Dial(ctx, e.url+"/ws", nil); err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("dial after Shutdown: got %v, want HTTP 503", err)
	}
}

func waitFor(t testing.TB, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(waitTimeout):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// TestTranscriptsOverWebSocket replays every transcript of
// testdata/transcripts as frames of one WebSocket connection per file: a
// frame follows exactly the rules of POST /, so each reply must match the
// transcript's, and a message POST / answers with no body (204) gets no
// frame at all. Each transcript starts from a fresh backend.
func TestTranscriptsOverWebSocket(t *testing.T) {
	checkLeaks(t)
	files, err := filepath.Glob("testdata/transcripts/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			// One frame at a time, so that a notification has run before
			// the next frame is read, as over HTTP.
			e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{MaxCallsPerConnection: 1}})
			w := dialWS(t, e)
			for i, s := range readTranscript(t, file) {
				if s.status != http.StatusOK && s.status != http.StatusNoContent {
					continue // an HTTP status of its own: not a frame's
				}
				w.send(s.send)
				if s.want == "" {
					// Nothing may come back: the next frame is the reply
					// to a call sent after it.
					sentinel := fmt.Sprintf("after-line-%d-%d", s.line, i)
					w.send(`{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":"` + sentinel + `"}`)
					b, err := w.recvRaw()
					if err != nil {
						t.Fatal(err)
					}
					if r, ok := decode(t, b).(map[string]any); !ok || r["id"] != sentinel {
						t.Errorf("line %d: %s\ngot frame %s, want none", s.line, s.send, b)
					}
					continue
				}
				b, err := w.recvRaw()
				if err != nil {
					t.Fatalf("line %d: %v", s.line, err)
				}
				got := decode(t, b)
				eachReply(t, got, func(r map[string]any) { checkEnvelope(t, r) })
				if err := match(pattern(t, s.want), got, "$"); err != nil {
					t.Errorf("line %d: %s\ngot  %s\nwant %s\n%v", s.line, s.send, b, s.want, err)
				}
			}
		})
	}
}
