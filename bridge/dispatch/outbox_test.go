package dispatch

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// slowLimit is the limit a SLOW_CLIENT error names.
func slowLimit(t *testing.T, err error) string {
	t.Helper()
	me, ok := err.(*mapping.Error)
	if !ok || me.Code != 8 || !strings.Contains(string(wire.AppendErrorObject(nil, me)), `"SLOW_CLIENT"`) {
		t.Fatalf("got %v, want SLOW_CLIENT", err)
	}
	b := string(wire.AppendErrorObject(nil, me))
	for _, l := range []string{"stream_buffer_bytes", "ws_buffer_bytes", "stream_buffer"} {
		if strings.Contains(b, `"limit":"`+l+`"`) {
			return l
		}
	}
	t.Fatalf("SLOW_CLIENT without a limit: %s", b)
	return ""
}

// TestOutboxSlowClient: a message that finds no room for slow_client_timeout
// ends the stream with SLOW_CLIENT, naming the limit that was full: the
// messages waiting, their bytes, or the bytes shared with the connection.
func TestOutboxSlowClient(t *testing.T) {
	limits := Limits{Messages: 2, Bytes: 10, SlowClient: 20 * time.Millisecond}
	ctx := context.Background()

	o := NewOutbox(limits, nil)
	o.Put([]byte("a"))
	o.Put([]byte("b"))
	if got := slowLimit(t, o.Wait(ctx)); got != "stream_buffer" {
		t.Errorf("two messages waiting: got limit %s, want stream_buffer", got)
	}

	o = NewOutbox(limits, nil)
	if err := o.Wait(ctx); err != nil {
		t.Fatalf("an empty outbox has room: %v", err)
	}
	o.Put([]byte("0123456789ab")) // one message always goes when none waits
	if got := slowLimit(t, o.Wait(ctx)); got != "stream_buffer_bytes" {
		t.Errorf("12 bytes waiting: got limit %s, want stream_buffer_bytes", got)
	}

	shared := &Shared{Limit: 4, Name: "ws_buffer_bytes"}
	shared.Add(4) // a reply waiting for the socket
	o = NewOutbox(limits, shared)
	if got := slowLimit(t, o.Wait(ctx)); got != "ws_buffer_bytes" {
		t.Errorf("the connection's bytes full: got limit %s, want ws_buffer_bytes", got)
	}
}

// TestOutboxRoom: a Wait for room returns once the writer wrote what
// waited, or once the connection's bytes leave; a failed writer and an
// ended context end it.
func TestOutboxRoom(t *testing.T) {
	limits := Limits{Messages: 1, Bytes: 1 << 10, SlowClient: time.Minute}
	ctx := context.Background()
	o := NewOutbox(limits, nil)
	o.Put([]byte("a"))
	waited := make(chan error, 1)
	go func() { waited <- o.Wait(ctx) }()
	<-o.Wake()
	batch, last, closed := o.Take(nil)
	if len(batch) != 1 || string(batch[0]) != "a" || last != nil || closed {
		t.Fatalf("Take: got %q %q %v", batch, last, closed)
	}
	o.Written(batch)
	if err := await.Receive(t, time.Minute, "room", waited); err != nil {
		t.Fatalf("after the write: got %v, want room", err)
	}

	shared := &Shared{Limit: 4, Name: "ws_buffer_bytes"}
	shared.Add(4)
	o = NewOutbox(limits, shared)
	go func() { waited <- o.Wait(ctx) }()
	shared.Done(4)
	if err := await.Receive(t, time.Minute, "room", waited); err != nil {
		t.Fatalf("after the connection's bytes left: got %v, want room", err)
	}

	o = NewOutbox(limits, nil)
	o.Put([]byte("a"))
	go func() { waited <- o.Wait(ctx) }()
	o.Fail()
	if err := await.Receive(t, time.Minute, "the end", waited); err != errGone {
		t.Fatalf("after the writer failed: got %v, want errGone", err)
	}

	o = NewOutbox(limits, nil)
	o.Put([]byte("a"))
	cctx, cancel := context.WithCancel(ctx)
	go func() { waited <- o.Wait(cctx) }()
	cancel()
	if err := await.Receive(t, time.Minute, "the end", waited); err != errGone {
		t.Fatalf("after the context ended: got %v, want errGone", err)
	}
}

// TestOutboxClose: the last message comes after every one queued before,
// whatever the limits, and the shared bytes are given back as messages
// are written.
func TestOutboxClose(t *testing.T) {
	shared := &Shared{Limit: 100, Name: "ws_buffer_bytes"}
	o := NewOutbox(Limits{Messages: 1, Bytes: 1, SlowClient: time.Minute}, shared)
	o.Put([]byte("ab"))
	o.Close([]byte("end"))
	batch, last, closed := o.Take(nil)
	if len(batch) != 1 || string(batch[0]) != "ab" || string(last) != "end" || !closed {
		t.Fatalf("Take: got %q %q %v, want [ab] end true", batch, last, closed)
	}
	o.Written(batch)
	shared.mu.Lock()
	left := shared.bytes
	shared.mu.Unlock()
	if left != 0 {
		t.Errorf("the connection still counts %d bytes", left)
	}
}
