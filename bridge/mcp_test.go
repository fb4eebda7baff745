package bridge_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// The tools of the test services the MCP tests use.
const (
	toolCount  = "test_v1_TestService_Count"
	toolEcho   = "test_v1_TestService_Echo"
	toolFail   = "test_v1_TestService_Fail"
	toolStream = "test_v1_TestService_ServerStream"
	toolHello  = "helloworld_Greeter_SayHello"
)

// mcpBearer is an http.RoundTripper that sends a bearer token.
type mcpBearer struct {
	token string
	next  http.RoundTripper
}

func (b mcpBearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// mcpClient is a session of the Go SDK's client with the bridge at url,
// over Streamable HTTP, with token (if not empty) as its bearer token.
type mcpClient struct {
	*sdk.ClientSession
	mu       sync.Mutex
	progress []*sdk.ProgressNotificationParams
	changed  chan struct{}
}

// mcpVersions are the protocol revisions the tests run: 2025-06-18
// (initialize), 2025-11-25, and the SDK's latest (2026-07-28: server/discover and
// subscriptions/listen), each with the Go SDK's client.
var mcpVersions = []string{"2025-06-18", "2025-11-25", "latest"}

func connectMCP(t testing.TB, url, token string, version ...string) (*mcpClient, error) {
	t.Helper()
	c := &mcpClient{changed: make(chan struct{}, 16)}
	client := sdk.NewClient(&sdk.Implementation{Name: "bridge-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params)
			c.mu.Unlock()
		},
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) {
			select {
			case c.changed <- struct{}{}:
			default:
			}
		},
	})
	hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	if token != "" {
		hc.Transport = mcpBearer{token, hc.Transport}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var opts *sdk.ClientSessionOptions
	if len(version) == 1 && version[0] != "latest" {
		opts = &sdk.ClientSessionOptions{ProtocolVersion: version[0]}
	}
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: url + "/mcp", HTTPClient: hc}, opts)
	if err != nil {
		return nil, err
	}
	if len(version) == 1 && version[0] != "latest" && cs.InitializeResult().ProtocolVersion != version[0] {
		t.Fatalf("asked for protocol %s, got %s", version[0], cs.InitializeResult().ProtocolVersion)
	}
	t.Cleanup(func() { cs.Close() })
	c.ClientSession = cs
	return c, nil
}

func mustConnectMCP(t testing.TB, url, token string, version ...string) *mcpClient {
	t.Helper()
	c, err := connectMCP(t, url, token, version...)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	return c
}

func toolNames(t testing.TB, c *mcpClient) []string {
	t.Helper()
	res, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tl := range res.Tools {
		names = append(names, tl.Name)
	}
	slices.Sort(names)
	return names
}

func callTool(t testing.TB, c *mcpClient, name string, args string) (*sdk.CallToolResult, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: json.RawMessage(args)})
}

