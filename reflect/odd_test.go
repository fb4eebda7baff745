package reflect

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/nodereflect"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// memSource answers reflection requests from files in memory, each answer
// carrying one file, without their dependency lists (as New of
// nodereflect does): a file by its path, the first file declaring a
// symbol.
type memSource struct {
	byPath   map[string][]byte
	bySymbol map[protoreflect.FullName]string
	asked    int
}

func newMemSource(files ...*descriptorpb.FileDescriptorProto) *memSource {
	m := &memSource{byPath: make(map[string][]byte), bySymbol: make(map[protoreflect.FullName]string)}
	for _, f := range files {
		f = proto.CloneOf(f)
		f.Dependency, f.PublicDependency, f.WeakDependency = nil, nil, nil
		b, err := proto.Marshal(f)
		if err != nil {
			panic(err)
		}
		if _, ok := m.byPath[f.GetName()]; ok {
			continue
		}
		m.byPath[f.GetName()] = b
		for name := range declarations(f) {
			if _, ok := m.bySymbol[name]; !ok {
				m.bySymbol[name] = f.GetName()
			}
		}
	}
	return m
}

func (m *memSource) answer(path string) ([][]byte, error) {
	m.asked++
	b, ok := m.byPath[path]
	if !ok {
		return nil, &answerError{status.New(codes.NotFound, "not found")}
	}
	return [][]byte{b}, nil
}

func (m *memSource) fileContainingSymbol(name string) ([][]byte, error) {
	return m.answer(m.bySymbol[protoreflect.FullName(name)])
}

func (m *memSource) fileByFilename(path string) ([][]byte, error) { return m.answer(path) }

