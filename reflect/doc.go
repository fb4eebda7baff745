// Package reflect discovers a gRPC backend's services through gRPC server
// reflection (v1, falling back to v1alpha) and keeps the registry of callable
// methods and their dynamic types. Discovered files live in a private
// protoregistry.Files, never the global one. It knows nothing of JSON-RPC or
// HTTP; the bridge and mapping packages own those.
//
// Discovery speaks reflection over grpc's generated stubs, not through
// jhump/protoreflect's grpcreflect, which builds each file from the
// dependency list the server sends and so fails on servers that leave
// dependencies out (@grpc/reflection for grpc-js; describe.go repairs
// such files). ProtoSource prints descriptors as .proto source with
// jhump/protoreflect's protoprint: this is the one package that imports
// jhump/protoreflect (.ci/run checks it).
//
// The folder and package clause are named reflect; importers always alias it:
//
//	import bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"
package reflect