func resultText(r *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestMCPGoClientTools(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	c := mustConnectMCP(t, e.url, "")
	if got := c.InitializeResult(); got == nil || got.Capabilities.Tools == nil || !got.Capabilities.Tools.ListChanged {
		t.Fatalf("initialize: tools capability with listChanged expected, got %+v", got)
	}
	res, err := c.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		if !bridgeMCPName(tl.Name) {
			t.Errorf("tool name %q does not match ^[a-zA-Z0-9_-]{1,64}$", tl.Name)
		}
		byName[tl.Name] = tl
	}
	for _, want := range []string{toolCount, toolEcho, toolFail, toolStream, toolHello} {
		if byName[want] == nil {
			t.Errorf("no tool %s in %v", want, slices.Sorted(mapsKeys(byName)))
		}
	}
	for _, gone := range []string{"test_v1_TestService_ClientStream", "test_v1_TestService_BidiStream"} {
		if byName[gone] != nil {
			t.Errorf("client and bidi streams are left out, but %s is listed", gone)
		}
	}
	echo := byName[toolEcho]
	if echo.Title != "test.v1.TestService.Echo" {
		t.Errorf("title %q, want the method's full name", echo.Title)
	}
	if !strings.Contains(echo.Description, "/test.v1.TestService/Echo") {
		t.Errorf("description %q: without comments it names the gRPC method", echo.Description)
	}

	// The schemas are the OpenRPC document's: params, the request
	// message's component; result, the response message's.
	_, doc := e.post(t, `{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}`)
	var d struct {
		Result struct {
			Components struct {
				Schemas map[string]json.RawMessage `json:"schemas"`
			} `json:"components"`
		} `json:"result"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	components := d.Result.Components.Schemas
	in := schemaMap(t, echo.InputSchema)
	defs, _ := in["$defs"].(map[string]any)
	delete(in, "$defs")
	if !sameJSON(t, in, localized(t, components["test.v1.AllTypes-input"])) {
		t.Errorf("inputSchema of Echo is not the document's test.v1.AllTypes-input:\n%s", marshal(t, in))
	}
	for name, sch := range defs {
		if !sameJSON(t, sch, localized(t, components[name])) {
			t.Errorf("inputSchema $defs[%s] is not the document's component", name)
		}
	}
	out := schemaMap(t, echo.OutputSchema)
	delete(out, "$defs")
	if !sameJSON(t, out, localized(t, components["test.v1.AllTypes"])) {
		t.Errorf("outputSchema of Echo is not the document's test.v1.AllTypes:\n%s", marshal(t, out))
	}
	stream := schemaMap(t, byName[toolStream].OutputSchema)
	if items := marshal(t, stream["properties"]); !strings.Contains(items, `"messages":{"items":{"$ref":"#/$defs/test.v1.StreamReply"},"type":"array"}`) {
		t.Errorf("outputSchema of ServerStream: messages should be the array of StreamReply: %s", items)
	}
}

func TestMCPGoClientCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) { testMCPCalls(t, e, mustConnectMCP(t, e.url, "", v)) })
	}
}

func testMCPCalls(t *testing.T, e *env, c *mcpClient) {

	t.Run("success", func(t *testing.T) {
		r, err := callTool(t, c, toolCount, `{"key":"`+t.Name()+`"}`) // a counter of its own
		if err != nil {
			t.Fatal(err)
		}
		if r.IsError {
			t.Fatalf("isError: %s", resultText(r))
		}
		if got := marshal(t, r.StructuredContent); got != `{"count":"1"}` {
			t.Errorf("structuredContent %s, want {\"count\":\"1\"}", got)
		}
		if got := resultText(r); got != `{"count":"1"}` {
			t.Errorf("text %s, want the JSON of the result", got)
		}
		r, err = callTool(t, c, toolHello, `{"name":"agent"}`)
		if err != nil || r.IsError || !strings.Contains(marshal(t, r.StructuredContent), "agent") {
			t.Fatalf("SayHello: %v %+v", err, r)
		}
		// A package named rpc: the tool has no leading dot, the call
		// reaches .rpc.ops.Ops.Ping.
		r, err = callTool(t, c, "rpc_ops_Ops_Ping", `{"text":"pong"}`)
		if err != nil || r.IsError || marshal(t, r.StructuredContent) != `{"text":"pong"}` {
			t.Fatalf("rpc.ops.Ops.Ping: %v %+v", err, r)
		}
	})
	t.Run("grpc error", func(t *testing.T) {
		r, err := callTool(t, c, toolFail, `{"code":5,"message":"no such thing","details":["error_info"]}`)
		if err != nil {
			t.Fatal(err)
		}
		text := resultText(r)
		if !r.IsError || !strings.Contains(text, "NOT_FOUND (gRPC code 5): no such thing") || !strings.Contains(text, `"reason":"TEST"`) {
			t.Fatalf("want isError naming NOT_FOUND, code 5, the message and the details; got isError=%v %q", r.IsError, text)
		}
		if r.StructuredContent != nil {
			t.Errorf("an error result has no structuredContent: %s", marshal(t, r.StructuredContent))
		}
	})
	t.Run("invalid arguments", func(t *testing.T) {
		for _, args := range []string{`{"fInt32":"not a number"}`, `{"noSuchField":1}`} {
			_, err := callTool(t, c, toolEcho, args)
			var je *jsonrpc.Error
			if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
				t.Fatalf("%s: want the invalid params error -32602, got %v", args, err)
			}
			field := strings.Split(strings.Trim(args, "{}"), ":")[0]
			if field = strings.Trim(field, `"`); !strings.Contains(je.Message+string(je.Data), field) {
				t.Errorf("%s: the error names no field %s: %s %s", args, field, je.Message, je.Data)
			}
		}
		_, err := callTool(t, c, toolEcho, `[1]`)
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
			t.Fatalf("array arguments: want -32602, got %v", err)
		}
	})
	t.Run("server stream with progress", func(t *testing.T) {
		params := &sdk.CallToolParams{Name: toolStream, Arguments: json.RawMessage(`{"count":3}`)}
		params.SetProgressToken("stream-1")
		r, err := c.CallTool(context.Background(), params)
		if err != nil || r.IsError {
			t.Fatalf("%v %+v", err, r)
		}
		if got := marshal(t, r.StructuredContent); got != `{"messages":[{"seq":1},{"seq":2},{"seq":3}]}` {
			t.Errorf("structuredContent %s", got)
		}
		// Notifications are handled apart from the result: wait for them.
		var progress []*sdk.ProgressNotificationParams
		await.Until(t, 5*time.Second, "3 progress notifications", func() bool {
			c.mu.Lock()
			progress = slices.Clone(c.progress)
			c.mu.Unlock()
			return len(progress) >= 3
		})
		if len(progress) != 3 {
			t.Fatalf("want 3 progress notifications, got %d", len(progress))
		}
		for i, p := range progress {
			if p.ProgressToken != "stream-1" || p.Progress != float64(i+1) || !strings.Contains(p.Message, `{"seq":`) {
				t.Errorf("progress %d: %+v", i, p)
			}
		}
		// A failing stream is an error result naming its status.
		r, err = callTool(t, c, toolStream, `{"count":3,"failCode":9,"failAfter":1}`)
		if err != nil || !r.IsError || !strings.Contains(resultText(r), "FAILED_PRECONDITION (gRPC code 9)") {
			t.Fatalf("failing stream: %v %+v", err, r)
		}
	})
	t.Run("unknown tool", func(t *testing.T) {
		if _, err := callTool(t, c, "no_such_tool", `{}`); err == nil {
			t.Fatal("an unknown tool must be refused")
		}
	})
}