// services lists the services the files declare, sorted, as a backend
// would list them.
func services(files ...*descriptorpb.FileDescriptorProto) []string {
	var names []string
	for _, f := range files {
		for _, s := range f.GetService() {
			names = append(names, string(join(protoreflect.FullName(f.GetPackage()), s.GetName())))
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// describeFiles discovers the services of files served by a memSource.
func describeFiles(t testing.TB, files ...*descriptorpb.FileDescriptorProto) (*Registry, error) {
	return describe(t.Context(), newDescriber(newMemSource(files...)), services(files...))
}

// Builders of hand-made descriptors.

func msg(name string, fields ...*descriptorpb.FieldDescriptorProto) *descriptorpb.DescriptorProto {
	return &descriptorpb.DescriptorProto{Name: proto.String(name), Field: fields}
}

func field(name string, number int32, typeName string) *descriptorpb.FieldDescriptorProto {
	f := &descriptorpb.FieldDescriptorProto{Name: proto.String(name), Number: proto.Int32(number),
		Label: descriptorpb.FieldDescriptorProto_LABEL_OPTIONAL.Enum()}
	if typeName == "" {
		f.Type = descriptorpb.FieldDescriptorProto_TYPE_STRING.Enum()
	} else {
		f.Type = descriptorpb.FieldDescriptorProto_TYPE_MESSAGE.Enum()
		f.TypeName = proto.String(typeName)
	}
	return f
}

func repeated(f *descriptorpb.FieldDescriptorProto) *descriptorpb.FieldDescriptorProto {
	f.Label = descriptorpb.FieldDescriptorProto_LABEL_REPEATED.Enum()
	return f
}

func inOneof(f *descriptorpb.FieldDescriptorProto, i int32) *descriptorpb.FieldDescriptorProto {
	f.OneofIndex = proto.Int32(i)
	return f
}

// entry is a map<string, string> entry message named name.
func entry(name string) *descriptorpb.DescriptorProto {
	m := msg(name, field("key", 1, ""), field("value", 2, ""))
	m.Options = &descriptorpb.MessageOptions{MapEntry: proto.Bool(true)}
	return m
}

func with(m *descriptorpb.DescriptorProto, nested ...*descriptorpb.DescriptorProto) *descriptorpb.DescriptorProto {
	m.NestedType = append(m.NestedType, nested...)
	return m
}

func oneofs(m *descriptorpb.DescriptorProto, names ...string) *descriptorpb.DescriptorProto {
	for _, n := range names {
		m.OneofDecl = append(m.OneofDecl, &descriptorpb.OneofDescriptorProto{Name: proto.String(n)})
	}
	return m
}

// file declares messages and a service Svc whose method Call takes and
// returns in, in package pkg, proto3.
func file(path, pkg, in string, messages ...*descriptorpb.DescriptorProto) *descriptorpb.FileDescriptorProto {
	return &descriptorpb.FileDescriptorProto{
		Name: proto.String(path), Package: proto.String(pkg), Syntax: proto.String("proto3"),
		MessageType: messages,
		Service: []*descriptorpb.ServiceDescriptorProto{{Name: proto.String("Svc"), Method: []*descriptorpb.MethodDescriptorProto{{
			Name: proto.String("Call"), InputType: proto.String(in), OutputType: proto.String(in),
		}}}},
	}
}

func wellKnownFile(path string) *descriptorpb.FileDescriptorProto {
	fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
	if err != nil {
		panic(err)
	}
	return protodesc.ToFileDescriptorProto(fd)
}

// TestRepairOddDescriptors: hand-made descriptors a backend might send,
// odd or hostile, are described when they can be and otherwise left out
// with a reason, never taken for something else.
func TestRepairOddDescriptors(t *testing.T) {
	deep := msg("L0")
	for i := 1; i <= maxScopeDepth; i++ {
		deep = with(msg("L"+strings.Repeat("x", i%3)), deep)
	}
	for _, tt := range []struct {
		name  string
		files []*descriptorpb.FileDescriptorProto
		// skipped is a part of the reason the service is left out for, ""
		// when it is served and check passes.
		skipped string
		check   func(t *testing.T, in protoreflect.MessageDescriptor)
	}{{
		name: "misnamed map entry, relative names",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			with(msg("M", repeated(field("by_name", 1, "By_name")), field("other", 2, "Other")), entry("By_name")),
			msg("Other"))},
		check: func(t *testing.T, in protoreflect.MessageDescriptor) {
			if fd := in.Fields().ByName("by_name"); !fd.IsMap() || fd.Message().Name() != "ByNameEntry" {
				t.Errorf("by_name: %v", fd)
			}
			if fd := in.Fields().ByName("other"); fd.Message().FullName() != "a.Other" {
				t.Errorf("other: %v", fd)
			}
		},
	}, {
		name: "entry used by two fields",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			with(msg("M", repeated(field("x", 1, "E")), repeated(field("y", 2, "E"))), entry("E")))},
		skipped: "incorrect implicit map entry name",
	}, {
		name: "entry's right name taken",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			with(msg("M", repeated(field("x", 1, "E"))), entry("E"), msg("XEntry")))},
		skipped: "incorrect implicit map entry name",
	}, {
		name: "entry of a field not repeated",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			with(msg("M", field("x", 1, "E")), entry("E")))},
		skipped: "is invalid",
	}, {
		name: "entry declaring a message",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			with(msg("M", repeated(field("x", 1, "E"))), with(entry("E"), msg("N"))))},
		skipped: "is invalid",
	}, {
		name: "entry of another message",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			msg("M", repeated(field("x", 1, ".a.O.E"))), with(msg("O"), entry("E")))},
		skipped: "is invalid",
	}, {
		name: "scoping: the innermost declaration wins",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a.b", ".a.b.M",
			with(msg("M", field("inner", 1, "T"), field("outer", 2, "b.T"), field("pkg", 3, "a.T")), msg("T")),
			msg("T")), {
			Name: proto.String("t.proto"), Package: proto.String("a"), Syntax: proto.String("proto3"),
			MessageType: []*descriptorpb.DescriptorProto{msg("T")},
		}},
		check: func(t *testing.T, in protoreflect.MessageDescriptor) {
			for name, want := range map[protoreflect.Name]protoreflect.FullName{"inner": "a.b.M.T", "outer": "a.b.T", "pkg": "a.T"} {
				if got := in.Fields().ByName(name).Message().FullName(); got != want {
					t.Errorf("%s is %s, want %s", name, got, want)
				}
			}
		},
	}, {
		name: "proto3 optional lost",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			oneofs(msg("M", inOneof(field("c1", 1, ""), 0), inOneof(field("c2", 2, ""), 0), inOneof(field("x", 3, ""), 1), inOneof(field("y", 4, ""), 2)),
				"choice", "_x", "_y"))},
		check: func(t *testing.T, in protoreflect.MessageDescriptor) {
			for _, name := range []protoreflect.Name{"x", "y"} {
				if !in.Fields().ByName(name).HasOptionalKeyword() {
					t.Errorf("%s is not optional", name)
				}
			}
			if in.Fields().ByName("c1").ContainingOneof().IsSynthetic() {
				t.Error("choice is synthetic")
			}
		},
	}, {
		name: "a real oneof after _x",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			oneofs(msg("M", inOneof(field("x", 1, ""), 0), inOneof(field("c", 2, ""), 1)), "_x", "choice"))},
		check: func(t *testing.T, in protoreflect.MessageDescriptor) {
			if fd := in.Fields().ByName("x"); fd.HasOptionalKeyword() || fd.ContainingOneof().Name() != "_x" {
				t.Errorf("x: %v, want in the real oneof _x", fd)
			}
		},
	}, {
		name: "_x of two fields, or of another name",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			oneofs(msg("M", inOneof(field("y", 3, ""), 0), inOneof(field("x", 1, ""), 1), inOneof(field("z", 2, ""), 1)), "_w", "_x"))},
		check: func(t *testing.T, in protoreflect.MessageDescriptor) {
			for i := range in.Fields().Len() {
				if fd := in.Fields().Get(i); fd.HasOptionalKeyword() {
					t.Errorf("%s is optional", fd.Name())
				}
			}
		},
	}, {
		name: "proto2 oneof _x",
		files: func() []*descriptorpb.FileDescriptorProto {
			f := file("a.proto", "a", ".a.M", oneofs(msg("M", inOneof(field("x", 1, ""), 0)), "_x"))
			f.Syntax = proto.String("proto2")
			return []*descriptorpb.FileDescriptorProto{f}
		}(),
		check: func(t *testing.T, in protoreflect.MessageDescriptor) {
			if in.Fields().ByName("x").HasOptionalKeyword() {
				t.Error("x is proto3 optional in proto2")
			}
		},
	}, {
		name: "a google.protobuf file with a type of its own",
		files: []*descriptorpb.FileDescriptorProto{
			file("a.proto", "a", ".a.M", msg("M", field("s", 1, "google.protobuf.Struct"), field("n", 2, "google.protobuf.Novel"))), {
				Name: proto.String("google_protobuf.proto"), Package: proto.String("google.protobuf"), Syntax: proto.String("proto3"),
				MessageType: []*descriptorpb.DescriptorProto{
					with(msg("Struct", repeated(field("fields", 1, "Fields"))), entry("Fields")),
					msg("Novel", field("s", 1, "Struct")),
				},
			}},
		check: func(t *testing.T, in protoreflect.MessageDescriptor) {
			s := in.Fields().ByName("s").Message()
			if s.ParentFile().Path() != "google/protobuf/struct.proto" {
				t.Errorf("Struct from %s", s.ParentFile().Path())
			}
			n := in.Fields().ByName("n").Message()
			if n.ParentFile().Path() != "google_protobuf.proto" || n.Fields().ByName("s").Message() != s {
				t.Errorf("Novel: %v of %s", n, n.ParentFile().Path())
			}
		},
	}, {
		name: "garbage at a well-known path",
		files: []*descriptorpb.FileDescriptorProto{
			file("a.proto", "a", ".a.M", msg("M", field("t", 1, ".google.protobuf.Timestamp"))),
			{Name: proto.String("google/protobuf/timestamp.proto"), Package: proto.String("evil"),
				MessageType: []*descriptorpb.DescriptorProto{msg("Timestamp", field("x", 1, ".nowhere.X"))}},
		},
		check: func(t *testing.T, in protoreflect.MessageDescriptor) {
			if ts := in.Fields().ByName("t").Message(); ts.Fields().ByName("seconds") == nil {
				t.Errorf("Timestamp: %v", ts)
			}
		},
	}, {
		name:    "a name too long",
		files:   []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M", msg("M", field(strings.Repeat("f", maxNameLength), 1, "")))},
		skipped: "beyond the bridge's bounds",
	}, {
		name:    "a package too deep",
		files:   []*descriptorpb.FileDescriptorProto{file("a.proto", strings.Repeat("p.", maxScopeDepth)+"p", ".a.M", msg("M"))},
		skipped: "beyond the bridge's bounds",
	}, {
		name:    "messages nested too deep",
		files:   []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M", msg("M"), deep)},
		skipped: "beyond the bridge's bounds",
	}, {
		name: "files importing each other",
		files: []*descriptorpb.FileDescriptorProto{
			file("a.proto", "a", ".a.M", msg("M", field("b", 1, ".b.B"))),
			{Name: proto.String("b.proto"), Package: proto.String("b"), Syntax: proto.String("proto3"),
				MessageType: []*descriptorpb.DescriptorProto{msg("B", field("m", 1, ".a.M"))}},
		},
		skipped: "a.proto imports itself (a.proto → b.proto → a.proto)",
	}, {
		name: "empty and dotted names",
		files: []*descriptorpb.FileDescriptorProto{file("a.proto", "a", ".a.M",
			msg("M", field("x", 1, "."), field("y", 2, ".."), field("z", 3, "a..M")), msg(""))},
		skipped: "",
	}} {
		t.Run(tt.name, func(t *testing.T) {
			reg, err := describeFiles(t, tt.files...)
			if err != nil {
				t.Fatalf("describe: %v", err)
			}
			skipped := reg.Skipped()
			if tt.skipped == "" && tt.check == nil {
				// Anything but a panic or an error will do; say what it is.
				for _, sk := range skipped {
					t.Logf("skipped %s: %s (%v)", sk.Name, sk.Reason, sk.Err)
				}
				return
			}
			if tt.skipped != "" {
				if len(skipped) != 1 || !strings.Contains(skipped[0].Reason+" "+skipped[0].Err.Error(), tt.skipped) {
					t.Fatalf("skipped %+v, want a.Svc left out: %s", skipped, tt.skipped)
				}
				t.Logf("reason: %s (%v)", skipped[0].Reason, skipped[0].Err)
				return
			}
			for _, sk := range skipped {
				t.Fatalf("skipped %s: %s (%v)", sk.Name, sk.Reason, sk.Err)
			}
			mds := reg.Methods()
			if len(mds) != 1 {
				t.Fatalf("methods %q", methodNames(reg))
			}
			tt.check(t, mds[0].Input())
		})
	}
}

