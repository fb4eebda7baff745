package bridge_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/rpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// TestServerStreamByPosition: a server-streaming method takes its one
// request message by position, as a unary method does, over WebSocket
// (the stream opens) and from go-ethereum's client, which sends nothing
// but arrays; misfits are -32602 naming the position and the field. A
// client stream's array stays its list of request messages.
func TestServerStreamByPosition(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})

	t.Run("websocket", func(t *testing.T) {
		w := dialWS(t, e)
		for _, tt := range []struct {
			params, want string
		}{
			{`[2]`, `[{"seq":1},{"seq":2}]`},
			{`[]`, `[]`},
			{`[null]`, `[]`},
		} {
			id := w.open(serverStream, tt.params, 1)
			msgs, end := w.drain(id)
			got := make([]any, len(msgs))
			for i, m := range msgs {
				got[i] = m
			}
			if err := match(pattern(t, tt.want), got, "$"); err != nil || end != nil {
				t.Errorf("%s: messages %v, end %v; want %s and success (%v)", tt.params, msgs, end, tt.want, err)
			}
		}
		reply, _ := w.call(request(serverStream, `[1,2,3,4,"k",6,7]`, 2))
		want := `{"error":{"code":-32602,"message":"Invalid params: position 6: too many params by position: test.v1.StreamRequest has 6 fields","data":{"position":6}}}`
		if err := match(pattern(t, want), reply, "$"); err != nil {
			t.Errorf("too many: got %v, want %s (%v)", reply, want, err)
		}
		reply, _ = w.call(request(serverStream, `["two"]`, 3))
		want = `{"error":{"code":-32602,"message":"Invalid params: position 0 (count): want an integer (int32), got the string \"two\"","data":{"position":0,"field":"count"}}}`
		if err := match(pattern(t, want), reply, "$"); err != nil {
			t.Errorf("misfit: got %v, want %s (%v)", reply, want, err)
		}
		// A client stream's array is its request messages, over
		// WebSocket too.
		got := w.result(request(clientStream, `[{"text":"a"},{"text":"b"}]`, 4))
		if err := match(pattern(t, `{"count":2,"texts":["a","b"]}`), got, "$"); err != nil {
			t.Errorf("client stream: %v", err)
		}
	})

	t.Run("go-ethereum", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := rpc.DialContext(ctx, e.url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		type note struct {
			ID    string   `json:"id"`
			Title string   `json:"title"`
			Tags  []string `json:"tags"`
		}
		var notes []note
		if err := c.CallContext(ctx, &notes, "demo.v1.Notes.WatchNotes", []string{"intro"}); err != nil || len(notes) != 1 || notes[0].ID != "n1" {
			t.Errorf("WatchNotes([intro]) = %+v, %v; want the welcome note", notes, err)
		}
		notes = nil
		if err := c.CallContext(ctx, &notes, "demo.v1.Notes.WatchNotes"); err != nil || len(notes) == 0 {
			t.Errorf("WatchNotes() = %+v, %v; want every note", notes, err)
		}
		var seqs []map[string]any
		err = c.CallContext(ctx, &seqs, serverStream, "three")
		checkRPCError(t, `ServerStream("three")`, err, -32602,
			`Invalid params: position 0 (count): want an integer (int32), got the string "three"`, "")
		batch := []rpc.BatchElem{
			{Method: serverStream, Args: []any{3}, Result: &seqs},
			{Method: serverStream, Args: []any{1, 2, 3, 4, "k", 6, 7}, Result: new(any)},
		}
		if err := c.BatchCallContext(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if batch[0].Error != nil || len(seqs) != 3 {
			t.Errorf("batch ServerStream(3) = %v, %v; want 3 messages", seqs, batch[0].Error)
		}
		if batch[1].Error == nil || !strings.Contains(batch[1].Error.Error(), "position 6: too many params by position") {
			t.Errorf("batch ServerStream with 7 params: error %v, want too many by position", batch[1].Error)
		}
	})
}