// TestMCPProgressArrivesDuringTheStream shows that progress is sent as
// messages arrive: the stream holds after its messages until the call is
// cancelled, and its progress notifications arrive before that.
func TestMCPProgressArrivesDuringTheStream(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	c := mustConnectMCP(t, e.url, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		params := &sdk.CallToolParams{Name: toolStream, Arguments: json.RawMessage(`{"count":2,"hold":true,"key":"mcp-hold"}`)}
		params.SetProgressToken(7)
		_, err := c.CallTool(ctx, params)
		done <- err
	}()
	await.Until(t, 10*time.Second, "2 progress notifications while the stream is open", func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return len(c.progress) == 2
	})
	// Cancelling the call (notifications/cancelled) cancels the stream.
	cancel()
	<-done
	await.Receive(t, 10*time.Second, "the backend's stream cancelled with the tool call", e.backend.Cancelled("mcp-hold"))
}

func TestMCPAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Auth: newAuth(t)})
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) { testMCPAuth(t, e, v) })
	}
}

func testMCPAuth(t *testing.T, e *env, v string) {
	if _, err := connectMCP(t, e.url, "", v); err == nil {
		t.Fatal("a client without credentials must not get a session")
	}
	if _, err := connectMCP(t, e.url, "wrong-token-0123456789", v); err == nil {
		t.Fatal("a client with a wrong token must not get a session")
	}
	resp, err := testClient.Post(e.url+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("no credentials: %d %q, want 401 with a Bearer challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}

	greeter := mustConnectMCP(t, e.url, "greeter-token-0123456789", v)
	if got := toolNames(t, greeter); !slices.Equal(got, []string{toolHello}) {
		t.Errorf("greeter's tools: %v, want only %s", got, toolHello)
	}
	reader := mustConnectMCP(t, e.url, "reader-token-0123456789", v)
	if got := toolNames(t, reader); !slices.Equal(got, []string{toolHello, toolEcho, "test_v1_TestService_Peek"}) {
		t.Errorf("reader's tools: %v", got)
	}
	admin := mustConnectMCP(t, e.url, "admin-token-0123456789", v)
	if got := toolNames(t, admin); !slices.Contains(got, toolCount) || !slices.Contains(got, toolHello) {
		t.Errorf("admin's tools: %v", got)
	}

	// A call outside the identity's methods is refused as JSON-RPC
	// refuses it; the same call by an identity that may is served.
	r, err := callTool(t, greeter, toolCount, `{"key":"x"}`)
	if err != nil || !r.IsError || !strings.Contains(resultText(r), "PERMISSION_DENIED (gRPC code 7)") {
		t.Fatalf("greeter calling Count: want isError PERMISSION_DENIED, got %v %+v", err, r)
	}
	r, err = callTool(t, greeter, toolHello, `{"name":"g"}`)
	if err != nil || r.IsError {
		t.Fatalf("greeter calling SayHello: %v %+v", err, r)
	}
	if r, err = callTool(t, admin, toolCount, `{"key":"auth"}`); err != nil || r.IsError {
		t.Fatalf("admin calling Count: %v %+v", err, r)
	}
	// An unknown tool is refused as a known one is, so that a refusal
	// does not tell whether it exists; an identity that may call every
	// method learns that it does not.
	denied := resultText(r0(t, greeter, toolCount))
	if got := resultText(r0(t, greeter, "no_such_tool")); got != denied {
		t.Errorf("greeter calling an unknown tool: %q, want the refusal of a known one, %q", got, denied)
	}
	if _, err := callTool(t, admin, "no_such_tool", `{}`); err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Errorf("admin calling an unknown tool: %v, want the SDK's unknown tool error", err)
	}
}

func TestMCPRateLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{RateLimit: 0.001, RateBurst: 1})
	c := mustConnectMCP(t, e.url, "")
	if r, err := callTool(t, c, toolCount, `{"key":"rl"}`); err != nil || r.IsError {
		t.Fatalf("first call: %v %+v", err, r)
	}
	r, err := callTool(t, c, toolCount, `{"key":"rl"}`)
	if err != nil || !r.IsError || !strings.Contains(resultText(r), "RESOURCE_EXHAUSTED (gRPC code 8)") {
		t.Fatalf("past the rate limit: want isError RESOURCE_EXHAUSTED, got %v %+v", err, r)
	}
}

