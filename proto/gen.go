// Package proto holds the .proto sources of the demo and test services and
// their generated Go code. Run `go generate ./proto` to regenerate; it needs
// protoc (Debian: protobuf-compiler libprotobuf-dev) and the plugins
// installed by gen.sh.
package proto

//go:generate ./gen.sh
