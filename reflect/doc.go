// Package reflect discovers a gRPC backend's services through gRPC server
// reflection (v1, falling back to v1alpha) and keeps the registry of callable
// methods and their dynamic types. Discovered files live in a private
// protoregistry.Files, never the global one. It knows nothing of JSON-RPC or
// HTTP; the bridge and mapping packages own those.
//
// The folder and package clause are named reflect; importers always alias it:
//
//	import bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
package reflect
