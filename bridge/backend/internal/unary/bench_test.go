package unary

import (
	"context"
	"strconv"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// benchInvokers are the two clients compared: this package's and grpc-go's
// with a pass-through codec, as the bridge used before.
func benchInvokers(b *testing.B, target string) map[string]func() func(ctx context.Context, req []byte) error {
	return map[string]func() func(ctx context.Context, req []byte) error{
		"unary": func() func(ctx context.Context, req []byte) error {
			c := newClient(b, target, Options{})
			return func(ctx context.Context, req []byte) error {
				call := &Call{Method: mEcho, Request: req}
				return c.Invoke(ctx, call)
			}
		},
		"grpc-go": func() func(ctx context.Context, req []byte) error {
			cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cc.Close() })
			opt := grpc.ForceCodecV2(passCodec{})
			return func(ctx context.Context, req []byte) error {
				var resp rawMsg
				return cc.Invoke(ctx, mEcho, &rawMsg{req}, &resp, opt)
			}
		},
	}
}

var benchSizes = []int{100, 16 << 10}

// BenchmarkInvoke makes one call at a time to a loopback grpc-go server
// echoing raw bytes.
func BenchmarkInvoke(b *testing.B) {
	_, target := startBackend(b, "tcp", nil)
	for _, size := range benchSizes {
		req := pattern(size)
		for _, name := range []string{"unary", "grpc-go"} {
			b.Run(name+"/"+strconv.Itoa(size)+"B", func(b *testing.B) {
				invoke := benchInvokers(b, target)[name]()
				ctx := context.Background()
				if err := invoke(ctx, req); err != nil { // connect
					b.Fatal(err)
				}
				b.ReportAllocs()
				for b.Loop() {
					if err := invoke(ctx, req); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkInvokeParallel makes calls from GOMAXPROCS goroutines at once,
// which share the client's connection.
func BenchmarkInvokeParallel(b *testing.B) {
	_, target := startBackend(b, "tcp", nil)
	for _, size := range benchSizes {
		req := pattern(size)
		for _, name := range []string{"unary", "grpc-go"} {
			b.Run(name+"/"+strconv.Itoa(size)+"B", func(b *testing.B) {
				invoke := benchInvokers(b, target)[name]()
				ctx := context.Background()
				if err := invoke(ctx, req); err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := invoke(ctx, req); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}
