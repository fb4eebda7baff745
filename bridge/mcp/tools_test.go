package mcp

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

func compile(t *testing.T, files ...string) []protoreflect.MethodDescriptor {
	t.Helper()
	reg, err := bridgereflect.CompileProtos(context.Background(), []string{"testdata"}, files)
	if err != nil {
		t.Fatal(err)
	}
	return reg.Methods()
}

func TestTools(t *testing.T) {
	methods := compile(t, "tools.proto", "clash.proto", "clash2.proto")
	tools := Tools(methods, false)
	byTitle := map[string]*sdk.Tool{}
	for name, tl := range tools {
		if tl.Name != name || !ValidName(name) {
			t.Errorf("tool %q named %q", name, tl.Name)
		}
		byTitle[tl.Title] = tl
	}
	for _, gone := range []string{"tools.v1.Library.Upload", "tools.v1.Library.Sync"} {
		if byTitle[gone] != nil {
			t.Errorf("%s: client and bidirectional streams are left out", gone)
		}
	}
	tests := []struct {
		title       string
		name        string
		description []string // parts it holds
		annotations *sdk.ToolAnnotations
		wrap        string
	}{
		{title: "tools.v1.Library.GetBook", name: "tools_v1_Library_GetBook",
			description: []string{"GetBook returns one book.\n\nIt never changes anything.", "Service tools.v1.Library: Library keeps books."},
			annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true}},
		{title: "tools.v1.Library.PutBook", name: "tools_v1_Library_PutBook",
			description: []string{"PutBook stores a book"}, annotations: &sdk.ToolAnnotations{IdempotentHint: true}},
		{title: "tools.v1.Library.AddBook", name: "tools_v1_Library_AddBook", description: []string{"AddBook adds a book."}},
		{title: "tools.v1.Library.Now", name: "tools_v1_Library_Now", description: []string{"Now returns"}, wrap: ResultKey},
		{title: "tools.v1.Library.Old", name: "tools_v1_Library_Old", description: []string{"Old is deprecated.", "Deprecated."}},
		{title: "tools.v1.Library.Watch", name: "tools_v1_Library_Watch", description: []string{"Watch streams", "Server streaming"}, wrap: MessagesKey},
		{title: "tools.v1.AServiceWhoseNameIsLongEnoughToPushTheToolNameOverTheLimit.AMethodWithALongNameToo",
			description: []string{"Calls the gRPC method /tools.v1.AServiceWhoseNameIsLongEnoughToPushTheToolNameOverTheLimit/AMethodWithALongNameToo."}},
		{title: "a.b_c.S.M"},
		{title: "a_b.c.S.M"},
	}
	for _, tt := range tests {
		t.Run(tt.title, func(t *testing.T) {
			tl := byTitle[tt.title]
			if tl == nil {
				t.Fatalf("no tool titled %s", tt.title)
			}
			if tt.name != "" && tl.Name != tt.name {
				t.Errorf("name %q, want %q", tl.Name, tt.name)
			}
			for _, part := range tt.description {
				if !strings.Contains(tl.Description, part) {
					t.Errorf("description %q lacks %q", tl.Description, part)
				}
			}
			if got, want := marshal(t, tl.Annotations), marshal(t, tt.annotations); got != want {
				t.Errorf("annotations %s, want %s", got, want)
			}
			in := tl.InputSchema.(map[string]any)
			if in["type"] != "object" {
				t.Errorf("inputSchema type %v, want object", in["type"])
			}
			out := tl.OutputSchema.(map[string]any)
			if out["type"] != "object" {
				t.Errorf("outputSchema type %v, want object", out["type"])
			}
			var md protoreflect.MethodDescriptor
			for _, m := range methods {
				if mapping.MethodName(m) == tt.title {
					md = m
				}
			}
			params, result := mapping.MethodSchemas(md, false)
			if marshal(t, in) != marshal(t, params) {
				t.Errorf("inputSchema is not MethodSchemas' params:\n%s\n%s", marshal(t, in), marshal(t, params))
			}
			if tt.wrap == "" {
				if marshal(t, out) != marshal(t, result) {
					t.Errorf("outputSchema is not MethodSchemas' result")
				}
				return
			}
			props := out["properties"].(map[string]any)
			delete(result, "$defs")
			if marshal(t, props[tt.wrap]) != marshal(t, result) {
				t.Errorf("outputSchema.properties.%s is not the result schema: %s", tt.wrap, marshal(t, props[tt.wrap]))
			}
		})
	}
	if a, b := byTitle["a.b_c.S.M"], byTitle["a_b.c.S.M"]; a != nil && b != nil && (a.Name == b.Name || !strings.HasPrefix(a.Name, "a_b_c_S_M_")) {
		t.Errorf("clashing methods: %q and %q", a.Name, b.Name)
	}
	long := byTitle["tools.v1.AServiceWhoseNameIsLongEnoughToPushTheToolNameOverTheLimit.AMethodWithALongNameToo"]
	if long != nil && (len(long.Name) > MaxNameLength || !strings.Contains(long.Name, "AMethodWithALongNameToo_")) {
		t.Errorf("long name %q", long.Name)
	}
}

// TestToolSchemasAreTheDocuments: a tool's schemas are those of the
// OpenRPC document, with the references made local.
func TestToolSchemasAreTheDocuments(t *testing.T) {
	methods := compile(t, "tools.proto")
	raw, err := mapping.Document(methods, mapping.DocumentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Methods []struct {
			Name   string `json:"name"`
			Result struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"result"`
		} `json:"methods"`
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	local := func(b json.RawMessage) string {
		var v any
		if err := json.Unmarshal([]byte(strings.ReplaceAll(string(b), "#/components/schemas/", "#/$defs/")), &v); err != nil {
			t.Fatal(err)
		}
		return marshal(t, v)
	}
	tools := Tools(methods, false)
	get := tools["tools_v1_Library_GetBook"]
	in := get.InputSchema.(map[string]any)
	defs := in["$defs"]
	delete(in, "$defs")
	if marshal(t, in) != local(doc.Components.Schemas["tools.v1.GetBookRequest-input"]) {
		t.Errorf("GetBook's inputSchema is not the document's tools.v1.GetBookRequest-input")
	}
	if defs != nil {
		t.Errorf("GetBookRequest refers to nothing, but $defs is %s", marshal(t, defs))
	}
	out := tools["tools_v1_Library_GetBook"].OutputSchema.(map[string]any)
	outDefs := out["$defs"].(map[string]any)
	delete(out, "$defs")
	if marshal(t, out) != local(doc.Components.Schemas["tools.v1.Book"]) {
		t.Errorf("GetBook's outputSchema is not the document's tools.v1.Book")
	}
	// Book is recursive: the Books inside it are the document's deeper
	// levels of it, under $defs (the schemas have no $ref cycle).
	for _, name := range []string{"tools.v1.Book-2", "tools.v1.Book-3", "tools.v1.Book-4"} {
		if outDefs[name] == nil || marshal(t, outDefs[name]) != local(doc.Components.Schemas[name]) {
			t.Errorf("$defs[%q] of GetBook's outputSchema is not the document's: %s", name, marshal(t, outDefs))
		}
	}
	for _, m := range doc.Methods {
		if m.Name == "tools.v1.Library.Watch" {
			watch := tools["tools_v1_Library_Watch"].OutputSchema.(map[string]any)
			if got := marshal(t, watch["properties"].(map[string]any)[MessagesKey]); got != local(m.Result.Schema) {
				t.Errorf("Watch's messages schema %s is not the document's result %s", got, m.Result.Schema)
			}
		}
	}
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(x)
	return string(b)
}
