package dispatch

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// streamEngine is an Engine in front of the test services, and the test
// service's server.
func streamEngine(t *testing.T) (*Engine, *Table, *testv1.Server) {
	t.Helper()
	b := testserver.Start(t, testserver.Options{Dial: backend.DialOptions()})
	reg, err := bridgereflect.Discover(t.Context(), b.Conn())
	if err != nil {
		t.Fatal(err)
	}
	e := New(b.Conn(), Options{Logger: slog.New(slog.DiscardHandler), BatchParallelism: 4, CallTimeout: time.Minute,
		MaxCallTimeout: time.Minute, MaxResponseBytes: 1 << 20, MaxStreamMessages: 100, MaxStreamBytes: 1 << 20})
	e.Update(reg)
	return e, e.Table(), b.Test()
}

// recorder is a Sink that keeps every message, and refuses the one after
// the first refuseAfter with refuse.
type recorder struct {
	mu          sync.Mutex
	msgs        []string
	refuseAfter int
	refuse      error
	first       chan struct{} // closed on the first message, if not nil
}

func (r *recorder) Send(_ context.Context, msg []byte) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.refuse != nil && len(r.msgs) == r.refuseAfter {
		return r.refuse
	}
	r.msgs = append(r.msgs, string(msg))
	if r.first != nil && len(r.msgs) == 1 {
		close(r.first)
	}
	return nil
}

func (r *recorder) joined() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.msgs, ",")
}

func requests(t *testing.T, m *Method, params string) []proto.Message {
	t.Helper()
	reqs, err := RequestMessages(m, []byte(params))
	if err != nil {
		t.Fatal(err.Message)
	}
	return reqs
}

// TestPump: the engine opens a backend stream and hands each response to
// the sink as JSON, in order; the stream's end is nil when the backend
// completed it, the backend's status when it failed, the sink's error
// when the sink refused a message (the backend stream is then
// cancelled), and the StreamEnd a transport cancelled it with.
func TestPump(t *testing.T) {
	e, tbl, srv := streamEngine(t)
	server := tbl.Lookup([]byte("test.v1.TestService.ServerStream"))
	ctx := t.Context()

	sink := &recorder{}
	st, err := e.OpenStream(ctx, tbl, server, nil, requests(t, server, `{"count":3}`), nil)
	if err != nil {
		t.Fatal(err.Message)
	}
	if n, err := st.Pump(sink); n != 3 || err != nil {
		t.Fatalf("got %d messages and %v, want 3 and nil", n, err)
	}
	if got := sink.joined(); got != `{"seq":1},{"seq":2},{"seq":3}` {
		t.Errorf("got messages %s", got)
	}

	sink = &recorder{}
	st, _ = e.OpenStream(ctx, tbl, server, nil, requests(t, server, `{"count":5,"failCode":9,"failAfter":2}`), nil)
	if n, err := st.Pump(sink); n != 2 || err == nil || err.Code != 9 {
		t.Fatalf("got %d messages and %v, want 2 and code 9", n, err)
	}

	refusal := wire.SlowClient("stream_buffer", 1, time.Second)
	sink = &recorder{refuseAfter: 1, refuse: refusal}
	st, _ = e.OpenStream(ctx, tbl, server, nil, requests(t, server, `{"count":5,"hold":true,"key":"refused"}`), nil)
	if n, err := st.Pump(sink); n != 1 || err != refusal {
		t.Fatalf("got %d messages and %v, want 1 and the sink's refusal", n, err)
	}
	await.Receive(t, time.Minute, "the backend stream cancelled", srv.Cancelled("refused"))

	end := &StreamEnd{Err: wire.Status(5, "ENDED", "the transport ended it")}
	cctx, cancel := context.WithCancelCause(ctx)
	st, _ = e.OpenStream(cctx, tbl, server, nil, requests(t, server, `{"count":1,"hold":true,"key":"ended"}`), nil)
	sink = &recorder{first: make(chan struct{})}
	go func() {
		<-sink.first
		cancel(end)
	}()
	if n, err := st.Pump(sink); n != 1 || err != end.Err {
		t.Fatalf("got %d messages and %v, want 1 and the StreamEnd's error", n, err)
	}
}

// chanSource is a Source of the messages sent on a channel.
type chanSource chan proto.Message

func (c chanSource) Next(ctx context.Context) (proto.Message, bool) {
	select {
	case m, ok := <-c:
		return m, ok
	case <-ctx.Done():
		return nil, false
	}
}

// TestPumpSource: a bidi stream sends what its Source gives, after its
// first messages, and half-closes when the Source has no more.
func TestPumpSource(t *testing.T) {
	e, tbl, _ := streamEngine(t)
	bidi := tbl.Lookup([]byte("test.v1.TestService.BidiStream"))
	more := make(chanSource, 2)
	st, err := e.OpenStream(t.Context(), tbl, bidi, nil, requests(t, bidi, `[{"seq":1}]`), more)
	if err != nil {
		t.Fatal(err.Message)
	}
	m, merr := bidi.Codec.RequestMember("message", []byte(`{"seq":2,"text":"b"}`))
	if merr != nil {
		t.Fatal(merr.Message)
	}
	more <- m
	close(more)
	sink := &recorder{}
	if n, err := st.Pump(sink); n != 2 || err != nil {
		t.Fatalf("got %d messages and %v, want 2 and nil", n, err)
	}
	if got := sink.joined(); got != `{"seq":1},{"seq":2,"text":"b"}` {
		t.Errorf("got messages %s", got)
	}
}

// TestCollectProgress: a server stream answered in one reply whose
// transport gives a Sink (MCP's progress) shows it each message as it
// arrives, and the reply holds them all.
func TestCollectProgress(t *testing.T) {
	e, _, _ := streamEngine(t)
	progress := &recorder{}
	x := &Exchange{Streams: collectWith{progress}}
	var msg wire.Message
	if err := wire.Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.ServerStream","params":{"count":2}}`), 10, &msg); err != nil {
		t.Fatal(err.Message)
	}
	reply, _ := e.Run(t.Context(), &msg, x, nil, false)
	got := string(reply)
	if want := `{"jsonrpc":"2.0","id":1,"result":[{"seq":1},{"seq":2}]}`; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	if got := progress.joined(); got != `{"seq":1},{"seq":2}` {
		t.Errorf("progress saw %s", got)
	}
}

// collectWith is the Streams of a transport that collects every stream
// and shows each message to sink.
type collectWith struct{ sink Sink }

func (c collectWith) Stream(*Method, wire.Request) (Mode, Sink) { return Collect, c.sink }
