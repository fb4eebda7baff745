package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMCPCommandProto runs the mcp command on .proto sources without a
// backend, as an agent would start it, and talks to it with the Go SDK's
// client over its stdin and stdout: descriptions come from the comments,
// annotations from idempotency_level, long and clashing names follow the
// rule, calls fail with UNAVAILABLE, and stdout carries nothing but the
// protocol (logs go to stderr).
func TestMCPCommandProto(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr syncBuffer
	var stdout bytes.Buffer // what the client read, to check it is all protocol
	root := newRoot(outW, &stderr)
	root.SetIn(inR)
	root.SetArgs([]string{"mcp", "--proto", "tools.proto", "--proto", "clash.proto", "--proto", "clash2.proto", "-I", "../../bridge/mcp/testdata"})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- root.ExecuteContext(ctx)
		outW.Close()
	}()

	client := sdk.NewClient(&sdk.Implementation{Name: "cmd-test", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.IOTransport{Reader: io.NopCloser(io.TeeReader(outR, &stdout)), Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*sdk.Tool{}
	for _, tl := range res.Tools {
		byName[tl.Name] = tl
	}
	get := byName["tools_v1_Library_GetBook"]
	if get == nil || !get.Annotations.ReadOnlyHint || !strings.Contains(get.Description, "GetBook returns one book.") {
		t.Fatalf("GetBook: %+v", get)
	}
	if put := byName["tools_v1_Library_PutBook"]; put == nil || put.Annotations == nil || !put.Annotations.IdempotentHint || put.Annotations.ReadOnlyHint {
		t.Errorf("PutBook: want idempotentHint only, got %+v", put)
	}
	if add := byName["tools_v1_Library_AddBook"]; add == nil || add.Annotations != nil {
		t.Errorf("AddBook: want no annotations, got %+v", add)
	}
	if byName["tools_v1_Library_Upload"] != nil || byName["tools_v1_Library_Sync"] != nil {
		t.Error("client and bidi streams are left out")
	}
	var clashing []string
	for name, tl := range byName {
		if len(name) > 64 {
			t.Errorf("name %q is longer than 64", name)
		}
		if tl.Title == "a.b_c.S.M" || tl.Title == "a_b.c.S.M" {
			clashing = append(clashing, name)
		}
	}
	if len(clashing) != 2 || clashing[0] == clashing[1] || !strings.HasPrefix(clashing[0], "a_b_c_S_M_") {
		t.Errorf("clashing methods: %v", clashing)
	}
	r, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "tools_v1_Library_GetBook", Arguments: json.RawMessage(`{"id":"1"}`)})
	if err != nil || !r.IsError || !strings.Contains(r.Content[0].(*sdk.TextContent).Text, "UNAVAILABLE (gRPC code 14)") {
		t.Fatalf("a call without a backend: %v %+v", err, r)
	}
	cs.Close()
	inW.Close()
	if err := <-done; err != nil {
		t.Fatalf("mcp: %v", err)
	}
	for line := range strings.Lines(stdout.String()) {
		if !json.Valid([]byte(line)) {
			t.Errorf("stdout has a line that is not a JSON-RPC message: %q", line)
		}
	}
	if log := stderr.String(); !strings.Contains(log, "mcp: serving on stdio") {
		t.Errorf("stderr: %q", log)
	}
}

func TestMCPCommandUsage(t *testing.T) {
	code, _, stderr := runSync(t, "mcp")
	if code != exitUsage || !strings.Contains(stderr, "--backend") {
		t.Errorf("mcp without a source: exit %d, stderr %q", code, stderr)
	}
	code, stdout, _ := runSync(t, "mcp", "--help")
	if code != exitOK || !strings.Contains(stdout, "--protoset") || strings.Contains(stdout, "--listen") {
		t.Errorf("mcp --help: exit %d: %s", code, stdout)
	}
}

// TestMCPCommandPipe: requests written at once and stdin closed, as a
// shell pipe does, are all answered before the command exits.
func TestMCPCommandPipe(t *testing.T) {
	in := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"sh","version":"1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`,
		`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"helloworld_Greeter_SayHello","arguments":{"name":"Ada"}}}`,
		// The SDK's answer names Go types; the bridge's does not.
		`{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"cursor":5}}`,
	}, "\n") + "\n"
	for i := range 5 {
		var stdout, stderr syncBuffer
		root := newRoot(&stdout, &stderr)
		root.SetIn(strings.NewReader(in))
		root.SetArgs([]string{"mcp", "--proto", "helloworld/helloworld.proto", "-I", "../../proto"})
		if err := root.ExecuteContext(t.Context()); err != nil {
			t.Fatalf("run %d: %v\n%s", i, err, stderr.String())
		}
		ids := map[string]bool{}
		for line := range strings.Lines(stdout.String()) {
			var m struct {
				ID     json.RawMessage `json:"id"`
				Result struct {
					ServerInfo struct{ Name, Version string } `json:"serverInfo"`
				} `json:"result"`
			}
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatalf("run %d: stdout line %q: %v", i, line, err)
			}
			ids[string(m.ID)] = true
			if string(m.ID) == "4" && (!strings.Contains(line, `"code":-32602`) || strings.Contains(line, "Go struct") || strings.Contains(line, "unmarshal")) {
				t.Errorf("run %d: bad params answered %s, want -32602 in the bridge's words", i, line)
			}
			// The initialize result names the bridge as --version does.
			if info := m.Result.ServerInfo; string(m.ID) == "1" && (info.Name != "grpc-jsonrpc-bridge" || info.Version != version()) {
				t.Errorf("run %d: serverInfo %+v, want grpc-jsonrpc-bridge %q", i, info, version())
			}
		}
		if !ids["1"] || !ids["2"] || !ids["3"] || !ids["4"] || len(ids) != 4 {
			t.Fatalf("run %d: answers to %v, want 1 to 4:\n%s", i, ids, stdout.String())
		}
	}
}

// listening starts serve with args and returns its address once it has
// discovered the backend's services.
func listening(t *testing.T, args ...string) (*process, string) {
	t.Helper()
	p := start(t, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	var addr string
	p.stderr.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
	p.stderr.until(t, "discovery log", func(l string) bool { return strings.Contains(l, "discovered") })
	return p, addr
}

// TestServeMCP: serve serves /mcp by default, and its shutdown is not
// held up by a session's open stream; --mcp=false makes /mcp 404.
func TestServeMCP(t *testing.T) {
	backend := startBackend(t, nil)
	p, addr := listening(t, "--backend", backend, "--shutdown-timeout", "10s")
	client := sdk.NewClient(&sdk.Implementation{Name: "serve-test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: "http://" + addr + "/mcp"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, err := cs.CallTool(t.Context(), &sdk.CallToolParams{Name: "helloworld_Greeter_SayHello", Arguments: json.RawMessage(`{"name":"serve"}`)})
	if err != nil || r.IsError {
		t.Fatalf("%v %+v", err, r)
	}
	start := time.Now()
	if code := p.stop(t); code != exitOK {
		t.Errorf("exit code %d; stderr:\n%s", code, p.stderr.rest())
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the shutdown took %v: an MCP session held it up", d)
	}

	p, addr = listening(t, "--backend", backend, "--mcp=false")
	if status, _ := do(t, "http://"+addr+"/mcp", `{}`); status != 404 {
		t.Errorf("--mcp=false: POST /mcp got %d, want 404", status)
	}
	if code := p.stop(t); code != exitOK {
		t.Errorf("exit code %d", code)
	}
}