// FuzzDescribe: whatever files a backend sends (a FileDescriptorSet,
// served without dependency lists), describing them does not panic, stays
// within its bounds and gives the same files every time. The seeds are
// large: fuzz with a short minimization,
//
//	go test -run '^$' -fuzz FuzzDescribe -fuzztime 60s -fuzzminimizetime 20x ./reflect/
func FuzzDescribe(f *testing.F) {
	addDescribeSeeds(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		set := new(descriptorpb.FileDescriptorSet)
		if proto.Unmarshal(b, set) != nil || len(set.GetFile()) > 50 {
			return
		}
		for _, fdp := range set.GetFile() {
			if fdp == nil {
				return
			}
		}
		src := newMemSource(set.GetFile()...)
		first, err := describe(t.Context(), newDescriber(src), services(set.GetFile()...))
		if err != nil {
			return
		}
		if src.asked > maxQuestions {
			t.Fatalf("%d requests", src.asked)
		}
		again, err := describe(t.Context(), newDescriber(newMemSource(set.GetFile()...)), services(set.GetFile()...))
		if err != nil {
			t.Fatalf("the second description failed: %v", err)
		}
		if a, b := filesText(first.Files()), filesText(again.Files()); a != b {
			t.Fatalf("two descriptions differ:\n%s\n----\n%s", a, b)
		}
		if len(first.Skipped()) != len(again.Skipped()) {
			t.Fatalf("skipped %v, then %v", first.Skipped(), again.Skipped())
		}
	})
}

