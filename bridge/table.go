package bridge

import (
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// A Catalog is one discovered snapshot of the backend's methods.
type Catalog interface {
	// Methods lists every method the backend serves, reflection excluded.
	Methods() []protoreflect.MethodDescriptor
	// Types resolves the message types of the backend's files, for Any
	// fields and status details.
	Types() *protoregistry.Types
}

// reservedPrefix starts the names the JSON-RPC specification keeps for the
// protocol's own methods.
const reservedPrefix = "rpc."

// handle is everything a call needs, prepared once per discovery.
type handle struct {
	name  string // the JSON-RPC method name
	path  string // the gRPC method path, "/pkg.Service/Method"
	codec *mapping.Codec
}

// table is an immutable routing table built from one Catalog.
type table struct {
	methods   map[string]*handle
	streaming map[string]bool // streaming methods, not callable over HTTP
	resolver  mapping.Resolver
	document  []byte // the OpenRPC document, served by rpc.discover
}

// MethodName returns the JSON-RPC name of a gRPC method: its fully
// qualified name, "pkg.Service.Method". Names that would start with the
// reserved "rpc." (a protobuf package named rpc) take protobuf's own fully
// qualified form with a leading dot instead: ".rpc.ops.Ops.Ping".
func MethodName(md protoreflect.MethodDescriptor) string {
	name := string(md.FullName())
	if strings.HasPrefix(name, reservedPrefix) {
		return "." + name
	}
	return name
}

func newTable(c Catalog, opts Options) *table {
	mds := c.Methods()
	t := &table{
		methods:   make(map[string]*handle, len(mds)),
		streaming: make(map[string]bool),
		resolver:  mapping.NewResolver(c.Types()),
	}
	for _, md := range mds {
		name := MethodName(md)
		if md.IsStreamingClient() || md.IsStreamingServer() {
			t.streaming[name] = true
			continue
		}
		t.methods[name] = &handle{
			name:  name,
			path:  "/" + string(md.Parent().FullName()) + "/" + string(md.Name()),
			codec: mapping.NewCodec(md, t.resolver, mapping.Options{EmitUnpopulated: opts.EmitUnpopulated}),
		}
	}
	t.document = buildDocument(c, opts)
	return t
}
