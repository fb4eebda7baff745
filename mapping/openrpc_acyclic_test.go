package mapping_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// TestDocumentHasNoRefCycle: the components of the test services'
// document, whose test.v1.Tree holds Trees, refer to one another without
// a cycle (some OpenRPC tools, @open-rpc/schema-utils-js among them, loop
// for ever on one), and the recursive message is described four levels
// deep before it is any object.
func TestDocumentHasNoRefCycle(t *testing.T) {
	files := protosetFiles(t)
	for _, opts := range []mapping.DocumentOptions{{}, {EmitUnpopulated: true}} {
		doc := document(t, serviceMethods(t, files, "demo.v1.Notes", "helloworld.Greeter", "rpc.ops.Ops", "test.v1.TestService"), opts)
		var d struct {
			Components struct {
				Schemas map[string]any `json:"schemas"`
			} `json:"components"`
		}
		if err := json.Unmarshal(doc, &d); err != nil {
			t.Fatal(err)
		}
		schemas := d.Components.Schemas
		for _, name := range []string{"test.v1.Tree", "test.v1.Tree-2", "test.v1.Tree-3", "test.v1.Tree-4", "test.v1.Tree-input", "test.v1.Tree-input-4"} {
			if schemas[name] == nil {
				t.Errorf("no components.schemas[%q]", name)
			}
		}
		if schemas["test.v1.Tree-5"] != nil {
			t.Error("test.v1.Tree is described 5 levels deep, want 4")
		}
		const prefix = "#/components/schemas/"
		state := map[string]int{} // 1 visiting, 2 done
		var visit func(name string, path []string)
		var walk func(v any, path []string)
		walk = func(v any, path []string) {
			switch v := v.(type) {
			case map[string]any:
				if ref, ok := v["$ref"].(string); ok && strings.HasPrefix(ref, prefix) {
					visit(strings.TrimPrefix(ref, prefix), path)
				}
				for _, e := range v {
					walk(e, path)
				}
			case []any:
				for _, e := range v {
					walk(e, path)
				}
			}
		}
		visit = func(name string, path []string) {
			switch state[name] {
			case 1:
				t.Fatalf("a $ref cycle: %s -> %s", strings.Join(path, " -> "), name)
			case 2:
				return
			}
			state[name] = 1
			walk(schemas[name], append(path, name))
			state[name] = 2
		}
		for name := range schemas {
			visit(name, nil)
		}
	}
}
