package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/nodereflect"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/describe/*.proto from the --proto and --protoset sources")

// TestDescribeProto: describe --format proto prints a method (with its
// request and response messages), a service, a message or an enum as
// .proto source, the same from every source: with their comments from
// .proto files, from a descriptor set made with --include_source_info
// and from a reflection server sending such files without their
// dependencies (as grpc-js servers do); without comments from the
// reflection of grpc-go's generated code, which carries none; and the
// same definitions from @grpc/reflection 1.0.4's mangled files, repaired.
// The text is testdata/describe's, which -update rewrites from the
// --proto and --protoset cases.
func TestDescribeProto(t *testing.T) {
	goBackend := startBackend(t, nil)
	notes := []string{"--proto", notesProto, "-I", protoRoot}
	protoset := []string{"--protoset", testProtoset}
	sourced := []string{"--backend", sourceInfoBackend(t)}
	node := []string{"--backend", nodeBackend(t)}
	tests := []struct {
		name, target string
		args         []string
		golden       string // the file under testdata/describe the output is
		uncommented  bool   // the output is golden's without its comment lines, and has none
	}{
		{name: "method from .proto", target: "demo.v1.Notes.CreateNote", args: notes, golden: "createnote.proto"},
		{name: "method by gRPC name", target: "demo.v1.Notes/CreateNote", args: protoset, golden: "createnote.proto"},
		{name: "method from a reflection server sending source info", target: "demo.v1.Notes.CreateNote", args: sourced, golden: "createnote.proto"},
		{name: "method by reflection of generated code", target: "demo.v1.Notes.CreateNote", args: node, golden: "createnote.proto", uncommented: true},
		{name: "streaming method", target: "demo.v1.Notes.TagNotes", args: notes, golden: "tagnotes.proto"},
		{name: "service from .proto", target: "demo.v1.Notes", args: notes, golden: "notes.proto"},
		{name: "service from a descriptor set", target: "demo.v1.Notes", args: protoset, golden: "notes.proto"},
		{name: "service by reflection, repaired", target: "demo.v1.Notes", args: node, golden: "notes.proto", uncommented: true},
		{name: "message", target: "demo.v1.Note", args: notes, golden: "note.proto"},
		{name: "message with the printed leading dot", target: ".demo.v1.Note", args: protoset, golden: "note.proto"},
		{name: "message by reflection", target: "demo.v1.Note", args: sourced, golden: "note.proto"},
		{name: "enum", target: "demo.v1.Priority", args: protoset, golden: "priority.proto"},
		{name: "every kind of field", target: "test.v1.TestService.Echo", args: protoset, golden: "echo.proto"},
		{name: "every kind of field by reflection of grpc-go", target: "test.v1.TestService.Echo", args: []string{"--backend", goBackend},
			golden: "echo.proto", uncommented: true},
		{name: "every kind of field, mangled by @grpc/reflection 1.0.4 and repaired", target: "test.v1.TestService.Echo", args: node,
			golden: "echo.proto", uncommented: true},
		{name: "recursive message", target: "test.v1.Tree", args: protoset, golden: "tree.proto"},
		{name: "nested message", target: "demo.v1.Note.LabelsEntry", args: notes, golden: "labelsentry.proto"},
		{name: "nested message, renamed by @grpc/reflection 1.0.4 and repaired", target: "demo.v1.Note.LabelsEntry", args: node,
			golden: "labelsentry.proto", uncommented: true},
		{name: "service of package rpc", target: ".rpc.ops.Ops.Ping", args: protoset, golden: "ping.proto"},
		{name: "greeter", target: "helloworld.Greeter", args: protoset, golden: "greeter.proto"},
		{name: "greeter by reflection of grpc-go", target: "helloworld.Greeter", args: []string{"--backend", goBackend},
			golden: "greeter.proto", uncommented: true},
		{name: "well-known type the files import", target: "google.protobuf.Timestamp", args: notes, golden: "timestamp.proto"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, append([]string{"describe", tt.target, "--format", "proto"}, tt.args...)...)
			if code != exitOK {
				t.Fatalf("got exit code %d, want 0; stderr:\n%s", code, stderr)
			}
			path := filepath.Join("testdata", "describe", tt.golden)
			if *update && !tt.uncommented && tt.args[0] != "--backend" {
				if err := os.WriteFile(path, []byte(stdout), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			want := string(b)
			if tt.uncommented {
				want = withoutComments(want)
				if strings.Contains(stdout, "//") {
					t.Errorf("got comments from descriptors that carry none:\n%s", stdout)
				}
			}
			if stdout != want {
				t.Errorf("got\n%s\nwant (%s)\n%s", stdout, path, want)
			}
		})
	}
}