func TestMCPDeadlineAndMetadata(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	hc := &http.Client{Transport: headers{"Grpc-Timeout": "100m"}.wrap(http.DefaultTransport.(*http.Transport).Clone())}
	client := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	start := time.Now()
	r, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: "test_v1_TestService_Sleep", Arguments: json.RawMessage(`{"duration":"5s"}`)})
	if err != nil || !r.IsError || !strings.Contains(resultText(r), "DEADLINE_EXCEEDED (gRPC code 4)") {
		t.Fatalf("Grpc-Timeout: 100m on the MCP request: want DEADLINE_EXCEEDED, got %v %+v", err, r)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the call took %v: the header's deadline was not applied", d)
	}
}

type headers map[string]string

func (h headers) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		r = r.Clone(r.Context())
		for k, v := range h {
			r.Header.Set(k, v)
		}
		return next.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestMCPListChanged(t *testing.T) {
	t.Parallel()
	for _, v := range mcpVersions {
		t.Run(v, func(t *testing.T) { testMCPListChanged(t, v) })
	}
}

func testMCPListChanged(t *testing.T, v string) {
	e := newEnv(t, bridge.Options{}, only("helloworld.*"), servedBy(netHTTP))
	srv, reg := e.bridge, discoverOrFail(t, e.conn)
	only, err := reg.Filter([]string{"helloworld.*"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := mustConnectMCP(t, e.url, "", v)
	if got := toolNames(t, c); !slices.Equal(got, []string{toolHello}) {
		t.Fatalf("before: %v", got)
	}
	// The same services again: nothing changed, nothing is sent.
	srv.Update(only)
	await.Holds(t, 300*time.Millisecond, "no list_changed after a discovery that changed nothing", func() bool { return len(c.changed) == 0 })
	srv.Update(reg) // a re-discovery that finds more
	await.Receive(t, 10*time.Second, "notifications/tools/list_changed after re-discovery", c.changed)
	if got := toolNames(t, c); !slices.Contains(got, toolCount) || !slices.Contains(got, toolHello) {
		t.Fatalf("after: %v", got)
	}
	srv.Update(only) // and one that finds fewer
	await.Receive(t, 10*time.Second, "notifications/tools/list_changed after the methods went away", c.changed)
	if got := toolNames(t, c); !slices.Equal(got, []string{toolHello}) {
		t.Fatalf("after removal: %v", got)
	}
}

func TestMCPOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{DisableMCP: true})
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		code, _ := e.do(t, method, "/mcp", "application/json", `{}`)
		if code != http.StatusNotFound {
			t.Errorf("%s /mcp with MCP off: %d, want 404", method, code)
		}
	}
	if _, err := connectMCP(t, e.url, ""); err == nil {
		t.Fatal("connected to /mcp with MCP off")
	}
}

