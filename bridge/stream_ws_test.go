package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// open calls a streaming method over w and returns the stream id.
func (w *wsClient) open(method, params string, id int) string {
	w.t.Helper()
	reply, notes := w.call(request(method, params, id))
	if len(notes) > 0 {
		w.t.Fatalf("got notifications %v before the reply that opens the stream", notes)
	}
	return streamID(w.t, reply)
}

// result makes a call and returns the result of its reply. Notifications
// that come first are kept for recv.
func (w *wsClient) result(frame string) any {
	w.t.Helper()
	reply, _ := w.call(frame)
	if e, ok := reply["error"]; ok {
		w.t.Fatalf("%s: got error %v", frame, e)
	}
	return reply["result"]
}

func control(method, stream string, message string, id int) string {
	if message == "" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":{"stream":%q},"id":%d}`, method, stream, id)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":{"stream":%q,"message":%s},"id":%d}`, method, stream, message, id)
}

func TestStreamWS(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	tests := []struct {
		name    string
		method  string
		params  string   // "" opens an incremental stream
		sends   []string // messages sent with rpc.stream.send, then rpc.stream.close
		want    string   // pattern of the messages
		wantErr string   // pattern of the end's error; "" for success
	}{
		{name: "server", method: serverStream, params: `{"count":3}`, want: `[{"seq":1},{"seq":2},{"seq":3}]`},
		{name: "server empty", method: serverStream, params: `{}`, want: `[]`},
		{name: "server error mid-stream", method: serverStream, params: `{"count":5,"failCode":9,"failAfter":2}`,
			want: `[{"seq":1},{"seq":2}]`, wantErr: `{"code":9,"message":"failed after 2 messages","data":{"status":"FAILED_PRECONDITION","details":[]}}`},
		{name: "client incremental", method: clientStream, sends: []string{`{"text":"a"}`, `{"text":"b"}`},
			want: `[{"count":2,"texts":["a","b"]}]`},
		{name: "client incremental empty", method: clientStream, sends: []string{}, want: `[{}]`},
		{name: "client incremental error", method: clientStream, sends: []string{`{"text":"a"}`, `{"seq":2,"failCode":3}`},
			want: `[]`, wantErr: `{"code":3,"message":"item 2 failed"}`},
		{name: "bidi array", method: bidiStream, params: `[{"seq":1,"text":"a"},{"seq":2,"text":"b"}]`,
			want: `[{"seq":1,"text":"a"},{"seq":2,"text":"b"}]`},
		{name: "bidi array empty", method: bidiStream, params: `[]`, want: `[]`},
		{name: "bidi array error mid-stream", method: bidiStream, params: `[{"seq":1},{"seq":2,"failCode":5},{"seq":3}]`,
			want: `[{"seq":1}]`, wantErr: `{"code":5,"data":{"status":"NOT_FOUND"}}`},
		{name: "bidi incremental", method: bidiStream, sends: []string{`{"seq":1,"text":"a"}`, `{"seq":2,"text":"b"}`},
			want: `[{"seq":1,"text":"a"},{"seq":2,"text":"b"}]`},
		{name: "bidi incremental empty", method: bidiStream, sends: []string{}, want: `[]`},
		{name: "demo watch", method: "demo.v1.Notes.WatchNotes", params: `{}`, want: `[{"id":"n1","title":"Welcome"}]`},
		{name: "demo import", method: "demo.v1.Notes.ImportNotes", sends: []string{`{"note":{"title":"a"}}`, `{"note":{}}`},
			want: `[]`, wantErr: `{"code":3,"message":"note title is required"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := dialWS(t, e)
			id := w.open(tt.method, tt.params, 1)
			if tt.sends != nil {
				for i, m := range tt.sends {
					if got := w.result(control("rpc.stream.send", id, m, 10+i)); got != true {
						t.Fatalf("send: got result %v, want true", got)
					}
				}
				// After an error the stream may have ended already.
				if got := w.result(control("rpc.stream.close", id, "", 2)); got != true && (tt.wantErr == "" || got != false) {
					t.Fatalf("close: got result %v, want true", got)
				}
			}
			msgs, end := w.drain(id)
			got := make([]any, len(msgs))
			for i, m := range msgs {
				got[i] = m
			}
			if err := match(pattern(t, tt.want), got, "$"); err != nil {
				t.Errorf("messages: got %v\nwant %s\n%v", msgs, tt.want, err)
			}
			switch {
			case tt.wantErr == "" && end != nil:
				t.Errorf("end: got error %v, want success", end)
			case tt.wantErr != "" && end == nil:
				t.Errorf("end: got success, want error %s", tt.wantErr)
			case tt.wantErr != "":
				if err := match(pattern(t, tt.wantErr), end, "$"); err != nil {
					t.Errorf("end: got %v\nwant %s\n%v", end, tt.wantErr, err)
				}
			}
			// Every stream method now fails or says false: the stream is gone.
			reply, _ := w.call(control("rpc.stream.cancel", id, "", 3))
			if reply["result"] != false {
				t.Errorf("cancel after the end: got %v, want result false", reply)
			}
		})
	}
}

