package reflect

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"

	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/rpcops"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// reflectionMode says which reflection services a test backend offers.
type reflectionMode = testserver.Reflection

const (
	reflectionBoth    = testserver.ReflectionBoth    // v1 and v1alpha, as reflection.Register
	reflectionV1      = testserver.ReflectionV1      // v1 only, as reflection.RegisterV1
	reflectionV1Alpha = testserver.ReflectionV1Alpha // v1alpha only
	reflectionNone    = testserver.ReflectionNone    // no reflection at all
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

func greeterService(s *grpc.Server) { helloworld.RegisterGreeterServer(s, greeter{}) }
func testServices(s *grpc.Server)   { testv1.RegisterTestServiceServer(s, testService{}) }
func notes(s *grpc.Server)          { demov1.RegisterNotesServer(s, notesService{}) }
func ops(s *grpc.Server)            { rpcops.RegisterOpsServer(s, opsService{}) }

// fourServices are the four test services, unimplemented: discovery
// reads only their descriptors.
var fourServices = []testserver.Service{testServices, notes, greeterService, ops}

// dialBufconn serves the four test services and the reflection services
// of mode on bufconn and returns a client connection to it.
func dialBufconn(t *testing.T, mode reflectionMode, opts ...grpc.ServerOption) *grpc.ClientConn {
	t.Helper()
	return testserver.Start(t, testserver.Options{Services: fourServices, Reflection: mode, Server: opts}).Conn()
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
