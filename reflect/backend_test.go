package reflect

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/reflection"
	"google.golang.org/grpc/reflection/grpc_reflection_v1alpha"
	"google.golang.org/grpc/test/bufconn"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/rpcops"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// reflectionMode says which reflection services a test backend offers.
type reflectionMode int

const (
	reflectionBoth    reflectionMode = iota // v1 and v1alpha, as reflection.Register
	reflectionV1                            // v1 only, as reflection.RegisterV1
	reflectionV1Alpha                       // v1alpha only
	reflectionNone                          // no reflection at all
)

type (
	testService struct {
		testv1.UnimplementedTestServiceServer
	}
	notesService struct {
		demov1.UnimplementedNotesServer
	}
	greeter struct {
		helloworld.UnimplementedGreeterServer
	}
	opsService struct{ rpcops.UnimplementedOpsServer }
)

// newBackend returns a gRPC server with the four test services and the
// reflection services of mode.
func newBackend(mode reflectionMode, opts ...grpc.ServerOption) *grpc.Server {
	s := grpc.NewServer(opts...)
	testv1.RegisterTestServiceServer(s, testService{})
	demov1.RegisterNotesServer(s, notesService{})
	helloworld.RegisterGreeterServer(s, greeter{})
	rpcops.RegisterOpsServer(s, opsService{})
	switch mode {
	case reflectionBoth:
		reflection.Register(s)
	case reflectionV1:
		reflection.RegisterV1(s)
	case reflectionV1Alpha:
		// reflection.NewServer serves v1alpha (an adapter over the v1
		// implementation); registering only it leaves v1 Unimplemented.
		grpc_reflection_v1alpha.RegisterServerReflectionServer(s, reflection.NewServer(reflection.ServerOptions{Services: s}))
	case reflectionNone:
	}
	return s
}

// serve runs s on lis until the test ends.
func serve(t *testing.T, s *grpc.Server, lis net.Listener) {
	t.Helper()
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Serve(lis) })
	t.Cleanup(func() {
		s.Stop()
		wg.Wait()
	})
}

// dialBufconn serves a backend of mode on bufconn and returns a client
// connection to it.
func dialBufconn(t *testing.T, mode reflectionMode, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	serve(t, newBackend(mode, opts...), lis)
	conn, err := grpc.NewClient("passthrough:///bufconn",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) {
			return lis.DialContext(ctx)
		}),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// signalHandler is a slog.Handler passing every record to records without
// blocking; records that find the channel full are dropped.
type signalHandler struct{ records chan slog.Record }

func newSignalLogger(n int) (*slog.Logger, <-chan slog.Record) {
	h := signalHandler{records: make(chan slog.Record, n)}
	return slog.New(h), h.records
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	select {
	case h.records <- r.Clone():
	default:
	}
	return nil
}

func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h signalHandler) WithGroup(string) slog.Handler      { return h }

// recordAttr returns the value of the attribute key of r.
func recordAttr(r slog.Record, key string) (slog.Value, bool) {
	var v slog.Value
	found := false
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v, found = a.Value, true
		}
		return !found
	})
	return v, found
}

// streamRecorder records the full method names of the streams a server handled.
type streamRecorder struct {
	mu      sync.Mutex
	methods []string
}

func (r *streamRecorder) option() grpc.ServerOption {
	return grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		r.mu.Lock()
		r.methods = append(r.methods, info.FullMethod)
		r.mu.Unlock()
		return handler(srv, ss)
	})
}

func (r *streamRecorder) called() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.methods)
}
