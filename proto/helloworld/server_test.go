package helloworld_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
)

func newClient(t *testing.T) helloworld.GreeterClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	helloworld.RegisterGreeterServer(srv, helloworld.Server{})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return helloworld.NewGreeterClient(conn)
}

func TestSayHello(t *testing.T) {
	c := newClient(t)
	tests := []struct {
		name string
		in   string
		want string
	}{
		{name: "named", in: "Ada", want: "Hello, Ada!"},
		{name: "empty", in: "", want: "Hello, world!"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.SayHello(t.Context(), &helloworld.HelloRequest{Name: tt.in})
			if err != nil {
				t.Fatal(err)
			}
			if got.GetMessage() != tt.want {
				t.Errorf("got %q, want %q", got.GetMessage(), tt.want)
			}
		})
	}
}
