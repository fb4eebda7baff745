package backend_test

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/helloworld"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestOneAddressTargets: unix:, unix-abstract: and passthrough:/// targets
// are one address of the pool, called, counted and shown in /readyz on
// every path like a DNS name's.
func TestOneAddressTargets(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "greeter.sock")
	abstract := fmt.Sprintf("backend-test-%d", os.Getpid())
	tcp := serveGreeter(t, "tcp", "127.0.0.1:0")
	serveGreeter(t, "unix", sock)
	serveGreeter(t, "unix", "@"+abstract)
	_, port, _ := net.SplitHostPort(tcp)
	for _, tc := range []struct{ target, address string }{
		{"unix:" + sock, "unix:" + sock},
		{"unix://" + sock, "unix:" + sock},
		{"unix-abstract:" + abstract, "unix:@" + abstract},
		{"passthrough:///localhost:" + port, "localhost:" + port},
	} {
		for _, path := range allPaths {
			t.Run(strings.ReplaceAll(tc.target, "/", "_")+"/"+path.name, func(t *testing.T) {
				c, err := backend.Dial(tc.target, backend.Options{Direct: path.direct})
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				await.Until(t, 10*time.Second, "the address ready", func() bool { return stateOf(c, tc.address) == "ready" })
				for range 3 {
					if got, err := callerOf(c, path)(t.Context()); err != nil || got != "Hello, lb!" {
						t.Fatalf("got %q, %v", got, err)
					}
				}
				if st := c.Addresses().Addresses; len(st) != 1 || st[0].Calls != 3 {
					t.Fatalf("addresses %+v, want %s with the 3 calls", st, tc.address)
				}
			})
		}
	}
}

func serveGreeter(t *testing.T, network, addr string) string {
	t.Helper()
	lis, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	helloworld.RegisterGreeterServer(s, helloworld.Server{})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return lis.Addr().String()
}

// TestOpaqueTarget: a target of a scheme the bridge does not resolve
// itself is grpc-go's alone (its resolver, pick_first): its calls work on
// every path (unary calls through grpc-go), /readyz shows the target.
func TestOpaqueTarget(t *testing.T) {
	addr := serveGreeter(t, "tcp", "127.0.0.1:0")
	target := "passthrough://auth/" + addr
	for _, path := range allPaths {
		t.Run(path.name, func(t *testing.T) {
			c, err := backend.Dial(target, backend.Options{Direct: path.direct})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if got, err := callerOf(c, path)(t.Context()); err != nil || got != "Hello, lb!" {
				t.Fatalf("got %q, %v", got, err)
			}
			if st := c.Addresses().Addresses; len(st) != 1 || st[0].Address != target || st[0].State != "ready" {
				t.Fatalf("addresses %+v, want the target ready", st)
			}
		})
	}
}
