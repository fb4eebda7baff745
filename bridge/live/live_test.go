package live

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// TestAccept: which Accept values ask for which live form (the same table
// as the bridge's TestAcceptLive, which checks it end to end).
func TestAccept(t *testing.T) {
	for _, tc := range []struct {
		accept []string
		want   Form
	}{
		{[]string{"text/event-stream"}, SSE},
		{[]string{"TEXT/Event-Stream"}, SSE},
		{[]string{"application/json, text/event-stream"}, SSE}, // as MCP clients send it
		{[]string{"application/json", "text/event-stream"}, SSE},
		{[]string{"text/event-stream;q=0.5, application/x-ndjson"}, NDJSON},
		{[]string{"application/x-ndjson, text/event-stream"}, NDJSON},
		{[]string{"application/jsonl; q=1.0"}, JSONL},
		{[]string{"application/json;q=0.2, text/event-stream;q=0.3"}, SSE},
		{[]string{" text/event-stream ; charset=utf-8 ;q=0.9 "}, SSE},
		{[]string{"*/*, text/event-stream"}, SSE},
		{[]string{"application/json;q=0.9, text/event-stream;q=0.5"}, None},
		{[]string{"text/event-stream;q=0"}, None},
		{[]string{"text/event-stream;q=2"}, None}, // not a qvalue
		{[]string{"text/event-stream;q=0.1234"}, None},
		{[]string{"text/event-streams"}, None},
		{[]string{"*/*"}, None},
		{[]string{""}, None},
	} {
		if got := Accept(tc.accept); got != tc.want {
			t.Errorf("Accept %q: got form %d, want %d", tc.accept, got, tc.want)
		}
	}
}

// TestFrame: a message is an SSE event's data or an NDJSON line; its line
// breaks (space between JSON tokens) become spaces.
func TestFrame(t *testing.T) {
	join := func(p [3][]byte) string { return string(p[0]) + string(p[1]) + string(p[2]) }
	if got := join(SSE.frame([]byte("{\"a\":\r\n1}"))); got != "data: {\"a\":  1}\n\n" {
		t.Errorf("SSE: got %q", got)
	}
	if got := join(NDJSON.frame([]byte(`{"a":1}`))); got != "{\"a\":1}\n" {
		t.Errorf("NDJSON: got %q", got)
	}
	if got := join(SSE.keepalive()); got != ": keepalive\n\n" {
		t.Errorf("SSE keepalive: got %q", got)
	}
	if got := join(JSONL.keepalive()); got != "\n" {
		t.Errorf("JSONL keepalive: got %q", got)
	}
}

// engine is a Front that answers like the engine a call of method, of
// kind: it asks the request's Streams how, and when live, opens the
// stream and sends msgs through its Sink before the reply.
type engine struct {
	kind dispatch.Kind
	msgs []string
	ctx  context.Context // the call's, once Run ran
}

func (e *engine) Run(ctx context.Context, msg *wire.Message, x *dispatch.Exchange, dst []byte) ([]byte, dispatch.ResponseMetadata) {
	e.ctx = ctx
	mode, sink := x.Streams.Stream(&dispatch.Method{Kind: e.kind}, msg.Single)
	if mode != dispatch.Live {
		return append(dst, `{"jsonrpc":"2.0","id":1,"result":[]}`...), dispatch.ResponseMetadata{}
	}
	sink.(dispatch.Opener).Open()
	w := sink.(dispatch.Waiter)
	for _, m := range e.msgs {
		if err := w.Wait(ctx); err != nil {
			return wire.AppendError(dst, msg.Single.ID, wire.Internal), dispatch.ResponseMetadata{}
		}
		if err := sink.Send(ctx, []byte(m)); err != nil {
			return wire.AppendError(dst, msg.Single.ID, wire.Internal), dispatch.ResponseMetadata{}
		}
	}
	return wire.AppendLiveResult(dst, msg.Single.ID, len(e.msgs)), dispatch.ResponseMetadata{}
}

func serve(t *testing.T, s *Server, f Form, body string) (*httptest.ResponseRecorder, []byte, bool) {
	t.Helper()
	var msg wire.Message
	if err := wire.Parse([]byte(body), 10, &msg); err != nil {
		t.Fatal(err.Message)
	}
	r := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(body))
	w := httptest.NewRecorder()
	reply, _, answered := s.Serve(w, r, &dispatch.Exchange{}, &msg, f, nil)
	return w, reply, answered
}

func newServer(front Front) *Server {
	s := new(Server)
	s.Init(Options{StreamBuffer: 8, StreamBufferBytes: 1 << 20, SlowClientTimeout: time.Second, ReplyTimeout: time.Second,
		Logger: slog.New(slog.DiscardHandler)}, front)
	return s
}

// TestServe: a call the engine answers live gets 200 with the live
// headers, each message framed as it came and the reply last, byte for
// byte; one it answers before its stream opens (a client stream here) is
// handed back, unanswered, for the front door to write.
func TestServe(t *testing.T) {
	const body = `{"jsonrpc":"2.0","id":1,"method":"x.Y.Z","params":{}}`
	e := &engine{kind: dispatch.ServerStream, msgs: []string{`{"seq":1}`, `{"seq":2}`}}
	for _, tc := range []struct {
		form Form
		want string
	}{
		{SSE, "data: {\"jsonrpc\":\"2.0\",\"method\":\"rpc.stream.message\",\"params\":{\"stream\":1,\"message\":{\"seq\":1}}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"method\":\"rpc.stream.message\",\"params\":{\"stream\":1,\"message\":{\"seq\":2}}}\n\n" +
			"data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"messages\":2}}\n\n"},
		{NDJSON, "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.stream.message\",\"params\":{\"stream\":1,\"message\":{\"seq\":1}}}\n" +
			"{\"jsonrpc\":\"2.0\",\"method\":\"rpc.stream.message\",\"params\":{\"stream\":1,\"message\":{\"seq\":2}}}\n" +
			"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"messages\":2}}\n"},
	} {
		w, reply, answered := serve(t, newServer(e), tc.form, body)
		if !answered || reply != nil {
			t.Fatalf("form %d: not answered live", tc.form)
		}
		if w.Code != http.StatusOK || w.Header().Get("Content-Type") != types[tc.form] ||
			w.Header().Get("Cache-Control") != "no-cache" || w.Header().Get("X-Accel-Buffering") != "no" {
			t.Errorf("form %d: got HTTP %d with %v", tc.form, w.Code, w.Header())
		}
		if got := w.Body.String(); got != tc.want {
			t.Errorf("form %d: got %q, want %q", tc.form, got, tc.want)
		}
	}

	w, reply, answered := serve(t, newServer(&engine{kind: dispatch.ClientStream}), SSE, body)
	if answered || string(reply) != `{"jsonrpc":"2.0","id":1,"result":[]}` || w.Body.Len() != 0 {
		t.Errorf("a call answered before its stream opened: got %q answered %v, body %q", reply, answered, w.Body)
	}
}

// TestDrain: a bridge that drains ends the live streams that open, with
// DRAINING as the cause of their context's end.
func TestDrain(t *testing.T) {
	e := &engine{kind: dispatch.ClientStream}
	s := newServer(e)
	s.Drain()
	serve(t, s, SSE, `{"jsonrpc":"2.0","id":1,"method":"x.Y.Z"}`)
	var end *dispatch.StreamEnd
	if !errors.As(context.Cause(e.ctx), &end) || end != errDraining {
		t.Errorf("got the cause %v, want errDraining", context.Cause(e.ctx))
	}
}
