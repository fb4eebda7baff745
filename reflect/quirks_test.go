package reflect

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/nodereflect"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// quirkyBackend serves helloworld.Greeter, demo.v1.Notes and
// test.v1.TestService on loopback, their files and the well-known types'
// files they import served as @grpc/reflection 1.0.4 does with quirks q
// (nodereflect.NewNode), over the reflection service named.
func quirkyBackend(t *testing.T, q nodereflect.Quirk, reflection string) *grpc.ClientConn {
	t.Helper()
	fds := []protoreflect.FileDescriptor{helloworld.File_helloworld_helloworld_proto,
		demov1.File_demo_v1_notes_proto, testv1.File_testpb_v1_test_proto}
	seen := make(map[string]bool)
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
	for _, fd := range fds {
		add(fd)
	}
	return testserver.Start(t, testserver.Options{Addr: testserver.Loopback, Reflection: testserver.ReflectionNone,
		Services: []testserver.Service{testserver.Greeter, testserver.Notes, testserver.Test(testv1.NewServer()),
			func(s *grpc.Server) { nodereflect.NewNode(q, files...).Register(s, reflection) }}}).Conn()
}

// allTypesJSON sets every field of test.v1.AllTypes: maps of the three
// kinds, proto3 optional at zero, every well-known type.
const allTypesJSON = `{
 "fDouble": 1.5, "fFloat": 2.5, "fInt32": -3, "fInt64": "-9007199254740993", "fUint32": 5,
 "fUint64": "18446744073709551615", "fSint32": -7, "fSint64": "-8", "fFixed32": 9, "fFixed64": "10",
 "fSfixed32": -11, "fSfixed64": "-12", "fBool": true, "fString": "héllo", "fBytes": "AAEC/w==",
 "fEnum": "COLOR_GREEN", "fMessage": {"name": "in", "big": "42"},
 "rInt64": ["1", "-2"], "rString": ["a", ""], "rMessage": [{"name": "r"}], "rEnum": ["COLOR_RED", "COLOR_UNSPECIFIED"],
 "mStringInt64": {"a": "1", "": "-2"}, "mInt32Message": {"-1": {"name": "neg"}, "7": {}},
 "mBoolString": {"true": "yes", "false": "no"},
 "oMessage": {"name": "o"}, "tree": {"value": "root", "children": [{"value": "leaf"}]}, "optInt32": 0,
 "wktTimestamp": "2024-01-02T03:04:05.123Z", "wktDuration": "-1.500s",
 "wktStruct": {"k": [1, "x", null, true, {"n": {}}]}, "wktValue": [2], "wktList": [{}, "s"], "wktNull": null,
 "wktInt64": "-5", "wktString": "", "wktBool": false, "wktFieldMask": "fInt32,wktStruct",
 "wktAny": {"@type": "type.googleapis.com/google.protobuf.Duration", "value": "2s"},
 "wktEmpty": {}, "wktDouble": 0.25, "wktBytes": "/w=="
}`

