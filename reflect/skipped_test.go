package reflect

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/test/bufconn"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
)

// TestDiscoverSkipsServicesWithoutDescriptors: a backend that lists a
// service it cannot describe (registered by hand, with no file in its
// registry) still has its other services discovered.
func TestDiscoverSkipsServicesWithoutDescriptors(t *testing.T) {
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	helloworld.RegisterGreeterServer(gs, helloworld.Server{})
	gs.RegisterService(&grpc.ServiceDesc{
		ServiceName: "ghost.v1.Ghost",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{MethodName: "Boo", Handler: func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
			return nil, nil
		}}},
	}, struct{}{})
	reflection.Register(gs)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })

	reg, err := Discover(t.Context(), conn)
	if err != nil {
		t.Fatalf("Discover: %v, want the describable services", err)
	}
	if _, ok := reg.Method("helloworld.Greeter.SayHello"); !ok {
		t.Errorf("helloworld.Greeter.SayHello is missing; methods %v", methodNames(reg))
	}
	skipped := reg.Skipped()
	if len(skipped) != 1 || skipped[0].Name != "ghost.v1.Ghost" || skipped[0].Err == nil || skipped[0].Reason == "" {
		t.Errorf("got skipped %+v, want ghost.v1.Ghost with its reason and error", skipped)
	}
}
