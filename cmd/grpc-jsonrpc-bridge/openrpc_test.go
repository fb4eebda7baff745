package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coder/websocket"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

const (
	testProtoset = "../../proto/testpb/test.protoset"
	protoRoot    = "../../proto"
	notesProto   = "../../proto/demo/v1/notes.proto"
)

// openRPCDoc is the part of an OpenRPC document the tests look at.
type openRPCDoc struct {
	OpenRPC string `json:"openrpc"`
	Info    struct {
		Title, Version, Description string
	} `json:"info"`
	Servers []struct {
		URL string `json:"url"`
	} `json:"servers"`
	Methods []struct {
		Name        string `json:"name"`
		Summary     string `json:"summary"`
		Description string `json:"description"`
	} `json:"methods"`
}

// method returns the method named name, or fails.
func (d openRPCDoc) method(t *testing.T, name string) (summary, description string) {
	t.Helper()
	for _, m := range d.Methods {
		if m.Name == name {
			return m.Summary, m.Description
		}
	}
	t.Fatalf("the document has no method %s", name)
	return "", ""
}

// checkDocument checks that out is an OpenRPC 1.3.2 document valid under
// the meta-schema and returns it.
func checkDocument(t *testing.T, out string) openRPCDoc {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("got %q, not JSON: %v", out, err)
	}
	if err := metaSchema(t).Validate(v); err != nil {
		t.Errorf("the document does not validate against the OpenRPC meta-schema: %v", err)
	}
	var doc openRPCDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenRPC != "1.3.2" {
		t.Errorf(`got "openrpc": %q, want "1.3.2"`, doc.OpenRPC)
	}
	return doc
}

func TestOpenRPCCommand(t *testing.T) {
	backend := startBackend(t, nil)
	tests := []struct {
		name  string
		args  []string
		check func(*testing.T, openRPCDoc)
	}{
		{
			name: "protoset",
			args: []string{"--protoset", testProtoset},
			check: func(t *testing.T, d openRPCDoc) {
				d.method(t, "helloworld.Greeter.SayHello")
				d.method(t, "test.v1.TestService.Echo")
				if d.Info.Title != "gRPC services over JSON-RPC" || len(d.Servers) != 1 || d.Servers[0].URL != "http://127.0.0.1:8080/" {
					t.Errorf("got info %+v and servers %+v, want the defaults and http://127.0.0.1:8080/", d.Info, d.Servers)
				}
			},
		},
		{
			name: "protoset with info and servers",
			args: []string{"--protoset", testProtoset, "--openrpc-title", "Test API", "--openrpc-version", "2.1.0",
				"--openrpc-description", "For tests.", "--openrpc-servers", "https://a.example/rpc,https://b.example/"},
			check: func(t *testing.T, d openRPCDoc) {
				if d.Info.Title != "Test API" || d.Info.Version != "2.1.0" || d.Info.Description != "For tests." {
					t.Errorf("got info %+v, want the configured one", d.Info)
				}
				if got := fmt.Sprint(d.Servers); got != "[{https://a.example/rpc} {https://b.example/}]" {
					t.Errorf("got servers %s, want the two configured", got)
				}
			},
		},
		{
			name: "listen address as the server",
			args: []string{"--protoset", testProtoset, "--listen", "0.0.0.0:9000"},
			check: func(t *testing.T, d openRPCDoc) {
				if len(d.Servers) != 1 || d.Servers[0].URL != "http://127.0.0.1:9000/" {
					t.Errorf("got servers %+v, want http://127.0.0.1:9000/", d.Servers)
				}
			},
		},
		{
			name: "proto sources keep their comments",
			args: []string{"--proto", notesProto, "-I", protoRoot},
			check: func(t *testing.T, d openRPCDoc) {
				summary, description := d.method(t, "demo.v1.Notes.GetNote")
				if summary != "GetNote returns one note." || !strings.Contains(description, "google.rpc.ErrorInfo") {
					t.Errorf("got summary %q, description %q, want them from the comment of GetNote", summary, description)
				}
				if d.Info.Description != "demo.v1.Notes: Notes keeps notes in memory." {
					t.Errorf("got info.description %q, want the comment of the service", d.Info.Description)
				}
			},
		},
		{
			name: "proto path relative to the import path",
			args: []string{"--proto", "demo/v1/notes.proto", "--import-path", protoRoot},
			check: func(t *testing.T, d openRPCDoc) {
				d.method(t, "demo.v1.Notes.CreateNote")
			},
		},
		{
			name: "backend by reflection",
			args: []string{"--backend", backend},
			check: func(t *testing.T, d openRPCDoc) {
				d.method(t, "helloworld.Greeter.SayHello")
				d.method(t, "test.v1.TestService.Echo")
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, append([]string{"openrpc"}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("got exit code %d, want 0; stderr:\n%s", code, stderr)
			}
			tt.check(t, checkDocument(t, stdout))
		})
	}
}

func TestOpenRPCCommandErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.proto")
	if err := os.WriteFile(bad, []byte("syntax = \"proto3\";\nmessage {\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{name: "no source", wantCode: exitUsage, wantStderr: []string{"--protoset", "--proto", "--backend"}},
		{name: "protoset and proto", args: []string{"--protoset", testProtoset, "--proto", notesProto}, wantCode: exitUsage, wantStderr: []string{`"protoset"`, "not both"}},
		{name: "missing protoset", args: []string{"--protoset", "none.protoset"}, wantCode: exitUsage, wantStderr: []string{"none.protoset"}},
		{name: "not a protoset", args: []string{"--protoset", notesProto}, wantCode: exitUsage, wantStderr: []string{"protoset"}},
		{name: "proto that does not parse", args: []string{"--proto", bad}, wantCode: exitUsage, wantStderr: []string{"bad.proto"}},
		{name: "backend without reflection", args: []string{"--backend", startPlainBackend(t)}, wantCode: exitFailure, wantStderr: []string{"no server reflection", "--protoset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, append([]string{"openrpc"}, tt.args...)...)
			if code != tt.wantCode {
				t.Errorf("got exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			if stdout != "" {
				t.Errorf("got stdout %q, want nothing", stdout)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("got stderr %q, want it to contain %q", stderr, want)
				}
			}
		})
	}
}

// TestServeDescriptorFiles serves a backend without reflection from the
// descriptors of files: ready at once, and calls work.
func TestServeDescriptorFiles(t *testing.T) {
	backend := startPlainBackend(t)
	tests := []struct {
		name string
		args []string
	}{
		{name: "protoset", args: []string{"--protoset", testProtoset}},
		{name: "proto", args: []string{"--proto", "helloworld/helloworld.proto", "-I", protoRoot}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, addr := startServing(t, append([]string{"--backend", backend}, tt.args...)...)
			if status, body := do(t, "http://"+addr+"/readyz", ""); status != 200 {
				t.Errorf("readyz: got %d %s, want 200 at once", status, body)
			}
			// The metrics agree with /readyz: the files are the discovery.
			_, metrics := do(t, "http://"+addr+"/metrics", "")
			if want := `jsonrpc_bridge_discovery_ready{backend="default"} 1`; !strings.Contains(metrics, want) {
				t.Errorf("metrics: got no %s in\n%s", want, grepLines(metrics, "discovery"))
			}
			if want := `jsonrpc_bridge_discovery_last_refresh_timestamp_seconds{backend="default"}`; !strings.Contains(metrics, want) {
				t.Errorf("metrics: got no %s in\n%s", want, grepLines(metrics, "discovery"))
			}
			status, body := do(t, "http://"+addr+"/", `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"Ada"}}`)
			if status != 200 || body != `{"jsonrpc":"2.0","id":1,"result":{"message":"Hello, Ada!"}}` {
				t.Errorf("got %d %s, want Ada greeted", status, body)
			}
			_, body = do(t, "http://"+addr+"/openrpc.json", "")
			doc := checkDocument(t, body)
			doc.method(t, "helloworld.Greeter.SayHello")
			if want := "http://" + addr + "/"; len(doc.Servers) != 1 || doc.Servers[0].URL != want {
				t.Errorf("got servers %+v, want %s", doc.Servers, want)
			}
			if code := p.stop(t); code != exitOK {
				t.Errorf("got exit code %d, want 0; stderr:\n%s", code, p.stderr.rest())
			}
		})
	}
}

