package reflect_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

const protoset = "../proto/testpb/test.protoset"

func methodNames(r *bridgereflect.Registry) []string {
	var names []string
	for _, md := range r.Methods() {
		names = append(names, string(md.FullName()))
	}
	return names
}

func leadingComment(d protoreflect.Descriptor) string {
	return strings.TrimSpace(d.ParentFile().SourceLocations().ByDescriptor(d).LeadingComments)
}

func TestReadProtoset(t *testing.T) {
	reg, err := bridgereflect.ReadProtoset(protoset)
	if err != nil {
		t.Fatal(err)
	}
	names := methodNames(reg)
	for _, want := range []string{"demo.v1.Notes.CreateNote", "helloworld.Greeter.SayHello", "rpc.ops.Ops.Ping", "test.v1.TestService.Echo"} {
		if !slices.Contains(names, want) {
			t.Errorf("methods %v lack %s", names, want)
		}
	}
	md, ok := reg.Method("demo.v1.Notes.CreateNote")
	if !ok {
		t.Fatal("no demo.v1.Notes.CreateNote")
	}
	if got := leadingComment(md); !strings.HasPrefix(got, "CreateNote stores a note") {
		t.Errorf("comment of CreateNote = %q, want the source comment", got)
	}
	if _, err := reg.Types().FindMessageByName("test.v1.AllTypes"); err != nil {
		t.Errorf("types lack test.v1.AllTypes: %v", err)
	}
}

func readSet(t *testing.T) *descriptorpb.FileDescriptorSet {
	t.Helper()
	b, err := os.ReadFile(protoset)
	if err != nil {
		t.Fatal(err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(b, &set); err != nil {
		t.Fatal(err)
	}
	return &set
}

// only returns a set of the named files of set.
func only(set *descriptorpb.FileDescriptorSet, names ...string) []byte {
	out := &descriptorpb.FileDescriptorSet{}
	for _, f := range set.File {
		if slices.Contains(names, f.GetName()) {
			out.File = append(out.File, f)
		}
	}
	b, _ := proto.Marshal(out)
	return b
}

func TestParseProtoset(t *testing.T) {
	set := readSet(t)
	tests := []struct {
		name    string
		b       []byte
		want    []string // method names; nil means an error
		wantErr error
	}{
		{name: "without well-known imports", b: only(set, "demo/v1/notes.proto"),
			want: []string{"demo.v1.Notes.CreateNote"}},
		{name: "helloworld alone", b: only(set, "helloworld/helloworld.proto"),
			want: []string{"helloworld.Greeter.SayHello"}},
		{name: "no services", b: only(set, "google/protobuf/empty.proto"), wantErr: bridgereflect.ErrNoServices},
		{name: "empty set", b: nil, wantErr: bridgereflect.ErrNoServices},
		{name: "not a descriptor set", b: []byte("not a protoset")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := bridgereflect.ParseProtoset(tt.b)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("got methods %v, want an error", methodNames(reg))
				}
				if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
					t.Errorf("error %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !slices.Contains(methodNames(reg), w) {
					t.Errorf("methods %v lack %s", methodNames(reg), w)
				}
			}
		})
	}
}

func TestParseProtosetMissingImport(t *testing.T) {
	// A file importing a non-well-known file the set lacks.
	set := &descriptorpb.FileDescriptorSet{File: []*descriptorpb.FileDescriptorProto{{
		Name:       proto.String("a.proto"),
		Package:    proto.String("a"),
		Dependency: []string{"b.proto"},
	}}}
	b, _ := proto.Marshal(set)
	_, err := bridgereflect.ParseProtoset(b)
	if err == nil || !strings.Contains(err.Error(), "b.proto") {
		t.Errorf("error %v, want one naming the missing b.proto", err)
	}
}

func TestReadProtosetMissingFile(t *testing.T) {
	if _, err := bridgereflect.ReadProtoset(filepath.Join(t.TempDir(), "nope.protoset")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("error %v, want os.ErrNotExist", err)
	}
}

func TestCompileProtos(t *testing.T) {
	tests := []struct {
		name        string
		importPaths []string
		files       []string
	}{
		{"path under the import path", []string{"../proto"}, []string{"../proto/demo/v1/notes.proto"}},
		{"path relative to the import path", []string{"../proto"}, []string{"demo/v1/notes.proto"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := bridgereflect.CompileProtos(t.Context(), tt.importPaths, tt.files)
			if err != nil {
				t.Fatal(err)
			}
			md, ok := reg.Method("demo.v1.Notes.CreateNote")
			if !ok {
				t.Fatalf("methods %v lack demo.v1.Notes.CreateNote", methodNames(reg))
			}
			if got := leadingComment(md); !strings.HasPrefix(got, "CreateNote stores a note") {
				t.Errorf("comment of CreateNote = %q, want the source comment", got)
			}
			if got := leadingComment(md.Output().Fields().ByName("views")); !strings.HasPrefix(got, "views counts GetNote calls") {
				t.Errorf("comment of Note.views = %q", got)
			}
			if _, err := reg.Types().FindMessageByName("google.protobuf.Timestamp"); err != nil {
				t.Errorf("types lack the imported google.protobuf.Timestamp: %v", err)
			}
			fromSet, err := bridgereflect.ReadProtoset(protoset)
			if err != nil {
				t.Fatal(err)
			}
			var want []string
			for _, n := range methodNames(fromSet) {
				if strings.HasPrefix(n, "demo.v1.") {
					want = append(want, n)
				}
			}
			if got := methodNames(reg); !slices.Equal(got, want) {
				t.Errorf("compiled methods %v, want the protoset's %v", got, want)
			}
		})
	}
}

func TestCompileProtosErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.proto")
	if err := os.WriteFile(bad, []byte("syntax = \"proto3\";\nmessage {"), 0o644); err != nil {
		t.Fatal(err)
	}
	noSvc := filepath.Join(dir, "nosvc.proto")
	if err := os.WriteFile(noSvc, []byte("syntax = \"proto3\";\npackage x;\nmessage M {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		files []string
		want  error
	}{
		{"syntax error", []string{bad}, nil},
		{"missing file", []string{filepath.Join(dir, "nope.proto")}, nil},
		{"no files", nil, nil},
		{"no services", []string{noSvc}, bridgereflect.ErrNoServices},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := bridgereflect.CompileProtos(t.Context(), []string{dir}, tt.files)
			if err == nil {
				t.Fatal("no error, want one")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
}