// withoutComments is text without its comment lines, as protoprint prints
// it from descriptors without source info.
func withoutComments(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(strings.TrimSpace(line), "//") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// sourceInfoBackend serves, by reflection, demo.v1.Notes's file as the
// descriptor set has it, with its comments (source info), and without its
// dependency list, as grpc-js servers send files.
func sourceInfoBackend(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(testProtoset)
	if err != nil {
		t.Fatal(err)
	}
	set := new(descriptorpb.FileDescriptorSet)
	if err := proto.Unmarshal(b, set); err != nil {
		t.Fatal(err)
	}
	var files []*descriptorpb.FileDescriptorProto
	for _, f := range set.GetFile() {
		if f.GetName() == "demo/v1/notes.proto" {
			if f.GetSourceCodeInfo() == nil {
				t.Fatal("the descriptor set has no source info for demo/v1/notes.proto")
			}
			files = append(files, f)
		}
	}
	return testserver.Start(t, testserver.Options{Addr: testserver.Loopback, NoConn: true, Reflection: testserver.ReflectionNone,
		Services: []testserver.Service{testserver.Notes, func(s *grpc.Server) { nodereflect.New(files...).Register(s, nodereflect.V1) }}}).Addr()
}

// nodeBackend serves helloworld.Greeter, demo.v1.Notes and
// test.v1.TestService by reflection as @grpc/reflection 1.0.4 does: one
// file per package, no dependency lists, relative type names, map
// entries and proto3 optional fields otherwise than protoc has them.
func nodeBackend(t *testing.T) string {
	t.Helper()
	seen := map[string]bool{}
	var files []*descriptorpb.FileDescriptorProto
	var add func(fd protoreflect.FileDescriptor)
	add = func(fd protoreflect.FileDescriptor) {
		if seen[fd.Path()] {
			return
		}
		seen[fd.Path()] = true
		imports := fd.Imports()
		for i := range imports.Len() {
			add(imports.Get(i).FileDescriptor)
		}
		files = append(files, protodesc.ToFileDescriptorProto(fd))
	}
	for _, fd := range []protoreflect.FileDescriptor{helloworld.File_helloworld_helloworld_proto,
		demov1.File_demo_v1_notes_proto, testv1.File_testpb_v1_test_proto} {
		add(fd)
	}
	return testserver.Start(t, testserver.Options{Addr: testserver.Loopback, NoConn: true, Reflection: testserver.ReflectionNone,
		Services: []testserver.Service{testserver.Greeter, testserver.Notes, testserver.Test(testv1.NewServer()),
			func(s *grpc.Server) { nodereflect.NewNode(nodereflect.Node104, files...).Register(s, nodereflect.V1) }}}).Addr()
}

// TestDescribeFormatErrors: an unknown --format is a usage error naming
// the formats, found before any source is read; a name that is nothing
// gets the same error with --format proto as without; without it, a
// service, message or enum is told of --format proto.
func TestDescribeFormatErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantStderr string // the first line, exactly
		sameAs     []string
	}{
		{name: "unknown format", args: []string{"describe", "helloworld.Greeter.SayHello", "--format", "yaml", "--protoset", testProtoset},
			wantStderr: `grpc-jsonrpc-bridge: --format "yaml": want json or proto`},
		{name: "unknown format before the source", args: []string{"describe", "x", "--format", "text", "--protoset", "/nonexistent.protoset"},
			wantStderr: `grpc-jsonrpc-bridge: --format "text": want json or proto`},
		{name: "empty format", args: []string{"describe", "x", "--format", "", "--protoset", testProtoset},
			wantStderr: `grpc-jsonrpc-bridge: --format "": want json or proto`},
		{name: "no such name", args: []string{"describe", "zzz", "--format", "proto", "--protoset", testProtoset},
			wantStderr: `grpc-jsonrpc-bridge: no method "zzz" (list prints every method)`,
			sameAs:     []string{"describe", "zzz", "--protoset", testProtoset}},
		{name: "a misspelt method", args: []string{"describe", "helloworld.Greeter.SayHelo", "--format", "proto", "--protoset", testProtoset},
			wantStderr: `grpc-jsonrpc-bridge: no method "helloworld.Greeter.SayHelo": did you mean "helloworld.Greeter.SayHello"? (list prints every method)`,
			sameAs:     []string{"describe", "helloworld.Greeter.SayHelo", "--protoset", testProtoset}},
		{name: "a message no served file has", args: []string{"describe", "google.rpc.Status", "--format", "proto", "--protoset", testProtoset},
			sameAs: []string{"describe", "google.rpc.Status", "--protoset", testProtoset}},
		{name: "a field is not a definition", args: []string{"describe", "demo.v1.Note.title", "--format", "proto", "--protoset", testProtoset},
			sameAs: []string{"describe", "demo.v1.Note.title", "--protoset", testProtoset}},
		{name: "json of a message", args: []string{"describe", "demo.v1.Note", "--protoset", testProtoset},
			wantStderr: `grpc-jsonrpc-bridge: "demo.v1.Note" is a message, not a method: describe --format proto prints it`},
		{name: "json of an enum", args: []string{"describe", "demo.v1.Priority", "--format", "json", "--protoset", testProtoset},
			wantStderr: `grpc-jsonrpc-bridge: "demo.v1.Priority" is an enum, not a method: describe --format proto prints it`},
		{name: "json of a service", args: []string{"describe", "helloworld.Greeter", "--protoset", testProtoset},
			wantStderr: `grpc-jsonrpc-bridge: "helloworld.Greeter" is a service, not a method: describe one of its methods, helloworld.Greeter.SayHello, or --format proto prints the service`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, tt.args...)
			if code != exitUsage {
				t.Errorf("got exit code %d, want %d; stderr:\n%s", code, exitUsage, stderr)
			}
			if stdout != "" {
				t.Errorf("got stdout %q, want nothing", stdout)
			}
			first, _, _ := strings.Cut(stderr, "\n")
			if tt.wantStderr != "" && first != tt.wantStderr {
				t.Errorf("got stderr %q, want %q first", stderr, tt.wantStderr)
			}
			if !strings.Contains(stderr, "Run 'grpc-jsonrpc-bridge describe --help' for usage.") {
				t.Errorf("got stderr %q, want it to point to describe's help", stderr)
			}
			if tt.sameAs != nil {
				if code2, _, stderr2 := runSync(t, tt.sameAs...); code2 != code || stderr2 != stderr {
					t.Errorf("got exit code %d, stderr %q; want describe's as without --format: %d, %q", code, stderr, code2, stderr2)
				}
			}
		})
	}
}
