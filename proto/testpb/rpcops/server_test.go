package rpcops_test

import (
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/rpcops"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

func TestPing(t *testing.T) {
	conn := testserver.Start(t, testserver.Options{Services: []testserver.Service{testserver.Ops}, Reflection: testserver.ReflectionNone}).Conn()

	got, err := rpcops.NewOpsClient(conn).Ping(t.Context(), &rpcops.PingRequest{Text: "pong?"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetText() != "pong?" {
		t.Errorf("got %q, want %q", got.GetText(), "pong?")
	}
}