func bridgeMCPName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

func mapsKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func schemaMap(t testing.TB, v any) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(marshal(t, v)), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// localized is a component schema of the OpenRPC document with its
// references rewritten as a tool's schemas write them.
func localized(t testing.TB, raw json.RawMessage) any {
	t.Helper()
	if raw == nil {
		t.Fatal("no such component")
	}
	s := strings.ReplaceAll(string(raw), `"#/components/schemas/`, `"#/$defs/`)
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func sameJSON(t testing.TB, a, b any) bool {
	t.Helper()
	return marshal(t, a) == marshal(t, b)
}

func marshal(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x) // sorted keys
	return string(b)
}

// TestMCPGoClientStdio runs the mcp command of the built binary under the
// Go SDK's CommandTransport: the same tools over stdio, logs on stderr.
func TestMCPGoClientStdio(t *testing.T) {
	t.Parallel()
	addr := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, NoConn: true}).Addr()
	bin := buildBridge(t)
	var stderr strings.Builder
	cmd := exec.Command(bin, "mcp", "--backend", addr, "--log-level", "debug")
	cmd.Stderr = &lockedWriter{w: &stderr}
	c := &mcpClient{changed: make(chan struct{}, 16)}
	client := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			c.mu.Lock()
			c.progress = append(c.progress, req.Params)
			c.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &sdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c.ClientSession = cs
	if got := toolNames(t, c); !slices.Contains(got, toolEcho) || !slices.Contains(got, toolStream) || slices.Contains(got, "test_v1_TestService_BidiStream") {
		t.Errorf("tools over stdio: %v", got)
	}
	r, err := callTool(t, c, toolHello, `{"name":"stdio"}`)
	if err != nil || r.IsError || marshal(t, r.StructuredContent) != `{"message":"Hello, stdio!"}` {
		t.Fatalf("SayHello over stdio: %v %+v", err, r)
	}
	r, err = callTool(t, c, toolFail, `{"code":3,"message":"bad"}`)
	if err != nil || !r.IsError || !strings.HasPrefix(resultText(r), "INVALID_ARGUMENT (gRPC code 3): bad") {
		t.Fatalf("Fail over stdio: %v %+v", err, r)
	}
	var je *jsonrpc.Error
	if _, err := callTool(t, c, toolEcho, `{"fInt32":"x"}`); !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Fatalf("invalid params over stdio: %v", err)
	}
	params := &sdk.CallToolParams{Name: toolStream, Arguments: json.RawMessage(`{"count":2}`)}
	params.SetProgressToken("s")
	r, err = c.CallTool(ctx, params)
	if err != nil || r.IsError || marshal(t, r.StructuredContent) != `{"messages":[{"seq":1},{"seq":2}]}` {
		t.Fatalf("ServerStream over stdio: %v %+v", err, r)
	}
	var progress []*sdk.ProgressNotificationParams
	await.Until(t, 5*time.Second, "2 progress notifications over stdio", func() bool {
		c.mu.Lock()
		progress = slices.Clone(c.progress)
		c.mu.Unlock()
		return len(progress) >= 2
	})
	if len(progress) != 2 {
		t.Errorf("over stdio: %d progress notifications, want 2", len(progress))
	}
	if err := cs.Close(); err != nil {
		t.Logf("close: %v", err)
	}
	if log := cmd.Stderr.(*lockedWriter).String(); !strings.Contains(log, "mcp: serving on stdio") {
		t.Errorf("stderr has no log of the command: %s", log)
	} else {
		t.Logf("stderr:\n%s", log)
	}
}

