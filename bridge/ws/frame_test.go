package ws

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
)

// TestParseControl: the params of the stream methods, by name or by
// position; anything else is invalid params.
func TestParseControl(t *testing.T) {
	for _, tc := range []struct {
		params  string
		message bool
		stream  string // "" for invalid
		msg     string
	}{
		{`{"stream":"s1"}`, false, "s1", ""},
		{`["s1"]`, false, "s1", ""},
		{`{"stream":"s2","message":{"a":1}}`, true, "s2", `{"a":1}`},
		{`["s2",{"a":1}]`, true, "s2", `{"a":1}`},
		{`{"stream":"s1","message":{}}`, false, "", ""}, // close and cancel take no message
		{`["s1",{}]`, false, "", ""},
		{`{"stream":"s1"}`, true, "", ""}, // send needs one
		{`{"stream":"s1","extra":1}`, false, "", ""},
		{`{"stream":""}`, false, "", ""},
		{`[]`, false, "", ""},
		{`[1]`, false, "", ""},
		{`"s1"`, false, "", ""},
	} {
		p, e := parseControl([]byte(tc.params), tc.message)
		switch {
		case tc.stream == "" && e == nil:
			t.Errorf("%s (message %v): got %+v, want invalid params", tc.params, tc.message, p)
		case tc.stream == "":
			if e.Code != -32602 {
				t.Errorf("%s: got code %d, want -32602", tc.params, e.Code)
			}
		case e != nil:
			t.Errorf("%s (message %v): got %s", tc.params, tc.message, e.Message)
		case p.Stream != tc.stream || string(p.Message) != tc.msg:
			t.Errorf("%s: got stream %q message %s", tc.params, p.Stream, p.Message)
		}
	}
}

// TestRefuseFrame: a frame none of whose calls may run gets the error for
// each call with an id, as a batch when it is one; notifications get
// none, and a frame of notifications alone no reply.
func TestRefuseFrame(t *testing.T) {
	e := wire.Refused(codes.ResourceExhausted, "busy")
	for _, tc := range []struct{ frame, want string }{
		{`{"jsonrpc":"2.0","method":"a","id":1}`, `{"jsonrpc":"2.0","id":1,"error":{"code":8,"message":"busy","data":{"status":"RESOURCE_EXHAUSTED","details":[]}}}`},
		{`[{"jsonrpc":"2.0","method":"a","id":1},{"jsonrpc":"2.0","method":"n"},{"jsonrpc":"2.0","method":"b","id":"x"}]`,
			`[{"jsonrpc":"2.0","id":1,"error":{"code":8,"message":"busy","data":{"status":"RESOURCE_EXHAUSTED","details":[]}}},{"jsonrpc":"2.0","id":"x","error":{"code":8,"message":"busy","data":{"status":"RESOURCE_EXHAUSTED","details":[]}}}]`},
		{`[{"jsonrpc":"2.0","method":"n"}]`, ``},
		{`{"jsonrpc":"2.0","method":"n"}`, ``},
	} {
		var msg wire.Message
		if perr := wire.Parse([]byte(tc.frame), 10, &msg); perr != nil {
			t.Fatal(perr.Message)
		}
		if got := string(refuseFrame(&msg, e)); got != tc.want {
			t.Errorf("%s: got %s, want %s", tc.frame, got, tc.want)
		}
	}
}