// TestServeWebSocket: the streaming limits reach the bridge, and shutting
// down closes WebSocket connections with 1001.
func TestServeWebSocket(t *testing.T) {
	backend := startBackend(t, nil)
	p, addr := startServing(t, "--backend", backend, "--ws-max-message-bytes", "100")
	p.stderr.until(t, "discovery log", func(l string) bool { return strings.Contains(l, "discovered") })
	dial := func() *websocket.Conn {
		t.Helper()
		ctx, cancel := contextWithLimit(t)
		defer cancel()
		c, _, err := websocket.Dial(ctx, "ws://"+addr+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.CloseNow() })
		return c
	}

	big := dial()
	ctx, cancel := contextWithLimit(t)
	defer cancel()
	msg := `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"` + strings.Repeat("a", 100) + `"}}`
	if err := big.Write(ctx, websocket.MessageText, []byte(msg)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := big.Read(ctx); websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
		t.Errorf("a frame over ws_max_message_bytes: got %v, want close status 1009", err)
	}

	c := dial()
	if err := c.Write(ctx, websocket.MessageText, []byte(`{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"Ada"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, got, err := c.Read(ctx); err != nil || !strings.Contains(string(got), "Hello, Ada!") {
		t.Fatalf("got %s, %v, want Ada greeted", got, err)
	}
	// The client reads on, so that it answers the bridge's close frame.
	closed := make(chan error, 1)
	go func() {
		_, _, err := c.Read(ctx)
		closed <- err
	}()
	if code := p.stop(t); code != exitOK {
		t.Errorf("got exit code %d, want 0; stderr:\n%s", code, p.stderr.rest())
	}
	if err := <-closed; websocket.CloseStatus(err) != websocket.StatusGoingAway {
		t.Errorf("after shutdown: got %v, want close status 1001", err)
	}
}

// startServing runs serve with args on a free loopback port and returns
// it with its address, once it listens.
func startServing(t *testing.T, args ...string) (*process, string) {
	t.Helper()
	p := start(t, append(append([]string{"serve"}, args...), "--listen", "127.0.0.1:0", "--log-format", "json")...)
	var addr string
	p.stderr.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
	return p, addr
}

// startPlainBackend serves helloworld.Greeter and test.v1.TestService on
// a loopback port WITHOUT server reflection and returns its address.
func startPlainBackend(t *testing.T) string {
	t.Helper()
	return testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Reflection: testserver.ReflectionNone, NoConn: true,
		Services: []testserver.Service{testserver.Greeter, testserver.Test(testv1.NewServer())}}).Addr()
}

// metaSchema compiles the OpenRPC meta-schema kept under mapping's
// testdata, read as draft-07 (see mapping/testdata/openrpc/README.md).
func metaSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	docs := map[string]any{}
	for url, file := range map[string]string{
		"https://meta.open-rpc.org/":      "meta-schema.json",
		"https://meta.json-schema.tools/": "json-schema-tools-meta-schema.json",
	} {
		b, err := os.ReadFile(filepath.Join("..", "..", "mapping", "testdata", "openrpc", file))
		if err != nil {
			t.Fatal(err)
		}
		var v map[string]any
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatal(err)
		}
		v["$schema"] = "http://json-schema.org/draft-07/schema#"
		docs[url] = v
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(schemaLoader(docs))
	sch, err := c.Compile("https://meta.open-rpc.org/")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// schemaLoader serves schemas from memory; a URL matches with or without
// its trailing slash.
type schemaLoader map[string]any

func (l schemaLoader) Load(url string) (any, error) {
	url, _, _ = strings.Cut(url, "#")
	if v, ok := l[url]; ok {
		return v, nil
	}
	if v, ok := l[url+"/"]; ok {
		return v, nil
	}
	return nil, errors.New("no schema " + url + " in testdata")
}

// contextWithLimit bounds a wait of a test by waitLimit.
func contextWithLimit(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), waitLimit)
}

// grepLines returns the lines of text containing sub.
func grepLines(text, sub string) string {
	var out []string
	for l := range strings.Lines(text) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
