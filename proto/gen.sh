#!/usr/bin/env bash
# Regenerates the Go code of every .proto file under proto/ and the test
# descriptor set. Needs protoc with the well-known types
# (Debian: apt-get install protobuf-compiler libprotobuf-dev).
set -euo pipefail
cd "$(dirname "$0")"
bin="$PWD/../bin/tools"
mkdir -p "$bin"
GOBIN="$bin" GOFLAGS= go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
GOBIN="$bin" GOFLAGS= go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
export PATH="$bin:$PATH"
# the descriptor set holds the demo and test services; echo.proto is only
# for the Go benchmarks.
files=(helloworld/helloworld.proto demo/v1/notes.proto testpb/v1/test.proto testpb/rpcops/ops.proto)
protoc -I . \
  --go_out=. --go_opt=paths=source_relative \
  --go-grpc_out=. --go-grpc_opt=paths=source_relative \
  "${files[@]}" testpb/echo/echo.proto
protoc -I . --include_imports --include_source_info \
  --descriptor_set_out=testpb/test.protoset "${files[@]}"
