package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestGrpcurlLikeUsage: list and describe take what grpcurl users type:
// list SERVICE prints the methods of one service, describe takes a
// method's gRPC name (helloworld.Greeter/SayHello) too and tells a
// service from a method; a usage error points to the help of the command
// that failed.
func TestGrpcurlLikeUsage(t *testing.T) {
	backend := startBackend(t, nil)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // exactly; "" for none
		wantName   string // for describe: the method described
		wantStderr []string
	}{
		{name: "list a service", args: []string{"list", "helloworld.Greeter", "--backend", backend},
			wantStdout: "helloworld.Greeter.SayHello\n"},
		{name: "list a service of a .proto", args: []string{"list", "demo.v1.Notes", "--proto", notesProto, "-I", protoRoot},
			wantStdout: "demo.v1.Notes.CreateNote\ndemo.v1.Notes.GetCounter\ndemo.v1.Notes.GetNote\ndemo.v1.Notes.ImportNotes\n" +
				"demo.v1.Notes.Increment\ndemo.v1.Notes.ListNotes\ndemo.v1.Notes.TagNotes\ndemo.v1.Notes.WatchNotes\n"},
		{name: "list a service of package rpc", args: []string{"list", "rpc.ops.Ops", "--protoset", testProtoset},
			wantStdout: ".rpc.ops.Ops.Ping\n"},
		{name: "list a service of package rpc, with the dot", args: []string{"list", ".rpc.ops.Ops", "--protoset", testProtoset},
			wantStdout: ".rpc.ops.Ops.Ping\n"},
		{name: "list a misspelt service", args: []string{"list", "helloworld.Gretter", "--backend", backend}, wantCode: exitUsage,
			wantStderr: []string{`no service "helloworld.Gretter": did you mean "helloworld.Greeter"?`, "Run 'grpc-jsonrpc-bridge list --help' for usage."}},
		{name: "list two services", args: []string{"list", "a", "b", "--protoset", testProtoset}, wantCode: exitUsage,
			wantStderr: []string{"at most one SERVICE", "Run 'grpc-jsonrpc-bridge list --help' for usage."}},
		{name: "describe by gRPC name", args: []string{"describe", "helloworld.Greeter/SayHello", "--backend", backend},
			wantName: "helloworld.Greeter.SayHello"},
		{name: "describe by gRPC path", args: []string{"describe", "/rpc.ops.Ops/Ping", "--protoset", testProtoset},
			wantName: ".rpc.ops.Ops.Ping"},
		{name: "describe a service", args: []string{"describe", "helloworld.Greeter", "--backend", backend}, wantCode: exitUsage,
			wantStderr: []string{`"helloworld.Greeter" is a service, not a method: describe one of its methods, helloworld.Greeter.SayHello`,
				"Run 'grpc-jsonrpc-bridge describe --help' for usage."}},
		{name: "a flag's typo points to the command's help", args: []string{"list", "--protost", testProtoset}, wantCode: exitUsage,
			wantStderr: []string{"did you mean --protoset?", "Run 'grpc-jsonrpc-bridge list --help' for usage."}},
		{name: "an unknown command points to the root's help", args: []string{"lsit"}, wantCode: exitUsage,
			wantStderr: []string{"list", "Run 'grpc-jsonrpc-bridge --help' for usage."}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, tt.args...)
			if code != tt.wantCode {
				t.Fatalf("got exit code %d, want %d; stderr:\n%s", code, tt.wantCode, stderr)
			}
			switch {
			case tt.wantName != "":
				var d described
				if err := json.Unmarshal([]byte(stdout), &d); err != nil || d.Name != tt.wantName {
					t.Errorf("got %.300s (%v), want the description of %s", stdout, err, tt.wantName)
				}
			case stdout != tt.wantStdout:
				t.Errorf("got stdout %q, want %q", stdout, tt.wantStdout)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("got stderr %q, want it to contain %q", stderr, w)
				}
			}
		})
	}
}
