package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/descriptorpb"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/nodereflect"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// TestNodeReflection: against a backend whose reflection answers as
// @grpc/reflection 1.0.4 (Node) does, with no dependency lists and no
// google/protobuf files, the bridge serves helloworld.Greeter (its file
// needs no other) and demo.v1.Notes (it uses google.protobuf.Timestamp
// without importing it), and leaves out ghost.v1.Haunted, whose input type
// nobody declares: /readyz and a Warn record name it and say why.
func TestNodeReflection(t *testing.T) {
	for _, refl := range []string{nodereflect.V1, nodereflect.V1Alpha} {
		t.Run(refl, func(t *testing.T) {
			haunted := &descriptorpb.FileDescriptorProto{
				Name: proto.String("ghost/v1/haunted.proto"), Package: proto.String("ghost.v1"), Syntax: proto.String("proto3"),
				Service: []*descriptorpb.ServiceDescriptorProto{{
					Name: proto.String("Haunted"), Method: []*descriptorpb.MethodDescriptorProto{{
						Name: proto.String("Boo"), InputType: proto.String(".ghost.v1.Missing"), OutputType: proto.String(".ghost.v1.Missing"),
					}},
				}},
			}
			files := append(nodereflect.Protos(helloworld.File_helloworld_helloworld_proto, demov1.File_demo_v1_notes_proto), haunted)
			backend := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, NoConn: true, Reflection: testserver.ReflectionNone,
				Services: []testserver.Service{testserver.Greeter, testserver.Notes, func(s *grpc.Server) { nodereflect.New(files...).Register(s, refl) }}})

			p := start(t, "serve", "--backend", backend.Addr(), "--listen", "127.0.0.1:0", "--log-format", "json")
			var addr string
			p.stderr.until(t, "listening log", func(l string) bool {
				var rec struct{ Msg, Addr string }
				if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
					addr = rec.Addr
					return true
				}
				return false
			})
			lines := p.stderr.until(t, "discovery log", func(l string) bool { return strings.Contains(l, "discovered the backends") })
			warned := false
			for _, l := range lines {
				var rec struct{ Level, Msg, Backend, Service, Reason string }
				if json.Unmarshal([]byte(l), &rec) == nil && rec.Service == "ghost.v1.Haunted" {
					warned = rec.Level == "WARN" && strings.Contains(rec.Msg, "left out") && rec.Backend == "default" &&
						strings.Contains(rec.Reason, "ghost.v1.Missing")
					t.Logf("log: %s", l)
				}
			}
			if !warned {
				t.Errorf("no Warn record naming ghost.v1.Haunted and ghost.v1.Missing in\n%s", strings.Join(lines, "\n"))
			}

			url := "http://" + addr + "/"
			if _, r, _ := rpc(t, http.DefaultClient, url, `{"jsonrpc":"2.0","id":1,"method":"helloworld.Greeter.SayHello","params":{"name":"Ada"}}`, nil); r["result"] == nil {
				t.Errorf("SayHello: got %v, want a result", r)
			}
			_, r, _ := rpc(t, http.DefaultClient, url, `{"jsonrpc":"2.0","id":2,"method":"demo.v1.Notes.CreateNote","params":{"note":{"title":"t"}}}`, nil)
			if res, _ := r["result"].(map[string]any); res == nil || res["createdAt"] == nil {
				t.Errorf("CreateNote: got %v, want a note with createdAt", r)
			}
			if _, r, _ := rpc(t, http.DefaultClient, url, call("ghost.v1.Haunted.Boo"), nil); code(r) != -32601 {
				t.Errorf("ghost.v1.Haunted.Boo: got %v, want -32601", r)
			}

			status, body := do(t, "http://"+addr+"/readyz", "")
			var ready struct {
				Status  string
				Details struct {
					Backends []struct {
						Name, State string
						Services    int
						Skipped     []struct{ Service, Reason string }
					}
				}
			}
			if err := json.Unmarshal([]byte(body), &ready); err != nil || status != 200 || len(ready.Details.Backends) != 1 {
				t.Fatalf("readyz: got %d %s, want 200 with one backend", status, body)
			}
			b := ready.Details.Backends[0]
			if b.State != "ready" || b.Services != 2 || len(b.Skipped) != 1 || b.Skipped[0].Service != "ghost.v1.Haunted" ||
				!strings.Contains(b.Skipped[0].Reason, "ghost.v1.Missing") {
				t.Errorf("readyz: got %s, want backend ready with 2 services and ghost.v1.Haunted skipped naming ghost.v1.Missing", body)
			}
			t.Logf("readyz: %s", body)
		})
	}
}
