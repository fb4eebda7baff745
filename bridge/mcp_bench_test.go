package bridge_test

import (
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// BenchmarkMCPToolCall measures a unary tool call over Streamable HTTP
// (the Go SDK's client, one session), and BenchmarkMCPPostBaseline the
// same call as POST /, on the same bridge and backend.
func BenchmarkMCPToolCall(b *testing.B) {
	e := newEnv(b, bridge.Options{})
	c := mustConnectMCP(b, e.url, "")
	params := &sdk.CallToolParams{Name: toolHello, Arguments: json.RawMessage(`{"name":"bench"}`)}
	b.ReportAllocs()
	for b.Loop() {
		r, err := c.CallTool(b.Context(), params)
		if err != nil || r.IsError {
			b.Fatal(err, r)
		}
	}
}

func BenchmarkMCPPostBaseline(b *testing.B) {
	e := newEnv(b, bridge.Options{})
	b.ReportAllocs()
	for b.Loop() {
		code, body := e.post(b, `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"bench"}}`)
		if code != 200 || !strings.Contains(string(body), "bench") {
			b.Fatal(code, string(body))
		}
	}
}
