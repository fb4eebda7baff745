package bridge_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

func TestDiscoverAndOpenRPCJSONAreIdentical(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{Document: mapping.DocumentInfo{Title: "Test", Version: "3.0.0"}})
	code, served := e.do(t, http.MethodGet, "/openrpc.json", "", "")
	if code != http.StatusOK {
		t.Fatalf("GET /openrpc.json: HTTP %d %s, want 200", code, served)
	}
	code, reply := e.post(t, `{"jsonrpc": "2.0", "method": "rpc.discover", "id": 1}`)
	if code != http.StatusOK {
		t.Fatalf("rpc.discover: HTTP %d %s", code, reply)
	}
	var r struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(reply, &r); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(compact(t, r.Result), compact(t, served)) {
		t.Errorf("rpc.discover result differs from GET /openrpc.json:\n%s\n%s", r.Result, served)
	}
	var doc struct {
		OpenRPC string            `json:"openrpc"`
		Info    map[string]string `json:"info"`
		Methods []struct {
			Name string `json:"name"`
		} `json:"methods"`
	}
	if err := json.Unmarshal(served, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.OpenRPC != "1.3.2" || doc.Info["title"] != "Test" || doc.Info["version"] != "3.0.0" {
		t.Errorf("document head = %s %v, want 1.3.2 with the configured info", doc.OpenRPC, doc.Info)
	}
	names := map[string]bool{}
	for _, m := range doc.Methods {
		names[m.Name] = true
	}
	for _, want := range []string{"demo.v1.Notes.CreateNote", ".rpc.ops.Ops.Ping", "test.v1.TestService.Echo", "helloworld.Greeter.SayHello"} {
		if !names[want] {
			t.Errorf("document lacks method %s", want)
		}
	}
	// rpc.discover with empty params is the same call.
	for _, params := range []string{`{}`, `[]`} {
		got := e.call(t, `{"jsonrpc": "2.0", "method": "rpc.discover", "params": `+params+`, "id": 2}`)
		b, _ := json.Marshal(got["result"])
		if !bytes.Equal(compact(t, b), compact(t, served)) {
			t.Errorf("rpc.discover with params %s differs from GET /openrpc.json", params)
		}
	}
}

func compact(t testing.TB, b []byte) []byte {
	t.Helper()
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	out, _ := json.Marshal(v)
	return out
}

// served is the OpenRPC document a bridge serves, compiled for validation.
type served struct {
	c       *jsonschema.Compiler
	methods map[string]int // name -> index in methods
	doc     struct {
		Methods []struct {
			Name           string `json:"name"`
			ParamStructure string `json:"paramStructure"`
			Params         []struct {
				Name     string `json:"name"`
				Required bool   `json:"required"`
			} `json:"params"`
		} `json:"methods"`
	}
}

const servedURL = "mem://openrpc.json"

func serveDocument(t testing.TB, e *env) *served {
	t.Helper()
	code, b := e.do(t, http.MethodGet, "/openrpc.json", "", "")
	if code != http.StatusOK {
		t.Fatalf("GET /openrpc.json: HTTP %d", code)
	}
	s := &served{c: jsonschema.NewCompiler(), methods: map[string]int{}}
	s.c.DefaultDraft(jsonschema.Draft7)
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.c.AddResource(servedURL, v); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &s.doc); err != nil {
		t.Fatal(err)
	}
	for i, m := range s.doc.Methods {
		s.methods[m.Name] = i
	}
	return s
}

