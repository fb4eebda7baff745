package dispatch

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
)

// TestRunCapture: asked to capture, Run returns the backend's response
// headers and trailers of a single call, unary or a stream answered in
// one reply, with its reply, even an error; nothing for a batch, a call
// that reached no backend, or when not asked.
func TestRunCapture(t *testing.T) {
	b := testserver.Start(t, testserver.Options{Dial: backend.DialOptions(), Server: []grpc.ServerOption{
		grpc.UnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			_ = grpc.SetHeader(ctx, metadata.Pairs("x-h", "unary"))
			_ = grpc.SetTrailer(ctx, metadata.Pairs("x-t", "unary"))
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			_ = ss.SetHeader(metadata.Pairs("x-h", "stream"))
			ss.SetTrailer(metadata.Pairs("x-t", "stream"))
			return h(srv, ss)
		}),
	}})
	reg, err := bridgereflect.Discover(t.Context(), b.Conn())
	if err != nil {
		t.Fatal(err)
	}
	e := New(b.Conn(), Options{Logger: slog.New(slog.DiscardHandler), BatchParallelism: 4, CallTimeout: time.Minute,
		MaxCallTimeout: time.Minute, MaxResponseBytes: 1 << 20, MaxStreamMessages: 100, MaxStreamBytes: 1 << 20})
	e.Update(reg)

	const (
		echo   = `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Echo","params":{}}`
		fail   = `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Fail","params":{"code":5}}`
		server = `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.ServerStream","params":{"count":2}}`
		client = `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.ClientStream","params":[{},{}]}`
	)
	tests := []struct {
		name, body      string
		capture         bool
		header, trailer string // x-h and x-t, "" for none
	}{
		{"unary", echo, true, "unary", "unary"},
		{"unary failing", fail, true, "unary", "unary"},
		{"server stream read whole", server, true, "stream", "stream"},
		{"client stream collected", client, true, "stream", "stream"},
		{"not asked", echo, false, "", ""},
		{"batch", `[` + echo + `]`, true, "", ""},
		{"unknown method", `{"jsonrpc":"2.0","id":1,"method":"no.Such"}`, true, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var msg wire.Message
			if err := wire.Parse([]byte(tt.body), 10, &msg); err != nil {
				t.Fatal(err.Message)
			}
			reply, md := e.Run(t.Context(), &msg, &Exchange{}, nil, tt.capture)
			if !strings.Contains(string(reply), `"id":1`) {
				t.Fatalf("got reply %s", reply)
			}
			if got := strings.Join(md.Header.Get("x-h"), ","); got != tt.header {
				t.Errorf("header x-h: got %q, want %q", got, tt.header)
			}
			if got := strings.Join(md.Trailer.Get("x-t"), ","); got != tt.trailer {
				t.Errorf("trailer x-t: got %q, want %q", got, tt.trailer)
			}
		})
	}
}
