package mapping_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// protosetFiles links proto/testpb/test.protoset, which carries source
// info, so documents built from it have descriptions.
func protosetFiles(t testing.TB) *protoregistry.Files {
	t.Helper()
	b, err := os.ReadFile("../proto/testpb/test.protoset")
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// serviceMethods returns the methods of the named services of files.
func serviceMethods(t testing.TB, files *protoregistry.Files, services ...string) []protoreflect.MethodDescriptor {
	t.Helper()
	var mds []protoreflect.MethodDescriptor
	for _, name := range services {
		d, err := files.FindDescriptorByName(protoreflect.FullName(name))
		if err != nil {
			t.Fatalf("service %s: %v", name, err)
		}
		sd := d.(protoreflect.ServiceDescriptor)
		for i := range sd.Methods().Len() {
			mds = append(mds, sd.Methods().Get(i))
		}
	}
	return mds
}

// demoInfo is the info of the golden demo document.
var demoInfo = mapping.DocumentInfo{
	Title:   "Demo notes",
	Version: "1.0.0",
	Servers: []mapping.Server{{Name: "local", URL: "http://localhost:8080/"}},
}

func document(t testing.TB, mds []protoreflect.MethodDescriptor, opts mapping.DocumentOptions) []byte {
	t.Helper()
	b, err := mapping.Document(mds, opts)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func unmarshalJSON(t testing.TB, b []byte) any {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("%s is not JSON: %v", b, err)
	}
	return v
}

// docSchemas compiles the components.schemas of an OpenRPC document.
type docSchemas struct {
	t testing.TB
	c *jsonschema.Compiler
}

const docURL = "mem://openrpc.json"

func newDocSchemas(t testing.TB, doc []byte) *docSchemas {
	t.Helper()
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	if err := c.AddResource(docURL, unmarshalJSON(t, doc)); err != nil {
		t.Fatal(err)
	}
	return &docSchemas{t: t, c: c}
}

// component compiles components.schemas[name].
func (d *docSchemas) component(name string) *jsonschema.Schema {
	d.t.Helper()
	return d.pointer("/components/schemas/" + name)
}

// pointer compiles the schema at a JSON pointer of the document.
func (d *docSchemas) pointer(ptr string) *jsonschema.Schema {
	d.t.Helper()
	sch, err := d.c.Compile(docURL + "#" + ptr)
	if err != nil {
		d.t.Fatalf("compile %s: %v", ptr, err)
	}
	return sch
}

// metaSchema compiles the OpenRPC meta-schema kept under testdata. Both
// files declare the json-schema.tools dialect, which is draft-07; they are
// read as draft-07.
func metaSchema(t testing.TB) *jsonschema.Schema {
	t.Helper()
	docs := map[string]any{}
	for url, file := range map[string]string{
		"https://meta.open-rpc.org/":      "meta-schema.json",
		"https://meta.json-schema.tools/": "json-schema-tools-meta-schema.json",
	} {
		b, err := os.ReadFile(filepath.Join("testdata", "openrpc", file))
		if err != nil {
			t.Fatal(err)
		}
		v := unmarshalJSON(t, b).(map[string]any)
		v["$schema"] = "http://json-schema.org/draft-07/schema#"
		docs[url] = v
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.UseLoader(mapLoader(docs))
	sch, err := c.Compile("https://meta.open-rpc.org/")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

// mapLoader serves schemas from memory; a URL matches with or without its
// trailing slash, as the OpenRPC meta-schema refers to
// "https://meta.json-schema.tools".
type mapLoader map[string]any

func (l mapLoader) Load(url string) (any, error) {
	url, _, _ = strings.Cut(url, "#")
	if v, ok := l[url]; ok {
		return v, nil
	}
	if v, ok := l[url+"/"]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("no schema %s in testdata", url)
}