type lockedWriter struct {
	mu sync.Mutex
	w  *strings.Builder
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

// TestMCPHostAndOrigin: /mcp takes the Host and Origin checks of POST /
// (allowed_hosts, cors_origins), against DNS rebinding and pages of other
// origins.
func TestMCPHostAndOrigin(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{AllowedHosts: []string{"localhost"}})
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tt := range []struct {
		name, host, origin string
		want               int
	}{
		{"allowed host", "localhost", "", http.StatusOK},
		{"same origin", "localhost", "http://localhost", http.StatusOK},
		{"other host", "attacker.example", "", http.StatusForbidden},
		{"other origin", "localhost", "https://attacker.example", http.StatusForbidden},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tt.host
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if tt.origin != "" {
				req.Header.Set("Origin", tt.origin)
			}
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

// TestMCPClientCertificate: an identity by client certificate (mTLS) is
// the caller of its tool calls, as of its POST / calls.
func TestMCPClientCertificate(t *testing.T) {
	t.Parallel()
	ca := newCA(t, "test CA")
	auth := newAuth(t, bridge.Identity{Name: "cert-svc", ClientCerts: []string{"cn:svc.example"}, Allow: []string{"test.v1.TestService.Peek"}})
	hs := newEnv(t, bridge.Options{Auth: auth}, onBufconn(), onTLS(&tls.Config{ClientAuth: tls.VerifyClientCertIfGiven, ClientCAs: ca.pool})).hs
	tr := hs.Client().Transport.(*http.Transport).Clone()
	cert := ca.leaf(t, "svc.example", "")
	tr.TLSClientConfig.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return cert, nil }
	t.Cleanup(tr.CloseIdleConnections)
	client := sdk.NewClient(&sdk.Implementation{Name: "mtls", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: hs.URL + "/mcp", HTTPClient: &http.Client{Transport: tr}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	c := &mcpClient{ClientSession: cs}
	if got := toolNames(t, c); !slices.Equal(got, []string{"test_v1_TestService_Peek"}) {
		t.Errorf("tools of cert-svc: %v", got)
	}
	if r, err := callTool(t, c, "test_v1_TestService_Peek", `{"key":"k"}`); err != nil || r.IsError {
		t.Errorf("Peek: %v %+v", err, r)
	}
	if r, err := callTool(t, c, toolHello, `{"name":"x"}`); err != nil || !r.IsError || !strings.Contains(resultText(r), "PERMISSION_DENIED") {
		t.Errorf("SayHello: want PERMISSION_DENIED, got %v %+v", err, r)
	}
}

// TestMCPSamePath: a tool call carries the MCP request's metadata, request
// id and identity to the backend, and is logged and counted as a POST /
// call is.
func TestMCPSamePath(t *testing.T) {
	t.Parallel()
	var log syncBuf
	m := newMetrics(t)
	rec := new(recorder)
	e := newEnv(t, bridge.Options{Auth: newAuth(t), Metrics: m, AccessLog: slog.New(slog.NewJSONHandler(&log, nil))}, recording(rec))
	hc := &http.Client{Transport: headers{
		"Authorization": "Bearer reader-token-0123456789", "Grpc-Metadata-Tenant": "t1", "X-Request-Id": "mcp-request-1",
	}.wrap(http.DefaultTransport.(*http.Transport).Clone())}
	client := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	rec.take()
	r, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "test_v1_TestService_Peek", Arguments: json.RawMessage(`{"key":"same-path"}`)})
	if err != nil || r.IsError {
		t.Fatalf("%v %+v", err, r)
	}
	calls := rec.take()
	if len(calls) != 1 || calls[0].method != "test.v1.TestService.Peek" {
		t.Fatalf("the backend saw %+v", calls)
	}
	md := calls[0].md
	for k, want := range map[string]string{"tenant": "t1", "x-bridge-identity": "reader", "x-request-id": "mcp-request-1"} {
		if got := md.Get(k); len(got) != 1 || got[0] != want {
			t.Errorf("metadata %s: %v, want %s", k, got, want)
		}
	}
	if !strings.Contains(log.String(), `"msg":"call","method":"test.v1.TestService.Peek","code":0`) ||
		!strings.Contains(log.String(), `"identity":"reader","request_id":"mcp-request-1"`) {
		t.Errorf("access log:\n%s", log.String())
	}
	found := false
	for _, mf := range scrape(t, e) {
		if mf.GetName() != "jsonrpc_bridge_calls_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "method" && l.GetValue() == "test.v1.TestService.Peek" && mt.GetCounter().GetValue() == 1 {
					found = true
				}
			}
		}
	}
	if !found {
		t.Error("no calls_total{method=test.v1.TestService.Peek} 1")
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// r0 calls tool with no arguments and wants a result, not an error.
func r0(t *testing.T, c *mcpClient, tool string) *sdk.CallToolResult {
	t.Helper()
	r, err := callTool(t, c, tool, `{}`)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	return r
}

// TestMCPStdioListChanged: a session over stdio (ServeStdio, as the mcp
// command serves it) is told of a re-discovery too.
func TestMCPStdioListChanged(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{}, only("helloworld.*"))
	srv, reg := e.bridge, discoverOrFail(t, e.conn)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	served := make(chan error, 1)
	go func() {
		served <- srv.MCP().ServeStdio(ctx, inR, outW)
		outW.Close()
	}()
	changed := make(chan struct{}, 4)
	client := sdk.NewClient(&sdk.Implementation{Name: "stdio", Version: "1"}, &sdk.ClientOptions{
		ToolListChangedHandler: func(context.Context, *sdk.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &mcpClient{ClientSession: cs}
	if got := toolNames(t, c); !slices.Equal(got, []string{toolHello}) {
		t.Fatalf("before: %v", got)
	}
	srv.Update(reg)
	await.Receive(t, 10*time.Second, "notifications/tools/list_changed over stdio", changed)
	if got := toolNames(t, c); !slices.Contains(got, toolEcho) {
		t.Fatalf("after: %v", got)
	}
	cs.Close()
	inW.Close()
	if err := <-served; err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("ServeStdio: %v", err)
	}
}

// TestMCPMaxSessions: past MaxMCPSessions a new session gets HTTP 429,
// and a closed one makes room.
func TestMCPMaxSessions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{MaxMCPSessions: 2})
	a := mustConnectMCP(t, e.url, "")
	mustConnectMCP(t, e.url, "")
	_, err := connectMCP(t, e.url, "")
	t.Logf("a third session: %v", err)
	if err == nil || !strings.Contains(err.Error(), "429") && !strings.Contains(err.Error(), "Too Many") {
		t.Fatalf("a third session: %v, want HTTP 429", err)
	}
	// The sessions in use still work.
	if r, err := callTool(t, a, toolHello, `{"name":"a"}`); err != nil || r.IsError {
		t.Fatalf("%v %+v", err, r)
	}
	a.Close()
	await.NoError(t, 5*time.Second, "a new session after closing one", func() error {
		_, err := connectMCP(t, e.url, "")
		return err
	})
}

