package bridge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

const (
	serverStream = "test.v1.TestService.ServerStream"
	clientStream = "test.v1.TestService.ClientStream"
	bidiStream   = "test.v1.TestService.BidiStream"
)

func request(method, params string, id int) string {
	if params == "" {
		return fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"id":%d}`, method, id)
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s,"id":%d}`, method, params, id)
}

func pattern(t testing.TB, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("bad pattern %s: %v", s, err)
	}
	return v
}

func TestStreamHTTP(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{MaxStreamMessages: 5, MaxStreamBytes: 1000}})
	tests := []struct {
		name   string
		method string
		params string
		want   string // pattern of the reply
		reason string // ErrorInfo reason of the error, if any
	}{
		{"server", serverStream, `{"count":3}`, `{"result":[{"seq":1},{"seq":2},{"seq":3}]}`, ""},
		{"server empty", serverStream, `{}`, `{"result":[]}`, ""},
		{"server no params", serverStream, ``, `{"result":[]}`, ""},
		{"server at the message limit", serverStream, `{"count":5}`, `{"result":[{"seq":1},{"seq":2},{"seq":3},{"seq":4},{"seq":5}]}`, ""},
		{"server error mid-stream", serverStream, `{"count":5,"failCode":9,"failAfter":2}`,
			`{"error":{"code":9,"message":"failed after 2 messages","data":{"status":"FAILED_PRECONDITION","details":[]}}}`, ""},
		{"server past the message limit", serverStream, `{"count":6}`,
			`{"error":{"code":8,"message":"*","data":{"status":"RESOURCE_EXHAUSTED"}}}`, "STREAM_TOO_MANY_MESSAGES"},
		{"server past the byte limit", serverStream, `{"count":4,"payloadSize":300}`,
			`{"error":{"code":8,"message":"*","data":{"status":"RESOURCE_EXHAUSTED"}}}`, "STREAM_TOO_LARGE"},
		{"server params by position", serverStream, `[3]`, `{"result":[{"seq":1},{"seq":2},{"seq":3}]}`, ""},
		{"server params by position empty", serverStream, `[]`, `{"result":[]}`, ""},
		{"server params by position misfit", serverStream, `[{"count":1}]`,
			`{"error":{"code":-32602,"message":"Invalid params: position 0 (count): want an integer (int32), got object","data":{"position":0,"field":"count"}}}`, ""},
		{"server params by position too many", serverStream, `[1,0,0,0,"k",0,0]`,
			`{"error":{"code":-32602,"message":"Invalid params: position 6: too many params by position: test.v1.StreamRequest has 6 fields","data":{"position":6}}}`, ""},
		{"server bad params", serverStream, `{"count":"x"}`, `{"error":{"code":-32602,"data":{"field":"count"}}}`, ""},
		{"client", clientStream, `[{"text":"a"},{"text":"b"}]`, `{"result":{"count":2,"texts":["a","b"]}}`, ""},
		{"client empty", clientStream, `[]`, `{"result":{}}`, ""},
		{"client error mid-stream", clientStream, `[{"text":"a"},{"seq":2,"failCode":3}]`,
			`{"error":{"code":3,"message":"item 2 failed","data":{"status":"INVALID_ARGUMENT","details":[]}}}`, ""},
		{"client params by name", clientStream, `{"text":"a"}`, `{"error":{"code":-32602}}`, ""},
		{"client no params", clientStream, ``, `{"error":{"code":-32602}}`, ""},
		{"client bad member", clientStream, `[{"text":"a"},{"seq":"x"}]`, `{"error":{"code":-32602,"data":{"field":"[1].seq"}}}`, ""},
		{"client member not an object", clientStream, `[{"text":"a"},3]`, `{"error":{"code":-32602,"data":{"field":"[1]"}}}`, ""},
		{"bidi", bidiStream, `[{"seq":1,"text":"a"},{"seq":2,"text":"b"}]`, `{"result":[{"seq":1,"text":"a"},{"seq":2,"text":"b"}]}`, ""},
		{"bidi empty", bidiStream, `[]`, `{"result":[]}`, ""},
		{"bidi error mid-stream", bidiStream, `[{"seq":1},{"seq":2,"failCode":5}]`,
			`{"error":{"code":5,"message":"item 2 failed","data":{"status":"NOT_FOUND","details":[]}}}`, ""},
		{"bidi past the message limit", bidiStream, `[{},{},{},{},{},{}]`, `{"error":{"code":8}}`, "STREAM_TOO_MANY_MESSAGES"},
		{"stream methods need WebSocket", "rpc.stream.cancel", `{"stream":"s1"}`, `{"error":{"code":-32601,"data":{"method":"rpc.stream.cancel"}}}`, ""},
		{"demo watch", "demo.v1.Notes.WatchNotes", `{"tags":["intro"]}`, `{"result":[{"id":"n1","title":"Welcome"}]}`, ""},
		{"demo watch by position", "demo.v1.Notes.WatchNotes", `[["intro"]]`, `{"result":[{"id":"n1","title":"Welcome"}]}`, ""},
		{"demo import", "demo.v1.Notes.ImportNotes", `[{"note":{"title":"a"}},{"note":{"title":"b"}}]`, `{"result":{"ids":["n2","n3"],"count":"2"}}`, ""},
		{"demo tag", "demo.v1.Notes.TagNotes", `[{"id":"n1","tag":"x"},{"id":"nope"}]`, `{"error":{"code":5,"message":"note \"nope\" not found"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reply := e.call(t, request(tt.method, tt.params, 7))
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
}

func TestStreamHTTPNotificationsAndBatches(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	if code, body := e.post(t, `{"jsonrpc":"2.0","method":"`+serverStream+`","params":{"count":3}}`); code != http.StatusNoContent {
		t.Errorf("notification: got HTTP %d %s, want 204", code, body)
	}
	if code, body := e.post(t, `{"jsonrpc":"2.0","method":"rpc.stream.cancel","params":{"stream":"s1"}}`); code != http.StatusNoContent {
		t.Errorf("notification of a stream method: got HTTP %d %s, want 204", code, body)
	}
	code, body := e.post(t, `[`+request(serverStream, `{"count":2}`, 1)+`,`+request(clientStream, `[{"text":"x"}]`, 2)+`,`+
		request("helloworld.Greeter.SayHello", `{"name":"b"}`, 3)+`]`)
	if code != http.StatusOK {
		t.Fatalf("batch: got HTTP %d %s", code, body)
	}
	want := `[{"id":1,"result":[{"seq":1},{"seq":2}]},{"id":2,"result":{"count":1,"texts":["x"]}},{"id":3,"result":{"message":"Hello, b!"}}]`
	if err := match(pattern(t, want), decode(t, body), "$"); err != nil {
		t.Errorf("batch: got %s\nwant %s\n%v", body, want, err)
	}
}

// TestStreamHTTPOrder receives the default maximum of messages over HTTP.
func TestStreamHTTPOrder(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	n := bridge.DefaultMaxStreamMessages
	reply := e.call(t, request(serverStream, fmt.Sprintf(`{"count":%d}`, n), 1))
	got, ok := reply["result"].([]any)
	if !ok || len(got) != n {
		t.Fatalf("got %d messages, want %d", len(got), n)
	}
	for i, m := range got {
		if seq := m.(map[string]any)["seq"].(json.Number).String(); seq != fmt.Sprint(i+1) {
			t.Fatalf("message %d has seq %s", i, seq)
		}
	}
}
