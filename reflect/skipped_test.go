package reflect

import (
	"context"
	"testing"

	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// TestDiscoverSkipsServicesWithoutDescriptors: a backend that lists a
// service it cannot describe (registered by hand, with no file in its
// registry) still has its other services discovered.
func TestDiscoverSkipsServicesWithoutDescriptors(t *testing.T) {
	conn := testserver.Start(t, testserver.Options{Services: []testserver.Service{testserver.Greeter, func(gs *grpc.Server) {
		gs.RegisterService(&grpc.ServiceDesc{
			ServiceName: "ghost.v1.Ghost",
			HandlerType: (*any)(nil),
			Methods: []grpc.MethodDesc{{MethodName: "Boo", Handler: func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
				return nil, nil
			}}},
		}, struct{}{})
	}}}).Conn()

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