// TestMCPMalformedBodies: a POST /mcp body that is not a JSON-RPC message
// gets HTTP 400 with a JSON-RPC error of fixed text and a null id, as
// MCP's Streamable HTTP allows, never the SDK's Go error text
// (encoding/json's errors, Go type names such as jsonrpc2.wireDecode or
// map[string]interface {}) nor the body quoted back.
func TestMCPMalformedBodies(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"not JSON", `xx`, -32700},
		{"a string", `"x"`, -32700},
		{"an object id", `{"jsonrpc":"2.0","id":{},"method":"tools/list"}`, -32600},
		{"version 1.0", `{"jsonrpc":"1.0","id":1,"method":"tools/list"}`, -32600},
		{"no version", `{"id":1,"method":"tools/list"}`, -32600},
		{"empty batch", `[]`, -32600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := testClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("got HTTP %d %s %s, want 400 with JSON", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			var reply struct {
				JSONRPC string           `json:"jsonrpc"`
				ID      *json.RawMessage `json:"id"`
				Error   struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal(b, &reply); err != nil || reply.JSONRPC != "2.0" || reply.ID != nil || reply.Error.Code != tc.code {
				t.Fatalf("got %s (%v), want a JSON-RPC error %d with id null", b, err, tc.code)
			}
			for _, leak := range []string{"json:", "Go value", "jsonrpc2", "interface {}", "unmarshal", "malformed payload", tc.body} {
				if strings.Contains(reply.Error.Message, leak) {
					t.Errorf("the message %q has %q", reply.Error.Message, leak)
				}
			}
		})
	}
}

