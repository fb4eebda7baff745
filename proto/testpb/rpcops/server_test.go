package rpcops_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/rpcops"
)

func TestPing(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	rpcops.RegisterOpsServer(srv, rpcops.Server{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	got, err := rpcops.NewOpsClient(conn).Ping(t.Context(), &rpcops.PingRequest{Text: "pong?"})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetText() != "pong?" {
		t.Errorf("got %q, want %q", got.GetText(), "pong?")
	}
}
