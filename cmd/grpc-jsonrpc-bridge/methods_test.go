package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// documentNames are the method names of the OpenRPC document that openrpc
// prints with args.
func documentNames(t *testing.T, args ...string) []string {
	t.Helper()
	code, stdout, stderr := runSync(t, append([]string{"openrpc"}, args...)...)
	if code != exitOK {
		t.Fatalf("openrpc %v: exit code %d; stderr:\n%s", args, code, stderr)
	}
	var names []string
	for _, m := range checkDocument(t, stdout).Methods {
		names = append(names, m.Name)
	}
	return names
}

func TestListCommand(t *testing.T) {
	backend := startBackend(t, nil)
	tests := []struct {
		name string
		args []string
		want []string // some of the names
	}{
		{name: "protoset", args: []string{"--protoset", testProtoset},
			want: []string{".rpc.ops.Ops.Ping", "demo.v1.Notes.CreateNote", "helloworld.Greeter.SayHello", "test.v1.TestService.BidiStream"}},
		{name: "proto", args: []string{"--proto", notesProto, "-I", protoRoot},
			want: []string{"demo.v1.Notes.CreateNote", "demo.v1.Notes.WatchNotes"}},
		{name: "backend", args: []string{"--backend", backend},
			want: []string{"helloworld.Greeter.SayHello", "test.v1.TestService.Echo", "test.v1.TestService.ServerStream"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, append([]string{"list"}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("got exit code %d, want 0; stderr:\n%s", code, stderr)
			}
			if !strings.HasSuffix(stdout, "\n") {
				t.Errorf("got %q, want lines", stdout)
			}
			got := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
			if !slices.IsSorted(got) {
				t.Errorf("got %q, want the names sorted", got)
			}
			// Exactly the methods the bridge serves and documents.
			if want := documentNames(t, tt.args...); !slices.Equal(got, want) {
				t.Errorf("got\n%s\nwant the names of the OpenRPC document\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, w := range tt.want {
				if !slices.Contains(got, w) {
					t.Errorf("got %q, want %s among them", got, w)
				}
			}
		})
	}
}

func TestListAndDescribeErrors(t *testing.T) {
	plain := startPlainBackend(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr []string
	}{
		{name: "list without source", args: []string{"list"}, wantCode: exitUsage, wantStderr: []string{"--protoset", "--proto", "--backend"}},
		{name: "list without reflection", args: []string{"list", "--backend", plain}, wantCode: exitFailure, wantStderr: []string{"no server reflection", "--protoset"}},
		{name: "list of an unknown service", args: []string{"list", "x", "--protoset", testProtoset}, wantCode: exitUsage, wantStderr: []string{`no service "x"`}},
		{name: "describe without method", args: []string{"describe", "--protoset", testProtoset}, wantCode: exitUsage, wantStderr: []string{"one METHOD", "list"}},
		{name: "describe unknown method", args: []string{"describe", "helloworld.Greeter.SayHelo", "--protoset", testProtoset},
			wantCode: exitUsage, wantStderr: []string{`no method "helloworld.Greeter.SayHelo"`, `did you mean "helloworld.Greeter.SayHello"?`}},
		{name: "describe by gRPC path of no method", args: []string{"describe", "helloworld.Greeter/SayHelo", "--protoset", testProtoset},
			wantCode: exitUsage, wantStderr: []string{`did you mean "helloworld.Greeter.SayHello"?`}},
		{name: "describe by method name only", args: []string{"describe", "GetNote", "--protoset", testProtoset},
			wantCode: exitUsage, wantStderr: []string{`did you mean "demo.v1.Notes.GetNote"?`}},
		{name: "describe rpc package without the dot", args: []string{"describe", "rpc.ops.Ops.Ping", "--protoset", testProtoset},
			wantCode: exitUsage, wantStderr: []string{`did you mean ".rpc.ops.Ops.Ping"?`}},
		{name: "describe nothing near", args: []string{"describe", "zzz", "--protoset", testProtoset},
			wantCode: exitUsage, wantStderr: []string{`no method "zzz" (list prints every method)`}},
		{name: "describe without reflection", args: []string{"describe", "helloworld.Greeter.SayHello", "--backend", plain}, wantCode: exitFailure, wantStderr: []string{"--protoset"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, tt.args...)
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

// described is the output of describe.
type described struct {
	Name          string          `json:"name"`
	GRPCMethod    string          `json:"x-grpc-method"`
	Streaming     string          `json:"streaming"`
	Summary       string          `json:"summary"`
	ExampleParams json.RawMessage `json:"exampleParams"`
	Params        any             `json:"params"`
	Result        any             `json:"result"`
	Components    struct {
		Schemas map[string]any `json:"schemas"`
	} `json:"components"`
}

const (
	noteExample = `{"id":"","title":"","body":"","tags":[""],"labels":{"":""},"priority":"PRIORITY_UNSPECIFIED",` +
		`"author":{"name":"","email":""},"createdAt":"1970-01-01T00:00:00Z","views":"0"}`
	inner           = `{"name":"","big":"0"}`
	allTypesExample = `{"fDouble":0,"fFloat":0,"fInt32":0,"fInt64":"0","fUint32":0,"fUint64":"0","fSint32":0,"fSint64":"0",` +
		`"fFixed32":0,"fFixed64":"0","fSfixed32":0,"fSfixed64":"0","fBool":false,"fString":"","fBytes":"",` +
		`"fEnum":"COLOR_UNSPECIFIED","fMessage":` + inner + `,"rInt64":["0"],"rString":[""],"rMessage":[` + inner + `],` +
		`"rEnum":["COLOR_UNSPECIFIED"],"mStringInt64":{"":"0"},"mInt32Message":{"0":` + inner + `},"mBoolString":{"false":""},` +
		`"oString":"","tree":{"value":"","children":[]},"optInt32":0,` +
		`"wktTimestamp":"1970-01-01T00:00:00Z","wktDuration":"0s","wktStruct":{},"wktValue":null,"wktList":[],"wktNull":null,` +
		`"wktInt64":"0","wktString":"","wktBool":false,"wktFieldMask":"",` +
		`"wktAny":{"@type":"type.googleapis.com/google.protobuf.Empty"},"wktEmpty":{},"wktDouble":0,"wktBytes":""}`
)

func TestDescribeCommand(t *testing.T) {
	backend := startBackend(t, nil)
	notes := []string{"--proto", notesProto, "-I", protoRoot}
	tests := []struct {
		name, method  string
		args          []string
		grpcMethod    string
		streaming     string
		example       string
		paramsRef     string // the component params refers to; "" for an array of them
		resultPointer string // where the OpenRPC document has the result schema
	}{
		{name: "unary", method: "demo.v1.Notes.CreateNote", args: notes, grpcMethod: "/demo.v1.Notes/CreateNote",
			example: `{"note":` + noteExample + `}`, paramsRef: "demo.v1.CreateNoteRequest-input"},
		{name: "every kind of field", method: "test.v1.TestService.Echo", args: []string{"--protoset", testProtoset},
			grpcMethod: "/test.v1.TestService/Echo", example: allTypesExample, paramsRef: "test.v1.AllTypes-input"},
		{name: "by reflection", method: "test.v1.TestService.Echo", args: []string{"--backend", backend},
			grpcMethod: "/test.v1.TestService/Echo", example: allTypesExample, paramsRef: "test.v1.AllTypes-input"},
		{name: "no fields", method: "demo.v1.Notes.GetCounter", args: notes, grpcMethod: "/demo.v1.Notes/GetCounter",
			example: `{}`, paramsRef: "demo.v1.GetCounterRequest-input"},
		{name: "client streaming", method: "demo.v1.Notes.ImportNotes", args: notes, grpcMethod: "/demo.v1.Notes/ImportNotes",
			streaming: "client-streaming", example: `[{"note":` + noteExample + `}]`},
		{name: "server streaming", method: "demo.v1.Notes.WatchNotes", args: notes, grpcMethod: "/demo.v1.Notes/WatchNotes",
			streaming: "server-streaming", example: `{"tags":[""],"follow":false}`, paramsRef: "demo.v1.WatchNotesRequest-input"},
		{name: "rpc package", method: ".rpc.ops.Ops.Ping", args: []string{"--protoset", testProtoset}, grpcMethod: "/rpc.ops.Ops/Ping",
			paramsRef: "rpc.ops.PingRequest-input"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, append([]string{"describe", tt.method}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("got exit code %d, want 0; stderr:\n%s", code, stderr)
			}
			var root any
			if err := json.Unmarshal([]byte(stdout), &root); err != nil {
				t.Fatalf("got %q, not JSON: %v", stdout, err)
			}
			var d described
			if err := json.Unmarshal([]byte(stdout), &d); err != nil {
				t.Fatal(err)
			}
			if d.Name != tt.method || d.GRPCMethod != tt.grpcMethod || d.Streaming != tt.streaming {
				t.Errorf("got name %q, x-grpc-method %q, streaming %q; want %q, %q, %q", d.Name, d.GRPCMethod, d.Streaming, tt.method, tt.grpcMethod, tt.streaming)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, d.ExampleParams); err != nil {
				t.Fatal(err)
			}
			if tt.example != "" && compact.String() != tt.example {
				t.Errorf("got exampleParams\n%s\nwant\n%s", compact.String(), tt.example)
			}
			if tt.paramsRef != "" && !reflect.DeepEqual(d.Params, map[string]any{"$ref": "#/components/schemas/" + tt.paramsRef}) {
				t.Errorf("got params %v, want a reference to %s", d.Params, tt.paramsRef)
			}

			// The schemas are the OpenRPC document's: the same result, the
			// same components, each one the params or result refer to.
			code, docOut, stderr := runSync(t, append([]string{"openrpc"}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("openrpc: exit code %d; stderr:\n%s", code, stderr)
			}
			var doc struct {
				Methods []struct {
					Name   string
					Result struct{ Schema any }
				}
				Components struct{ Schemas map[string]any }
			}
			if err := json.Unmarshal([]byte(docOut), &doc); err != nil {
				t.Fatal(err)
			}
			for _, m := range doc.Methods {
				if m.Name == tt.method && !reflect.DeepEqual(m.Result.Schema, d.Result) {
					t.Errorf("got result %v, want the document's %v", d.Result, m.Result.Schema)
				}
			}
			if tt.paramsRef != "" && d.Components.Schemas[tt.paramsRef] == nil {
				t.Errorf("components lack %s", tt.paramsRef)
			}
			for name, sch := range d.Components.Schemas {
				if !reflect.DeepEqual(sch, doc.Components.Schemas[name]) {
					t.Errorf("component %s differs from the document's", name)
				}
			}
			if unused := len(d.Components.Schemas) - len(refsFrom(d.Params, d.Result, d.Components.Schemas)); unused != 0 {
				t.Errorf("%d components are referred to by neither params nor result", unused)
			}

			// The example fits the params schema.
			c := jsonschema.NewCompiler()
			c.DefaultDraft(jsonschema.Draft7)
			if err := c.AddResource("describe.json", root); err != nil {
				t.Fatal(err)
			}
			sch, err := c.Compile("describe.json#/params")
			if err != nil {
				t.Fatal(err)
			}
			example, err := jsonschema.UnmarshalJSON(bytes.NewReader(d.ExampleParams))
			if err != nil {
				t.Fatal(err)
			}
			if err := sch.Validate(example); err != nil {
				t.Errorf("the example does not fit the params schema: %v", err)
			}
		})
	}
}

// refsFrom are the components reachable from the schemas roots.
func refsFrom(params, result any, components map[string]any) map[string]bool {
	seen := map[string]bool{}
	pending := []any{params, result}
	for len(pending) > 0 {
		v := pending[0]
		pending = pending[1:]
		for _, name := range refs(v, nil) {
			if !seen[name] {
				seen[name] = true
				pending = append(pending, components[name])
			}
		}
	}
	return seen
}

// TestDescribeExampleIsAccepted: the bridge takes the example params of
// every method as they are.
func TestDescribeExampleIsAccepted(t *testing.T) {
	backend := startBackend(t, nil)
	_, addr := startBridge(t, "--backend", backend)
	for _, method := range []string{"test.v1.TestService.Echo", "helloworld.Greeter.SayHello", "test.v1.TestService.Count"} {
		code, stdout, stderr := runSync(t, "describe", method, "--backend", backend)
		if code != exitOK {
			t.Fatalf("describe %s: exit code %d; stderr:\n%s", method, code, stderr)
		}
		var d described
		if err := json.Unmarshal([]byte(stdout), &d); err != nil {
			t.Fatal(err)
		}
		body := `{"jsonrpc":"2.0","id":1,"method":"` + method + `","params":` + string(d.ExampleParams) + `}`
		status, reply := do(t, "http://"+addr+"/", body)
		if status != 200 || !strings.Contains(reply, `"result"`) {
			t.Errorf("%s with the example params: got %d %s, want a result", method, status, reply)
		}
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"-v"}} {
		code, stdout, stderr := runSync(t, args...)
		if code != exitOK || stderr != "" {
			t.Errorf("%v: got exit code %d, stderr %q; want 0 and nothing", args, code, stderr)
		}
		if want := "grpc-jsonrpc-bridge " + version() + "\n"; stdout != want {
			t.Errorf("%v: got %q, want %q", args, stdout, want)
		}
		if v := strings.TrimSpace(strings.TrimPrefix(stdout, "grpc-jsonrpc-bridge")); v == "" || strings.Contains(v, "(devel)") {
			t.Errorf("%v: got %q, want a version even without a VCS stamp", args, stdout)
		}
	}
	tests := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{name: "test binary", want: "devel"},
		{name: "go build without VCS", info: debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, want: "devel"},
		{name: "go install of a release", info: debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, want: "v1.2.3"},
		{name: "a checkout", info: debug.BuildInfo{Main: debug.Module{Version: "v0.0.0-20260101120000-abcdef123456+dirty"},
			Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abcdef1234567890"}, {Key: "vcs.modified", Value: "true"}}},
			want: "v0.0.0-20260101120000-abcdef123456+dirty abcdef1234567890 (modified)"},
		{name: "revision without version", info: debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "false"}}},
			want: "devel abc"},
	}
	for _, tt := range tests {
		if got := versionOf(&tt.info); got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestHelpListsOwnFlags: each command's help shows the flags it takes,
// not every setting of serve.
func TestHelpListsOwnFlags(t *testing.T) {
	tests := []struct {
		cmd        string
		want, not  []string
		wantInHelp []string
	}{
		{cmd: "serve", want: []string{"--max-body-bytes", "--backend", "--print-config", "--openrpc-title"}},
		{cmd: "demo", want: []string{"--max-body-bytes", "--listen"}, not: []string{"--backend "}},
		{cmd: "openrpc", want: []string{"--protoset", "--proto", "--import-path", "--backend", "--listen", "--openrpc-title", "--emit-unpopulated"},
			not: []string{"--max-body-bytes", "--rate-limit", "--ws-ping-interval", "--print-config"}},
		{cmd: "list", want: []string{"--protoset", "--proto", "-I, --import-path", "--backend", "--config"},
			not: []string{"--max-body-bytes", "--listen", "--openrpc-title", "--emit-unpopulated", "--log-level"}},
		{cmd: "describe", want: []string{"--protoset", "--proto", "-I, --import-path", "--backend", "--emit-unpopulated", "--format string", "json (the method's schemas", "(default \"json\")"},
			not: []string{"--max-body-bytes", "--listen", "--openrpc-title"}},
		{cmd: "version", not: []string{"--backend", "--config"}},
	}
	for _, tt := range tests {
		t.Run(tt.cmd, func(t *testing.T) {
			code, stdout, stderr := runSync(t, tt.cmd, "--help")
			if code != exitOK {
				t.Fatalf("got exit code %d; stderr:\n%s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("help lacks %s:\n%s", w, stdout)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(stdout, n) {
					t.Errorf("help shows %s:\n%s", n, stdout)
				}
			}
		})
	}
	_, root, _ := runSync(t, "--help")
	for _, w := range []string{"list", "describe", "version", "unary and\nstreaming", "--version"} {
		if !strings.Contains(root, w) {
			t.Errorf("root help lacks %q:\n%s", w, root)
		}
	}
	if strings.Contains(root, "each unary method") {
		t.Errorf("root help says only unary methods are served:\n%s", root)
	}
}

// TestDidYouMean: unknown commands, flags and config keys get the nearest
// names.
func TestDidYouMean(t *testing.T) {
	cfg := writeConfig(t, "backend: localhost:1\nlisen: :8080\n")
	tests := []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{name: "command", args: []string{"serf"}, want: []string{`unknown command "serf"`, "Did you mean this?", "serve"}},
		{name: "new command", args: []string{"descrbe"}, want: []string{"describe"}},
		{name: "flag", args: []string{"serve", "--lisen", ":1"}, want: []string{"unknown flag: --lisen: did you mean --listen?"}},
		{name: "flag with value", args: []string{"openrpc", "--protset=x"}, want: []string{"did you mean --protoset?"}},
		{name: "shorter flag", args: []string{"list", "--import", "x"}, want: []string{"did you mean --import-path?"}},
		{name: "flag of another command", args: []string{"list", "--listen", ":1"}, want: []string{"unknown flag: --listen: grpc-jsonrpc-bridge list does not take it"}},
		{name: "flag demo lacks", args: []string{"demo", "--backend", "x:1"}, want: []string{"unknown flag: --backend: grpc-jsonrpc-bridge demo does not take it"},
			not: []string{"keepalive"}},
		{name: "config key", args: []string{"serve", "--config", cfg}, want: []string{cfg + `: unknown key "lisen": did you mean "listen"?`},
			not: []string{"max_stream_bytes"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runSync(t, tt.args...)
			if code != exitUsage {
				t.Errorf("got exit code %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stderr, w) {
					t.Errorf("got stderr %q, want it to contain %q", stderr, w)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(stderr, n) {
					t.Errorf("got stderr %q, want no %q", stderr, n)
				}
			}
		})
	}
}

// TestOpenRPCDefaultsShown: the defaults of the document's title and
// version are those --help and --print-config show.
func TestOpenRPCDefaultsShown(t *testing.T) {
	_, help, _ := runSync(t, "openrpc", "--help")
	for _, w := range []string{`(default "gRPC services over JSON-RPC")`, `(default "0.0.0")`} {
		if !strings.Contains(help, w) {
			t.Errorf("openrpc --help lacks %s", w)
		}
	}
	_, printed, _ := runSync(t, "serve", "--print-config")
	for _, w := range []string{"openrpc_title: gRPC services over JSON-RPC\n", "openrpc_version: 0.0.0\n"} {
		if !strings.Contains(printed, w) {
			t.Errorf("--print-config lacks %q:\n%s", w, printed)
		}
	}
	code, stdout, stderr := runSync(t, "openrpc", "--protoset", testProtoset)
	if code != exitOK {
		t.Fatalf("exit code %d; stderr:\n%s", code, stderr)
	}
	if d := checkDocument(t, stdout); d.Info.Title != "gRPC services over JSON-RPC" || d.Info.Version != "0.0.0" {
		t.Errorf("got info %+v, want the defaults shown", d.Info)
	}
}

// TestServeWithoutReflection: serve against a backend whose reflection
// answers Unimplemented warns once that --protoset or --proto are needed,
// as openrpc says, and keeps retrying slowly, not reported.
func TestServeWithoutReflection(t *testing.T) {
	t.Parallel() // its own backend and bridge
	p, addr := startServing(t, "--backend", startPlainBackend(t))
	first := p.stderr.until(t, "a warning", func(l string) bool { return strings.Contains(l, `"level":"WARN"`) })
	warning := first[len(first)-1]
	for _, want := range []string{"no server reflection", "--protoset", "--proto", `"backend":"default"`} {
		if !strings.Contains(warning, want) {
			t.Errorf("got warning %s, want it to contain %s", warning, want)
		}
	}
	// The fastest backoff would have retried several times by now. A
	// sleep: what is asserted after it is that no retry warned again,
	// and a "never" has no condition to await.
	time.Sleep(1500 * time.Millisecond)
	status, body := do(t, "http://"+addr+"/readyz", "")
	if status != 503 || !strings.Contains(body, "reflection") {
		t.Errorf("readyz: got %d %s, want 503 naming the missing reflection", status, body)
	}
	if code := p.stop(t); code != exitOK {
		t.Errorf("got exit code %d, want 0", code)
	}
	if rest := p.stderr.rest(); strings.Contains(rest, `"level":"WARN"`) {
		t.Errorf("got more warnings after the first:\n%s", rest)
	}
}