// TestMCPSDKRepliesInJSONRPC: in a session, what the SDK would answer in
// its own words gets the bridge's, in JSON-RPC: params of the wrong shape
// for the protocol's own methods (its messages name Go types: "into Go
// struct field mcp.ListToolsParams.cursor of type string"), an unknown
// method (the SDK's plain-text 400 "JSON RPC not handled"), and a request
// or notification with the id in the wrong place. Each reply is one
// JSON-RPC error with the request's id, where it has one.
func TestMCPSDKRepliesInJSONRPC(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	post := func(t *testing.T, session, body string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, e.url+"/mcp", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, _ := post(t, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if session == "" {
		t.Fatalf("initialize: HTTP %d, no session", resp.StatusCode)
	}
	post(t, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)

	for _, tc := range []struct {
		name, body string
		status     int
		id         string // "" is null
		code       int
		noSession  bool // sent without the session's Mcp-Session-Id
	}{
		{"tools/call before initialize (no session)", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"helloworld.Greeter.SayHello"}}`, 200, "7", -32600, true},
		{"tools/list with an array", `{"jsonrpc":"2.0","id":2,"method":"tools/list","params":[1]}`, 200, "2", -32602, false},
		{"tools/list with a number cursor", `{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"cursor":5}}`, 200, "3", -32602, false},
		{"tools/call with a number name", `{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":5}}`, 200, `"c"`, -32602, false},
		{"initialize again, a number version", `{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":5}}`, 200, "4", -32602, false},
		{"an unknown method", `{"jsonrpc":"2.0","id":5,"method":"no/such"}`, 200, "5", -32601, false},
		{"a request without an id", `{"jsonrpc":"2.0","method":"tools/list"}`, 400, "", -32600, false},
		{"a notification with an id", `{"jsonrpc":"2.0","id":6,"method":"notifications/initialized"}`, 400, "6", -32600, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sid := session
			if tc.noSession {
				sid = ""
			}
			resp, b := post(t, sid, tc.body)
			msg := b
			if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
				_, msg, _ = strings.Cut(b, "data: ")
				msg, _, _ = strings.Cut(msg, "\n")
			} else if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
				t.Fatalf("got HTTP %d %s %q, want JSON or an event stream", resp.StatusCode, resp.Header.Get("Content-Type"), b)
			}
			var reply struct {
				JSONRPC string          `json:"jsonrpc"`
				ID      json.RawMessage `json:"id"`
				Error   *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(msg), &reply); err != nil || reply.JSONRPC != "2.0" || reply.Error == nil {
				t.Fatalf("got HTTP %d %q (%v), want a JSON-RPC error", resp.StatusCode, b, err)
			}
			wantID := tc.id
			if wantID == "" {
				wantID = "null"
			}
			if resp.StatusCode != tc.status || string(reply.ID) != wantID || reply.Error.Code != tc.code {
				t.Errorf("got HTTP %d, id %s, code %d (%s); want HTTP %d, id %s, code %d", resp.StatusCode, reply.ID, reply.Error.Code, msg, tc.status, wantID, tc.code)
			}
			if tc.noSession && !strings.Contains(reply.Error.Message, "initialize") {
				t.Errorf("the message %q does not say to initialize first", reply.Error.Message)
			}
			for _, leak := range []string{"json:", "Go value", "Go struct", "mcp.", "jsonrpc2", "unmarshal", "handling '"} {
				if strings.Contains(reply.Error.Message, leak) {
					t.Errorf("the message %q has %q", reply.Error.Message, leak)
				}
			}
		})
	}
}

// TestMCPRequestIDOfItsRequest: a tool call whose MCP request sends no
// X-Request-Id carries to the backend the id the bridge made for that
// request, the one its reply's X-Request-Id names (it carried a second,
// made anew, before).
func TestMCPRequestIDOfItsRequest(t *testing.T) {
	t.Parallel()
	rec := new(recorder)
	e := newEnv(t, bridge.Options{}, recording(rec))
	var mu sync.Mutex
	var ids []string // X-Request-Id of each POST /mcp reply
	hc := &http.Client{Transport: roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := http.DefaultTransport.RoundTrip(r)
		if err == nil && r.Method == http.MethodPost {
			mu.Lock()
			ids = append(ids, resp.Header.Get(bridge.RequestIDHeader))
			mu.Unlock()
		}
		return resp, err
	})}
	client := sdk.NewClient(&sdk.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: e.url + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	rec.take()
	mu.Lock()
	before := len(ids)
	mu.Unlock()
	r, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "test_v1_TestService_Peek", Arguments: json.RawMessage(`{"key":"id"}`)})
	if err != nil || r.IsError {
		t.Fatalf("%v %+v", err, r)
	}
	calls := rec.take()
	if len(calls) != 1 {
		t.Fatalf("the backend saw %+v", calls)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ids) != before+1 || ids[before] == "" {
		t.Fatalf("the tools/call POST's replies named ids %v", ids[before:])
	}
	if got := calls[0].md.Get("x-request-id"); len(got) != 1 || got[0] != ids[before] {
		t.Errorf("the backend's x-request-id = %v, want the reply's %s", got, ids[before])
	}
}