// checkParams validates params, a JSON object, against the method's param
// schemas: every member names a param and matches its schema, and every
// required param is there.
func (s *served) checkParams(t testing.TB, method, params string) error {
	t.Helper()
	i, ok := s.methods[method]
	if !ok {
		t.Fatalf("document lacks %s", method)
	}
	if strings.HasPrefix(params, "[") && s.doc.Methods[i].ParamStructure == "either" {
		// by position, for a unary method: element j is param j
		var elems []json.RawMessage
		if err := json.Unmarshal([]byte(params), &elems); err != nil {
			return err
		}
		ps := s.doc.Methods[i].Params
		if len(elems) > len(ps) {
			return &paramError{"more params than the method has"}
		}
		for j, p := range ps {
			if j >= len(elems) {
				if p.Required {
					return &paramError{"missing required param " + p.Name}
				}
				continue
			}
			if err := s.validate(t, "/methods/"+itoa(i)+"/params/"+itoa(j)+"/schema", elems[j]); err != nil {
				return err
			}
		}
		return nil
	}
	if strings.HasPrefix(params, "[") {
		// by position: the request messages of a client- or
		// bidirectional-streaming call, as its x-grpc-streaming describes them
		return s.validate(t, "/methods/"+itoa(i)+"/x-grpc-streaming/http/params", []byte(params))
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal([]byte(params), &members); err != nil {
		return err
	}
	byName := map[string]int{}
	for j, p := range s.doc.Methods[i].Params {
		byName[p.Name] = j
		if _, ok := members[p.Name]; p.Required && !ok {
			return &paramError{"missing required param " + p.Name}
		}
	}
	for name, raw := range members {
		j, ok := byName[name]
		if !ok {
			return &paramError{"no param named " + name}
		}
		if err := s.validate(t, "/methods/"+itoa(i)+"/params/"+itoa(j)+"/schema", raw); err != nil {
			return err
		}
	}
	return nil
}

// checkResult validates a result against the method's result schema.
func (s *served) checkResult(t testing.TB, method string, result []byte) error {
	t.Helper()
	return s.validate(t, "/methods/"+itoa(s.methods[method])+"/result/schema", result)
}

func (s *served) validate(t testing.TB, ptr string, raw []byte) error {
	t.Helper()
	sch, err := s.c.Compile(servedURL + "#" + ptr)
	if err != nil {
		t.Fatalf("compile %s: %v", ptr, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	return sch.Validate(v)
}

type paramError struct{ msg string }

func (e *paramError) Error() string { return e.msg }

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// TestDemoCallsMatchTheDocument calls every demo method for real: the
// params match the params schemas and the results the result schema. A
// table of params the bridge rejects with -32602 fails the schemas too.
func TestDemoCallsMatchTheDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	s := serveDocument(t, e)
	calls := []struct{ method, params string }{
		{"demo.v1.Notes.CreateNote", `{"note": {"title": "t", "body": "b", "tags": ["x"], "labels": {"k": "v"}, "priority": "PRIORITY_HIGH", "author": {"name": "a", "email": "a@b"}}}`},
		{"demo.v1.Notes.CreateNote", `{"note": {"title": "u", "priority": 1, "views": "3", "created_at": "2024-05-01T12:00:00Z"}}`},
		{"demo.v1.Notes.GetNote", `{"id": "$id"}`},
		{"demo.v1.Notes.ListNotes", `{"tags": ["x"]}`},
		{"demo.v1.Notes.ListNotes", `{}`},
		{"demo.v1.Notes.Increment", `{"delta": "5"}`},
		{"demo.v1.Notes.Increment", `{"delta": -2}`},
		{"demo.v1.Notes.GetCounter", `{}`},
		// unary methods by position: element i is param i
		{"demo.v1.Notes.CreateNote", `[{"title": "p", "tags": ["x"], "priority": "PRIORITY_LOW", "views": 9007199254740993}]`},
		{"demo.v1.Notes.GetNote", `["$id"]`},
		{"demo.v1.Notes.ListNotes", `[["x"]]`},
		{"demo.v1.Notes.ListNotes", `[null]`},
		{"demo.v1.Notes.Increment", `["9007199254740993"]`},
		{"demo.v1.Notes.GetCounter", `[]`},
		// streaming methods, over HTTP: one request, one reply
		{"demo.v1.Notes.WatchNotes", `{"tags": ["x"]}`},
		{"demo.v1.Notes.WatchNotes", `{"tags": ["none"]}`},
		{"demo.v1.Notes.WatchNotes", `[["x"], false]`}, // a server stream's one request by position
		{"demo.v1.Notes.WatchNotes", `[]`},
		{"demo.v1.Notes.ImportNotes", `[{"note": {"title": "Milk", "tags": ["x"]}}, {"note": {"title": "Eggs"}}]`},
		{"demo.v1.Notes.ImportNotes", `[]`},
		{"demo.v1.Notes.TagNotes", `[{"id": "$id", "tag": "pinned"}, {"id": "$id", "tag": "todo"}]`},
	}
	seen := map[string]bool{}
	id := ""
	for _, c := range calls {
		c.params = strings.ReplaceAll(c.params, "$id", id)
		if err := s.checkParams(t, c.method, c.params); err != nil {
			t.Errorf("%s params %s do not match the params schemas: %v", c.method, c.params, err)
		}
		r := e.call(t, `{"jsonrpc": "2.0", "method": "`+c.method+`", "params": `+c.params+`, "id": 1}`)
		if errCode(t, r) != 0 {
			t.Fatalf("%s %s: error %v", c.method, c.params, r["error"])
		}
		res, _ := json.Marshal(r["result"])
		if note, ok := r["result"].(map[string]any); ok && id == "" && note["id"] != nil {
			id, _ = note["id"].(string)
		}
		if err := s.checkResult(t, c.method, res); err != nil {
			t.Errorf("%s result %s does not match the result schema: %v", c.method, res, err)
		}
		seen[c.method] = true
	}
	for name := range s.methods {
		if strings.HasPrefix(name, "demo.v1.") && !seen[name] {
			t.Errorf("demo method %s is not called", name)
		}
	}

	bad := []struct{ name, method, params string }{
		{"unknown param", "demo.v1.Notes.GetNote", `{"ident": "1"}`},
		{"string as number", "demo.v1.Notes.GetNote", `{"id": 1}`},
		{"int64 word", "demo.v1.Notes.Increment", `{"delta": "five"}`},
		{"int64 fraction", "demo.v1.Notes.Increment", `{"delta": 1.5}`},
		{"int64 out of range", "demo.v1.Notes.Increment", `{"delta": 9223372036854775808}`},
		{"unknown enum name", "demo.v1.Notes.CreateNote", `{"note": {"title": "t", "priority": "PRIORITY_URGENT"}}`},
		{"unknown nested field", "demo.v1.Notes.CreateNote", `{"note": {"title": "t", "color": "red"}}`},
		{"bad timestamp", "demo.v1.Notes.CreateNote", `{"note": {"title": "t", "createdAt": "yesterday"}}`},
		{"map value type", "demo.v1.Notes.CreateNote", `{"note": {"title": "t", "labels": {"k": 1}}}`},
		{"both names", "demo.v1.Notes.CreateNote", `{"note": {"title": "t", "createdAt": "2024-05-01T12:00:00Z", "created_at": "2024-05-01T12:00:00Z"}}`},
		{"repeated as string", "demo.v1.Notes.ListNotes", `{"tags": "x"}`},
		{"null in list", "demo.v1.Notes.ListNotes", `{"tags": [null]}`},
		{"params to a method without any", "demo.v1.Notes.GetCounter", `{"x": 1}`},
		{"by position: string as number", "demo.v1.Notes.GetNote", `[1]`},
		{"by position: too many", "demo.v1.Notes.GetNote", `["a", "b"]`},
		{"by position: int64 fraction", "demo.v1.Notes.Increment", `[1.5]`},
		{"by position: unknown nested field", "demo.v1.Notes.CreateNote", `[{"title": "t", "color": "red"}]`},
		{"by position: params to a method without any", "demo.v1.Notes.GetCounter", `[1]`},
		{"server stream by position", "demo.v1.Notes.WatchNotes", `[{"tags": ["x"]}]`},
		{"server stream by position: too many", "demo.v1.Notes.WatchNotes", `[["x"], false, true]`},
		{"server stream by position: misfit", "demo.v1.Notes.WatchNotes", `["x"]`},
		{"client stream by name", "demo.v1.Notes.ImportNotes", `{"note": {"title": "t"}}`},
		{"client stream message field", "demo.v1.Notes.ImportNotes", `[{"note": {"title": "t", "views": "many"}}]`},
		{"client stream message not an object", "demo.v1.Notes.ImportNotes", `[{"note": {"title": "t"}}, "x"]`},
		{"bidi stream unknown field", "demo.v1.Notes.TagNotes", `[{"id": "n1", "label": "x"}]`},
	}
	for _, b := range bad {
		t.Run(b.name, func(t *testing.T) {
			r := e.call(t, `{"jsonrpc": "2.0", "method": "`+b.method+`", "params": `+b.params+`, "id": 1}`)
			if got := errCode(t, r); got != -32602 {
				t.Fatalf("bridge answers %s with code %d, want -32602", b.params, got)
			}
			if err := s.checkParams(t, b.method, b.params); err == nil {
				t.Errorf("params %s match the params schemas, want them rejected as the bridge does", b.params)
			}
		})
	}
}

// The document follows the registry: a new Update serves a new document.
func TestDocumentFollowsUpdate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	_, before := e.do(t, http.MethodGet, "/openrpc.json", "", "")
	e.bridge.Update(onlyMethods{})
	code, after := e.do(t, http.MethodGet, "/openrpc.json", "", "")
	if code != http.StatusOK {
		t.Fatalf("GET /openrpc.json after Update: HTTP %d", code)
	}
	if bytes.Equal(before, after) || !strings.Contains(string(after), `"methods": []`) {
		t.Errorf("document after an Update with no methods = %s, want one without methods", after)
	}
	discovered := func() []byte {
		t.Helper()
		r := e.call(t, `{"jsonrpc": "2.0", "method": "rpc.discover", "id": 1}`)
		b, _ := json.Marshal(r["result"])
		return compact(t, b)
	}
	if got := discovered(); !bytes.Equal(got, compact(t, after)) {
		t.Errorf("rpc.discover after the Update = %s, want the new document", got)
	}
	// A new discovery of the backend brings the methods back, in both.
	reg, err := bridgereflect.Discover(t.Context(), e.conn)
	if err != nil {
		t.Fatal(err)
	}
	e.bridge.Update(reg)
	_, again := e.do(t, http.MethodGet, "/openrpc.json", "", "")
	if !bytes.Equal(again, before) {
		t.Errorf("document after rediscovery differs from the first one:\n%s\n%s", again, before)
	}
	if got := discovered(); !bytes.Equal(got, compact(t, before)) {
		t.Errorf("rpc.discover after rediscovery = %s, want the first document", got)
	}
}

// onlyMethods is a Catalog of no methods.
type onlyMethods struct{}

func (onlyMethods) Methods() []protoreflect.MethodDescriptor { return nil }
func (onlyMethods) Types() *protoregistry.Types              { return new(protoregistry.Types) }

// TestWebSocketStreamsMatchTheDocument opens a stream of each streaming
// demo method over WebSocket: the reply that opens it matches
// x-grpc-streaming.websocket.result, and every rpc.stream.message and
// rpc.stream.end notification matches the schema of its params there.
func TestWebSocketStreamsMatchTheDocument(t *testing.T) {
	t.Parallel()
	e := newEnv(t, bridge.Options{})
	s := serveDocument(t, e)
	w := dialWS(t, e)
	ws := func(method string) string {
		return "/methods/" + itoa(s.methods[method]) + "/x-grpc-streaming/websocket"
	}
	check := func(what, ptr string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		if err := s.validate(t, ptr, b); err != nil {
			t.Errorf("%s %s does not match %s: %v", what, b, ptr, err)
		}
	}
	// checkStream reads stream id to its end and checks each notification.
	checkStream := func(method, id string, wantMessages int) {
		t.Helper()
		n := 0
		for {
			m := w.recv()
			p := m["params"].(map[string]any)
			if p["stream"] != id {
				t.Fatalf("got %v while reading stream %s", m, id)
			}
			switch m["method"] {
			case "rpc.stream.message":
				n++
				check("rpc.stream.message params", ws(method)+"/notifications/0/params", p)
			case "rpc.stream.end":
				check("rpc.stream.end params", ws(method)+"/notifications/1/params", p)
				if n != wantMessages {
					t.Errorf("%s: got %d messages, want %d", method, n, wantMessages)
				}
				return
			}
		}
	}

	watch, _ := w.call(`{"jsonrpc": "2.0", "method": "demo.v1.Notes.WatchNotes", "params": {"tags": ["intro"]}, "id": 1}`)
	check("WatchNotes reply", ws("demo.v1.Notes.WatchNotes")+"/result", watch["result"])
	checkStream("demo.v1.Notes.WatchNotes", streamID(t, watch), 1)

	imp, _ := w.call(`{"jsonrpc": "2.0", "method": "demo.v1.Notes.ImportNotes", "id": 2}`)
	check("ImportNotes reply", ws("demo.v1.Notes.ImportNotes")+"/result", imp["result"])
	id := streamID(t, imp)
	if r := w.result(control("rpc.stream.send", id, `{"note": {"title": "Milk"}}`, 3)); r != true {
		t.Fatalf("rpc.stream.send: got %v, want true", r)
	}
	if r := w.result(control("rpc.stream.close", id, "", 4)); r != true {
		t.Fatalf("rpc.stream.close: got %v, want true", r)
	}
	checkStream("demo.v1.Notes.ImportNotes", id, 1)
	// a params array is answered at once, with the response message
	at, _ := w.call(`{"jsonrpc": "2.0", "method": "demo.v1.Notes.ImportNotes", "params": [{"note": {"title": "Eggs"}}], "id": 5}`)
	check("ImportNotes reply to a params array", ws("demo.v1.Notes.ImportNotes")+"/result", at["result"])

	tag, _ := w.call(`{"jsonrpc": "2.0", "method": "demo.v1.Notes.TagNotes", "id": 6}`)
	check("TagNotes reply", ws("demo.v1.Notes.TagNotes")+"/result", tag["result"])
	id = streamID(t, tag)
	if r := w.result(control("rpc.stream.send", id, `{"id": "n1", "tag": "pinned"}`, 7)); r != true {
		t.Fatalf("rpc.stream.send: got %v, want true", r)
	}
	if r := w.result(control("rpc.stream.send", id, `{"id": "n404", "tag": "pinned"}`, 8)); r != true {
		t.Fatalf("rpc.stream.send: got %v, want true", r)
	}
	checkStream("demo.v1.Notes.TagNotes", id, 1) // ends with NOT_FOUND
}
