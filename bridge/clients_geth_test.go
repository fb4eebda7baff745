package bridge_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/rpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestGoEthereumClient calls a real bridge on loopback, in front of a real
// backend, with go-ethereum's rpc client, which sends params by position
// only: single calls, a batch, errors and a notification.
func TestGoEthereumClient(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, transport := range []string{"http", "websocket"} {
		t.Run(transport, func(t *testing.T) {
			url := e.url
			if transport == "websocket" {
				url = "ws" + strings.TrimPrefix(e.url, "http") + "/ws"
			}
			c, err := rpc.DialContext(ctx, url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			testGoEthereumCalls(ctx, t, c)
		})
	}
}

func testGoEthereumCalls(ctx context.Context, t *testing.T, c *rpc.Client) {
	type reply struct {
		Message string `json:"message"`
	}
	type note struct {
		ID    string   `json:"id"`
		Title string   `json:"title"`
		Tags  []string `json:"tags"`
	}

	// By position: one string, nothing, null, a message, 64-bit integers.
	var hello reply
	if err := c.CallContext(ctx, &hello, "helloworld.Greeter.SayHello", "Ada"); err != nil || hello.Message != "Hello, Ada!" {
		t.Errorf("SayHello(\"Ada\") = %+v, %v; want Hello, Ada!", hello, err)
	}
	if err := c.CallContext(ctx, &hello, "helloworld.Greeter.SayHello"); err != nil || hello.Message != "Hello, world!" {
		t.Errorf("SayHello() = %+v, %v; want Hello, world!", hello, err)
	}
	if err := c.CallContext(ctx, &hello, "helloworld.Greeter.SayHello", nil); err != nil || hello.Message != "Hello, world!" {
		t.Errorf("SayHello(nil) = %+v, %v; want Hello, world! (null leaves the field unset)", hello, err)
	}
	var before, after counter
	if err := c.CallContext(ctx, &before, "demo.v1.Notes.GetCounter"); err != nil {
		t.Fatalf("GetCounter(): %v", err)
	}
	var n note
	if err := c.CallContext(ctx, &n, "demo.v1.Notes.CreateNote", map[string]any{"title": "geth", "tags": []string{"eth"}}); err != nil ||
		n.ID == "" || n.Title != "geth" || !slices.Equal(n.Tags, []string{"eth"}) {
		t.Errorf("CreateNote({title: geth, tags: [eth]}) = %+v, %v; want the new note", n, err)
	}
	// 2^53 + 1 as a string keeps every digit; the bridge answers int64 as strings.
	var big counter
	if err := c.CallContext(ctx, &big, "demo.v1.Notes.Increment", "9007199254740993"); err != nil {
		t.Fatalf("Increment(\"9007199254740993\"): %v", err)
	}
	if want := strconv.FormatInt(counterValue(before)+9007199254740993, 10); big.Value != want {
		t.Errorf("Increment(\"9007199254740993\") = %+v, want %s", big, want)
	}
	var back counter // a zero value is left out of the result: decode into a fresh one
	if err := c.CallContext(ctx, &back, "demo.v1.Notes.Increment", int64(-9007199254740993)); err != nil || back.Value != before.Value {
		t.Errorf("Increment(-9007199254740993) = %+v, %v; want %q back", back, err, before.Value)
	}
	var got note
	if err := c.CallContext(ctx, &got, "demo.v1.Notes.GetNote", n.ID); err != nil || got.ID != n.ID {
		t.Errorf("GetNote(%q) = %+v, %v", n.ID, got, err)
	}

	// A notification over HTTP: the bridge answers 204 without a body, as
	// the specification wants; go-ethereum then reports io.EOF (it expects
	// a body), but the call is made.
	if err := c.Notify(ctx, "demo.v1.Notes.Increment", 2); err != nil {
		t.Logf("Notify: %v", err)
	}
	var inc counter
	if err := c.CallContext(ctx, &inc, "demo.v1.Notes.Increment", 3); err != nil {
		t.Fatalf("Increment(3): %v", err)
	}
	// Over WebSocket the notification runs beside the calls after it.
	want := strconv.FormatInt(counterValue(before)+5, 10)
	await.Until(t, 5*time.Second, "GetCounter() = "+want, func() bool {
		after = counter{}
		if err := c.CallContext(ctx, &after, "demo.v1.Notes.GetCounter"); err != nil {
			t.Fatalf("GetCounter(): %v", err)
		}
		return after.Value == want
	})
	if after.Value != want {
		t.Errorf("GetCounter() = %+v after Notify(Increment, 2) and Increment(3) from %+v, want %s", after, before, want)
	}

	// A batch: results and errors in their places.
	var grace reply
	var missing note
	var count counter
	var nobody any
	batch := []rpc.BatchElem{
		{Method: "helloworld.Greeter.SayHello", Args: []any{"Grace"}, Result: &grace},
		{Method: "demo.v1.Notes.GetNote", Args: []any{"nope"}, Result: &missing},
		{Method: "demo.v1.Notes.GetCounter", Result: &count},
		{Method: "helloworld.Greeter.SayHello", Args: []any{42}, Result: &grace},
		{Method: "nobody.Knows", Result: &nobody},
	}
	if err := c.BatchCallContext(ctx, batch); err != nil {
		t.Fatalf("BatchCall: %v", err)
	}
	if batch[0].Error != nil || grace.Message != "Hello, Grace!" {
		t.Errorf("batch SayHello(\"Grace\") = %+v, %v", grace, batch[0].Error)
	}
	checkRPCError(t, "batch GetNote(\"nope\")", batch[1].Error, 5, `note "nope" not found`, "NOT_FOUND")
	if batch[2].Error != nil || count.Value != after.Value {
		t.Errorf("batch GetCounter() = %+v, %v; want %+v", count, batch[2].Error, after)
	}
	checkRPCError(t, "batch SayHello(42)", batch[3].Error, -32602, "Invalid params: position 0 (name): want a string, got number", "")
	checkRPCError(t, "batch nobody.Knows()", batch[4].Error, -32601, "Method not found", "")

	// Errors of single calls: a gRPC status with its details, and params
	// that do not fit, naming the position.
	err := c.CallContext(ctx, &missing, "demo.v1.Notes.GetNote", "nope")
	data := checkRPCError(t, "GetNote(\"nope\")", err, 5, `note "nope" not found`, "NOT_FOUND")
	if details, _ := data["details"].([]any); len(details) != 1 || details[0].(map[string]any)["reason"] != "NOTE_NOT_FOUND" {
		t.Errorf("GetNote(\"nope\"): details %v, want one ErrorInfo NOTE_NOT_FOUND", data["details"])
	}
	err = c.CallContext(ctx, &n, "demo.v1.Notes.CreateNote", map[string]any{"body": "no title"})
	checkRPCError(t, "CreateNote({body})", err, 3, "note title is required", "INVALID_ARGUMENT")
	err = c.CallContext(ctx, &hello, "helloworld.Greeter.SayHello", "Ada", "Grace")
	data = checkRPCError(t, "SayHello(\"Ada\", \"Grace\")", err, -32602,
		"Invalid params: position 1: too many params by position: helloworld.HelloRequest has 1 field", "")
	if data["position"] != float64(1) {
		t.Errorf("SayHello(\"Ada\", \"Grace\"): data %v, want position 1", data)
	}
	err = c.CallContext(ctx, &n, "demo.v1.Notes.CreateNote", map[string]any{"title": 7})
	data = checkRPCError(t, "CreateNote({title: 7})", err, -32602, "Invalid params: position 0 (note.title): want a string, got number", "")
	if data["position"] != float64(0) || data["field"] != "note.title" {
		t.Errorf("CreateNote({title: 7}): data %v, want position 0, field note.title", data)
	}
}

// counter is demo.v1.Counter; its int64 travels as a string, left out
// when 0.
type counter struct {
	Value string `json:"value"`
}

func counterValue(c counter) int64 {
	if c.Value == "" {
		return 0
	}
	n, _ := strconv.ParseInt(c.Value, 10, 64)
	return n
}

// checkRPCError checks that err is a JSON-RPC error as go-ethereum reports
// it, with code, message and, when status is set, data.status; it returns
// the error's data.
func checkRPCError(t *testing.T, call string, err error, code int, message, status string) map[string]any {
	t.Helper()
	var re rpc.Error
	if !errors.As(err, &re) {
		t.Errorf("%s: error %v (%T), want an rpc.Error", call, err, err)
		return nil
	}
	if re.ErrorCode() != code || err.Error() != message {
		t.Errorf("%s: error %d %q, want %d %q", call, re.ErrorCode(), err.Error(), code, message)
	}
	var de rpc.DataError
	if !errors.As(err, &de) {
		t.Errorf("%s: error %v has no data", call, err)
		return nil
	}
	data, _ := de.ErrorData().(map[string]any)
	if status != "" && data["status"] != status {
		t.Errorf("%s: data %v, want status %s", call, de.ErrorData(), status)
	}
	return data
}
