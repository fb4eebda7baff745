// Package interop holds only tests: the bridge against gRPC servers not
// written in Go. Its tests start the grpc-js server (proto/interop/node) and
// the grpcio, C-core, server (proto/interop/python) of test.v1.TestService
// as subprocesses on loopback ports, build the bridge's binary and run it in
// front of each (`serve`, with a YAML configuration, on a loopback HTTP
// port), and call it over real HTTP JSON-RPC on both unary call paths:
// the bridge's own HTTP/2 client (direct_calls: true) and grpc-go
// (direct_calls: false).
//
// The servers need Node's packages and Debian's python3-grpcio and
// python3-grpc-tools: proto/interop/setup.sh installs them. Without them the
// tests skip, except under CI (the variable CI set), where they fail.
//
//	go test -count=1 ./bridge/interop/
//
// See proto/interop/README.md for the servers and what each test checks.
package interop