func TestStreamWSClientArray(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	w := dialWS(t, e)
	// A client-streaming call with all its messages is answered at once.
	got := w.result(request(clientStream, `[{"text":"a"},{"text":"b"}]`, 1))
	if err := match(pattern(t, `{"count":2,"texts":["a","b"]}`), got, "$"); err != nil {
		t.Error(err)
	}
	reply, _ := w.call(request(clientStream, `[{"text":"a"},{"failCode":7}]`, 2))
	if err := match(pattern(t, `{"error":{"code":7,"data":{"status":"PERMISSION_DENIED"}}}`), reply, "$"); err != nil {
		t.Error(err)
	}
	if got := w.result(request(clientStream, `[]`, 3)); fmt.Sprint(got) != "map[]" {
		t.Errorf("empty: got %v, want {}", got)
	}
}

// TestStreamWSDuplex sends each message of a bidirectional stream only
// after the answer to the one before has arrived.
func TestStreamWSDuplex(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	w := dialWS(t, e)
	id := w.open(bidiStream, "", 1)
	for i := range 5 {
		w.send(control("rpc.stream.send", id, fmt.Sprintf(`{"seq":%d,"text":"t%d"}`, i+1, i), 100+i))
		var sawReply, sawEcho bool
		for !sawReply || !sawEcho {
			m := w.recv()
			if m["id"] != nil {
				if m["result"] != true {
					t.Fatalf("send: got %v, want result true", m)
				}
				sawReply = true
				continue
			}
			msg := m["params"].(map[string]any)["message"].(map[string]any)
			if msg["seq"].(json.Number).String() != fmt.Sprint(i+1) {
				t.Fatalf("got %v, want the answer to message %d", m, i+1)
			}
			sawEcho = true
		}
	}
	w.result(control("rpc.stream.close", id, "", 2))
	if msgs, end := w.drain(id); len(msgs) != 0 || end != nil {
		t.Errorf("after close: got %v and end %v, want a bare end", msgs, end)
	}
}