// TestDiscoverNodeQuirks: a backend serving its files as @grpc/reflection
// 1.0.4 does, each quirk alone and all of them (renamed per-package files,
// relative type names, map entries named after their field, proto3
// optional lost, no JSON names, and a google.protobuf file whose
// google.protobuf.Struct protobuf-go refuses), has every service
// discovered and callable: AllTypes goes to the backend and back
// unchanged, its maps are maps, its optional field optional, and the
// well-known types are the bridge's own.
func TestDiscoverNodeQuirks(t *testing.T) {
	for _, tt := range []struct {
		name       string
		quirks     nodereflect.Quirk
		reflection string
	}{
		{"merged packages", nodereflect.MergePackages, nodereflect.V1},
		{"relative names", nodereflect.RelativeNames, nodereflect.V1},
		{"map entry names", nodereflect.MapEntryNames, nodereflect.V1},
		{"optional dropped", nodereflect.DropOptional, nodereflect.V1},
		{"no json names", nodereflect.DropJSONNames, nodereflect.V1},
		{"1.0.4 over v1", nodereflect.Node104, nodereflect.V1},
		{"1.0.4 over v1alpha", nodereflect.Node104, nodereflect.V1Alpha},
	} {
		t.Run(tt.name, func(t *testing.T) {
			conn := quirkyBackend(t, tt.quirks, tt.reflection)
			reg, err := Discover(t.Context(), conn)
			if err != nil {
				t.Fatalf("Discover: %v", err)
			}
			if got, want := strings.Join(serviceNames(reg), " "), "demo.v1.Notes helloworld.Greeter test.v1.TestService"; got != want {
				t.Errorf("services %q, want %q", got, want)
			}
			for _, sk := range reg.Skipped() {
				t.Errorf("skipped %s: %s (%v)", sk.Name, sk.Reason, sk.Err)
			}
			if t.Failed() {
				return
			}

			// The round trip, compared with the generated type.
			want := new(testv1.AllTypes)
			if err := protojson.Unmarshal([]byte(allTypesJSON), want); err != nil {
				t.Fatal(err)
			}
			got := new(testv1.AllTypes)
			out := invoke(t, reg, conn, "test.v1.TestService.Echo", allTypesJSON)
			if err := protojson.Unmarshal([]byte(out), got); err != nil {
				t.Fatalf("Echo answered %s: %v", out, err)
			}
			if !proto.Equal(got, want) {
				t.Errorf("Echo answered\n%s\nwant\n%s", protojson.Format(got), protojson.Format(want))
			}
			if got := invoke(t, reg, conn, "helloworld.Greeter.SayHello", `{"name":"Ada"}`); !strings.Contains(got, "Hello, Ada!") {
				t.Errorf("SayHello: %s", got)
			}
			if got := invoke(t, reg, conn, "demo.v1.Notes.CreateNote", `{"note":{"title":"t"}}`); !strings.Contains(got, `"createdAt":"`) {
				t.Errorf("CreateNote: %s, want a createdAt timestamp", got)
			}

			// The descriptors say what protoc wrote.
			md, _ := reg.Method("test.v1.TestService.Echo")
			fields := md.Input().Fields()
			for name, entry := range map[protoreflect.Name]protoreflect.Name{
				"m_string_int64": "MStringInt64Entry", "m_int32_message": "MInt32MessageEntry", "m_bool_string": "MBoolStringEntry",
			} {
				if fd := fields.ByName(name); fd == nil || !fd.IsMap() || fd.Message().Name() != entry {
					t.Errorf("%s: %v, want a map of entry %s", name, fd, entry)
				}
			}
			if fd := fields.ByName("opt_int32"); fd == nil || !fd.HasOptionalKeyword() || !fd.ContainingOneof().IsSynthetic() {
				t.Errorf("opt_int32: %v, want proto3 optional", fd)
			}
			if fd := fields.ByName("o_string"); fd == nil || fd.ContainingOneof() == nil || fd.ContainingOneof().IsSynthetic() {
				t.Errorf("o_string: %v, want in the oneof choice", fd)
			}
			for _, name := range []protoreflect.Name{"wkt_struct", "wkt_any", "wkt_timestamp", "wkt_int64"} {
				fd := fields.ByName(name)
				want, _ := protoregistry.GlobalFiles.FindDescriptorByName(fd.Message().FullName())
				if fd.Message().ParentFile().Path() != want.ParentFile().Path() {
					t.Errorf("%s is %s of %s, want the bridge's %s", name, fd.Message().FullName(), fd.Message().ParentFile().Path(), want.ParentFile().Path())
				}
			}
			wantPath := "testpb/v1/test.proto"
			if tt.quirks&nodereflect.MergePackages != 0 {
				wantPath = "test_v1.proto"
			}
			if got := md.ParentFile().Path(); got != wantPath {
				t.Errorf("Echo is declared in %s, want %s", got, wantPath)
			}

			// What was repaired is said.
			repairs := strings.Join(reg.Repairs(), "\n")
			t.Logf("repairs:\n%s", repairs)
			var said []string
			if tt.quirks&nodereflect.MapEntryNames != 0 {
				said = append(said, ": map entries renamed: test.v1.AllTypes.M_string_int64 → MStringInt64Entry, "+
					"test.v1.AllTypes.M_int32_message → MInt32MessageEntry, test.v1.AllTypes.M_bool_string → MBoolStringEntry")
			}
			if tt.quirks&nodereflect.DropOptional != 0 {
				said = append(said, ": proto3 optional again: test.v1.AllTypes.opt_int32")
			}
			if tt.quirks&nodereflect.MergePackages != 0 {
				said = append(said, "google_protobuf.proto: the bridge's google/protobuf/any.proto, google/protobuf/duration.proto, ")
			}
			for _, w := range append(said, ": imports what it does not list: google/protobuf/") {
				if !strings.Contains(repairs, w) {
					t.Errorf("repairs lack %q", w)
				}
			}

			// Discovery is deterministic.
			again, err := Discover(t.Context(), conn)
			if err != nil {
				t.Fatal(err)
			}
			if a, b := filesText(reg.Files()), filesText(again.Files()); a != b {
				t.Errorf("two discoveries differ:\n%s\n----\n%s", a, b)
			}
		})
	}
}

// filesText prints every file of files, sorted by path.
func filesText(files *protoregistry.Files) string {
	var paths []string
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		paths = append(paths, fd.Path())
		return true
	})
	slices.Sort(paths)
	var b strings.Builder
	for _, p := range paths {
		fd, _ := files.FindFileByPath(p)
		b.WriteString(protojson.Format(protodesc.ToFileDescriptorProto(fd)))
	}
	return b.String()
}

// TestWatcherLogsRepairs: a Watcher says what discovery repaired in a
// backend's files, at Info the first time and at Debug when a refresh
// repairs the same, and /readyz's status has nothing skipped.
func TestWatcherLogsRepairs(t *testing.T) {
	logger, records := newSignalLogger(1000)
	w := NewWatcher([]Source{{Name: "node", Conn: quirkyBackend(t, nodereflect.Node104, nodereflect.V1)}},
		WatchOptions{Retry: RetryOptions{Logger: logger}})
	installed, _ := runWatcher(t, w)
	next(t, installed)
	w.Refresh()
	next(t, installed)
	var levels []slog.Level
	for len(levels) < 2 {
		var r slog.Record
		select {
		case r = <-records:
		case <-time.After(20 * time.Second):
			t.Fatalf("got repair records at %v, want two", levels)
		}
		if !strings.Contains(r.Message, "repaired") {
			continue
		}
		levels = append(levels, r.Level)
		v, _ := recordAttr(r, "repairs")
		repairs, _ := v.Any().([]string)
		if b, _ := recordAttr(r, "backend"); b.String() != "node" || !slices.ContainsFunc(repairs, func(s string) bool {
			return strings.HasPrefix(s, "test_v1.proto: map entries renamed: test.v1.AllTypes.M_string_int64 → MStringInt64Entry")
		}) {
			t.Errorf("record %q: backend %v, repairs %q", r.Message, b, repairs)
		}
	}
	if !slices.Equal(levels, []slog.Level{slog.LevelInfo, slog.LevelDebug}) {
		t.Errorf("repair records at %v, want Info then Debug", levels)
	}
	if st := w.Status().Backends[0]; st.State != StateReady || st.Services != 3 || len(st.Skipped) != 0 {
		t.Errorf("status %+v, want ready with 3 services, none skipped", st)
	}
}
