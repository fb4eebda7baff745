package helloworld_test

import (
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

func newClient(t *testing.T) helloworld.GreeterClient {
	t.Helper()
	conn := testserver.Start(t, testserver.Options{Services: []testserver.Service{testserver.Greeter}, Reflection: testserver.ReflectionNone}).Conn()
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
