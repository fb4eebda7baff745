// Command grpc-jsonrpc-bridge serves JSON-RPC 2.0 over HTTP in front of any
// gRPC backend that offers server reflection.
//
//	grpc-jsonrpc-bridge serve --backend localhost:50051
//	grpc-jsonrpc-bridge demo
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}