// addDescribeSeeds adds FuzzDescribe's seeds to f: FileDescriptorSets
// as @grpc/reflection 1.0.4 serves them, and files needing each repair.
func addDescribeSeeds(f *testing.F) {
	seed := func(files ...*descriptorpb.FileDescriptorProto) {
		b, err := proto.Marshal(&descriptorpb.FileDescriptorSet{File: files})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	var wkt []*descriptorpb.FileDescriptorProto
	for _, p := range []string{"google/protobuf/any.proto", "google/protobuf/duration.proto", "google/protobuf/empty.proto",
		"google/protobuf/field_mask.proto", "google/protobuf/struct.proto", "google/protobuf/timestamp.proto", "google/protobuf/wrappers.proto"} {
		wkt = append(wkt, wellKnownFile(p))
	}
	test := protodesc.ToFileDescriptorProto(testv1.File_testpb_v1_test_proto)
	seed(nodereflect.Mangle(nodereflect.Node104, append([]*descriptorpb.FileDescriptorProto{test}, wkt...)...)...)
	seed(nodereflect.Mangle(nodereflect.MapEntryNames|nodereflect.RelativeNames, append([]*descriptorpb.FileDescriptorProto{test}, wkt...)...)...)
	seed(ghostFiles()...)
	seed(file("a.proto", "a", "M", with(msg("M", repeated(field("x", 1, "E")), repeated(field("y", 2, "E"))), entry("E"))))
	seed(file("a.proto", "google.protobuf", "Struct", with(msg("Struct", repeated(field("fields", 1, "Fields"))), entry("Fields"))))
}