func TestStreamWSControlErrors(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{MaxStreamsPerConnection: 2, StreamBuffer: 1}})
	w := dialWS(t, e)
	server := w.open(serverStream, `{"count":1,"hold":true}`, 1)
	if m := w.recv(); m["method"] != "rpc.stream.message" {
		t.Fatalf("got %v, want a message", m)
	}
	bidi := w.open(bidiStream, "", 2)
	tests := []struct {
		name   string
		frame  string
		want   string
		reason string
	}{
		{"unknown stream", control("rpc.stream.send", "s99", `{}`, 10), `{"error":{"code":-32602,"data":{"stream":"s99"}}}`, ""},
		{"send to a server stream", control("rpc.stream.send", server, `{}`, 11), `{"error":{"code":-32602,"data":{"stream":"s1"}}}`, ""},
		{"close a server stream", control("rpc.stream.close", server, "", 12), `{"error":{"code":-32602}}`, ""},
		{"close unknown", control("rpc.stream.close", "s99", "", 22), `{"result":false}`, ""},
		{"no message", control("rpc.stream.send", bidi, "", 13), `{"error":{"code":-32602}}`, ""},
		{"bad message", control("rpc.stream.send", bidi, `{"seq":"x"}`, 14), `{"error":{"code":-32602,"data":{"field":"message.seq"}}}`, ""},
		{"unknown member", `{"jsonrpc":"2.0","method":"rpc.stream.cancel","params":{"stream":"s1","x":1},"id":15}`, `{"error":{"code":-32602}}`, ""},
		{"cancel unknown", control("rpc.stream.cancel", "s99", "", 16), `{"result":false}`, ""},
		{"notification method", control("rpc.stream.message", bidi, `{}`, 17), `{"error":{"code":-32601}}`, ""},
		{"unknown method", control("rpc.stream.nope", bidi, "", 18), `{"error":{"code":-32601}}`, ""},
		{"too many streams", request(serverStream, `{}`, 19), `{"error":{"code":8,"data":{"status":"RESOURCE_EXHAUSTED"}}}`, "TOO_MANY_STREAMS"},
		{"by position", `{"jsonrpc":"2.0","method":"rpc.stream.send","params":["` + bidi + `",{"seq":1}],"id":20}`, `{"result":true}`, ""},
		{"client stream by name", request(clientStream, `{"text":"a"}`, 21), `{"error":{"code":-32602}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply, _ := w.call(tt.frame)
			if err := match(pattern(t, tt.want), reply, "$"); err != nil {
				t.Errorf("got %v\nwant %s\n%v", reply, tt.want, err)
			}
			if tt.reason != "" {
				if got := errReason(reply["error"].(map[string]any)); got != tt.reason {
					t.Errorf("got reason %q, want %q", got, tt.reason)
				}
			}
		})
	}
	// The answer to the message sent by position comes back.
	if msgs := w.recv(); msgs["method"] != "rpc.stream.message" {
		t.Fatalf("got %v, want the bidi answer", msgs)
	}
	w.result(control("rpc.stream.close", bidi, "", 30))
	if got, ok := w.result(control("rpc.stream.close", bidi, "", 31)).(bool); !ok {
		t.Errorf("second close: got %v, want true, or false once the stream ended", got)
	}
	reply, _ := w.call(control("rpc.stream.send", bidi, `{}`, 32))
	if reply["error"] == nil {
		t.Errorf("send after close: got %v, want an error", reply)
	}
	if msgs, end := w.drain(bidi); len(msgs) != 0 || end != nil {
		t.Errorf("bidi: got %v, %v; want a bare end", msgs, end)
	}
	if got := w.result(control("rpc.stream.cancel", server, "", 33)); got != true {
		t.Errorf("cancel: got %v, want true", got)
	}
	if _, end := w.drain(server); end == nil || code(end) != 1 || errReason(end) != "CANCELLED_BY_CLIENT" {
		t.Errorf("cancelled stream: got end %v, want CANCELLED (1) by the client", end)
	}
	// With both streams ended, new ones open again.
	id := w.open(serverStream, `{"count":1}`, 40)
	if msgs, end := w.drain(id); len(msgs) != 1 || end != nil {
		t.Errorf("got %v, %v; want one message", msgs, end)
	}
}

// TestStreamWSCancel cancels a stream by id and another by closing the
// connection; the backend must see both.
func TestStreamWSCancel(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	for _, method := range []string{serverStream, bidiStream} {
		t.Run(method+" by id", func(t *testing.T) {
			w := dialWS(t, e)
			key := "cancel-" + method
			var id string
			if method == serverStream {
				id = w.open(method, `{"count":1,"hold":true,"key":"`+key+`"}`, 1)
			} else {
				id = w.open(method, `[{"seq":1,"key":"`+key+`"}]`, 1)
			}
			if m := w.recv(); m["method"] != "rpc.stream.message" {
				t.Fatalf("got %v, want a message", m)
			}
			if method == bidiStream {
				// The array form half-closes, which ends the echo;
				// this bidi test needs the incremental form instead.
				w.drain(id)
				id = w.open(method, "", 2)
				w.result(control("rpc.stream.send", id, `{"seq":1,"key":"`+key+`"}`, 3))
				if m := w.recv(); m["method"] != "rpc.stream.message" {
					t.Fatalf("got %v, want a message", m)
				}
			}
			if got := w.result(control("rpc.stream.cancel", id, "", 4)); got != true {
				t.Fatalf("cancel: got %v, want true", got)
			}
			waitFor(t, e.backend.Cancelled(key), "the backend to see the cancellation")
			if _, end := w.drain(id); end == nil || code(end) != 1 {
				t.Errorf("got end %v, want CANCELLED (1)", end)
			}
		})
	}
	t.Run("by closing the connection", func(t *testing.T) {
		w := dialWS(t, e)
		for i, key := range []string{"close-a", "close-b"} {
			w.open(serverStream, `{"count":1,"hold":true,"key":"`+key+`"}`, i)
			if m := w.recv(); m["method"] != "rpc.stream.message" {
				t.Fatalf("got %v, want a message", m)
			}
		}
		w.c.CloseNow()
		waitFor(t, e.backend.Cancelled("close-a"), "the backend to see stream a cancelled")
		waitFor(t, e.backend.Cancelled("close-b"), "the backend to see stream b cancelled")
	})
	t.Run("by a client that answers no ping", func(t *testing.T) {
		e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{WSPingInterval: 20 * time.Millisecond}})
		w := dialWS(t, e)
		w.open(serverStream, `{"count":1,"hold":true,"key":"ping"}`, 1)
		// From here on nothing reads the connection, so pongs never go out.
		waitFor(t, e.backend.Cancelled("ping"), "the bridge to give up on the client")
	})
}

// TestStreamWSOrder streams 10,000 messages and checks each arrives, in
// order.
func TestStreamWSOrder(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	w := dialWS(t, e)
	const n = 10000
	id := w.open(serverStream, fmt.Sprintf(`{"count":%d}`, n), 1)
	msgs, end := w.drain(id)
	if end != nil {
		t.Fatalf("end: %v", end)
	}
	if len(msgs) != n {
		t.Fatalf("got %d messages, want %d", len(msgs), n)
	}
	for i, m := range msgs {
		if seq := m["seq"].(json.Number).String(); seq != fmt.Sprint(i+1) {
			t.Fatalf("message %d has seq %s", i, seq)
		}
	}
}

// TestWSPing keeps a connection with a short ping interval alive through
// several pings answered by a reading client.
func TestWSPing(t *testing.T) {
	checkLeaks(t)
	// Each pong must come back within the interval: short, but not so
	// short that a loaded machine misses it.
	e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{WSPingInterval: 100 * time.Millisecond}})
	pings := make(chan struct{}, 100)
	w := dialWSWith(t, e, &websocket.DialOptions{OnPingReceived: func(context.Context, []byte) bool {
		pings <- struct{}{}
		return true
	}})
	read := make(chan map[string]any, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		b, err := w.recvRaw()
		if err != nil {
			read <- nil
			return
		}
		m, _ := decode(t, b).(map[string]any)
		read <- m
	})
	for range 3 {
		select {
		case <-pings:
		case <-time.After(waitTimeout):
			t.Fatal("no ping came")
		}
	}
	w.send(request("helloworld.Greeter.SayHello", `{}`, 1))
	if m := <-read; m == nil || m["result"] == nil {
		t.Fatalf("after pings: got %v, want a reply", m)
	}
}

// TestStreamWSSlowClient stops reading a large stream: the bridge must
// cancel it with the documented error instead of buffering it.
func TestStreamWSSlowClient(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{StreamBuffer: 8, SlowClientTimeout: 100 * time.Millisecond, WSPingInterval: -1}})
	w := dialWS(t, e)
	var before runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	const n, size = 1_000_000, 1024 // 1 GB if buffered whole
	id := w.open(serverStream, fmt.Sprintf(`{"count":%d,"payloadSize":%d,"key":"slow"}`, n, size), 1)
	waitFor(t, e.backend.Cancelled("slow"), "the bridge to cancel the stream")
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("heap grew by %d KiB while the client did not read", grown>>10)
	if grown > 64<<20 {
		t.Errorf("heap grew by %d MiB, want at most 64", grown>>20)
	}
	msgs, end := w.drain(id)
	if len(msgs) >= n {
		t.Errorf("got all %d messages, want the stream cut short", len(msgs))
	}
	for i, m := range msgs {
		if seq := m["seq"].(json.Number).String(); seq != fmt.Sprint(i+1) {
			t.Fatalf("message %d has seq %s", i, seq)
		}
	}
	if end == nil || code(end) != 8 || errReason(end) != "SLOW_CLIENT" {
		t.Fatalf("got end %v, want RESOURCE_EXHAUSTED (8) with reason SLOW_CLIENT", end)
	}
	// The connection still works.
	w.result(request("helloworld.Greeter.SayHello", `{}`, 2))
}

// TestStreamWSInterleaved runs 100 streams and 1,000 unary calls at once on
// one connection: every call gets exactly one reply, every stream every
// message, after the reply that opened it.
func TestStreamWSInterleaved(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	w := dialWS(t, e)
	const streams, unaries, perStream = 100, 1000, 20

	type result struct {
		replies  map[int64]map[string]any
		messages map[string][]int64 // by stream id
		ends     map[string]map[string]any
		err      error
	}
	done := make(chan result, 1)
	var wg sync.WaitGroup
	wg.Go(func() {
		r := result{replies: map[int64]map[string]any{}, messages: map[string][]int64{}, ends: map[string]map[string]any{}}
		defer func() { done <- r }()
		opened := map[string]bool{}
		for len(r.replies) < streams+unaries || len(r.ends) < streams {
			b, err := w.recvRaw()
			if err != nil {
				r.err = err
				return
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				r.err = err
				return
			}
			if id, ok := m["id"].(float64); ok {
				if _, dup := r.replies[int64(id)]; dup {
					r.err = fmt.Errorf("second reply to %v", id)
					return
				}
				r.replies[int64(id)] = m
				if res, ok := m["result"].(map[string]any); ok && res["stream"] != nil {
					opened[res["stream"].(string)] = true
				}
				continue
			}
			p := m["params"].(map[string]any)
			sid := p["stream"].(string)
			if !opened[sid] {
				r.err = fmt.Errorf("notification %s before the reply that opened its stream", b)
				return
			}
			if m["method"] == "rpc.stream.end" {
				r.ends[sid] = m
				continue
			}
			r.messages[sid] = append(r.messages[sid], int64(p["message"].(map[string]any)["seq"].(float64)))
		}
	})
	for i := range streams + unaries {
		if i%11 == 0 {
			w.send(request(serverStream, fmt.Sprintf(`{"count":%d}`, perStream), i))
		} else {
			w.send(request("test.v1.TestService.Count", `{"key":"interleaved"}`, i))
		}
	}
	r := <-done
	wg.Wait()
	if r.err != nil {
		t.Fatal(r.err)
	}
	for i := range streams + unaries {
		reply := r.replies[int64(i)]
		if reply == nil || reply["error"] != nil {
			t.Fatalf("call %d: got %v", i, reply)
		}
		if i%11 != 0 {
			continue
		}
		sid := reply["result"].(map[string]any)["stream"].(string)
		if end := r.ends[sid]; end["params"].(map[string]any)["error"] != nil {
			t.Errorf("stream %s: ended with %v", sid, end)
		}
		seqs := r.messages[sid]
		if len(seqs) != perStream {
			t.Fatalf("stream %s: got %d messages, want %d", sid, len(seqs), perStream)
		}
		for j, s := range seqs {
			if s != int64(j+1) {
				t.Fatalf("stream %s: message %d has seq %d", sid, j, s)
			}
		}
	}
	if got := e.backend.Calls("interleaved"); got != unaries {
		t.Errorf("backend counted %d calls, want %d", got, unaries)
	}
}

// TestStreamWSAuth authenticates at the upgrade and authorises each call
// on the connection: a caller allowed a streaming method may also use the
// stream methods on its streams, whatever its patterns say of "rpc.".
func TestStreamWSAuth(t *testing.T) {
	checkLeaks(t)
	watcher := bridge.Identity{Name: "watcher", Tokens: []string{hashToken("watcher-token-0123456789")},
		Allow: []string{serverStream, bidiStream}}
	e := newEnv(t, bridge.Options{Auth: newAuth(t, watcher)})
	for _, tt := range []struct {
		name   string
		header http.Header
	}{
		{"no credentials", nil},
		{"wrong token", http.Header{"Authorization": {"Bearer wrong-token-0123456789"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
			defer cancel()
			c, resp, err := websocket.Dial(ctx, e.url+"/ws", &websocket.DialOptions{HTTPHeader: tt.header})
			if err == nil {
				c.CloseNow()
				t.Fatal("the upgrade succeeded, want HTTP 401")
			}
			if resp == nil || resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("got %v, want HTTP 401", err)
			}
		})
	}
	w := dialWSWith(t, e, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer watcher-token-0123456789"}}})
	server := w.open(serverStream, `{"count":1,"hold":true,"key":"auth"}`, 1)
	if m := w.recv(); m["method"] != "rpc.stream.message" {
		t.Fatalf("got %v, want a message", m)
	}
	bidi := w.open(bidiStream, "", 2)
	if got := w.result(control("rpc.stream.send", bidi, `{"seq":1}`, 3)); got != true {
		t.Errorf("send: got %v, want true", got)
	}
	if got := w.result(control("rpc.stream.close", bidi, "", 4)); got != true {
		t.Errorf("close: got %v, want true", got)
	}
	if msgs, end := w.drain(bidi); len(msgs) != 1 || end != nil {
		t.Errorf("bidi: got %v, end %v; want one message and success", msgs, end)
	}
	if got := w.result(control("rpc.stream.cancel", server, "", 5)); got != true {
		t.Errorf("cancel: got %v, want true", got)
	}
	waitFor(t, e.backend.Cancelled("auth"), "the backend to see the cancellation")
	if _, end := w.drain(server); end == nil || code(end) != 1 {
		t.Errorf("got end %v, want CANCELLED (1)", end)
	}
	for i, m := range []string{clientStream, "helloworld.Greeter.SayHello"} {
		reply, _ := w.call(request(m, "", 10+i))
		if err := match(pattern(t, `{"error":{"code":7,"data":{"status":"PERMISSION_DENIED"}}}`), reply, "$"); err != nil {
			t.Errorf("%s: got %v, want PERMISSION_DENIED\n%v", m, reply, err)
		}
	}
}
