package bridge

import (
	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	lean "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/internal/unary"
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

// A Router is a Catalog whose methods live on several backends. When the
// Catalog given to Update is a Router, each method is called through the
// connection Conn returns for it; a nil one means the Server's own.
type Router interface {
	Conn(md protoreflect.MethodDescriptor) grpc.ClientConnInterface
}

// reservedPrefix starts the names the JSON-RPC specification keeps for the
// protocol's own methods.
const reservedPrefix = "rpc."

// handle is everything a call needs, prepared once per discovery.
type handle struct {
	name string                   // the JSON-RPC method name
	path string                   // the gRPC method path, "/pkg.Service/Method"
	conn grpc.ClientConnInterface // the backend serving the method
	// direct is conn's own HTTP/2 client for unary calls (DirectConn),
	// or nil to call through conn.
	direct *lean.Client
	codec  *mapping.Codec
	kind   kind             // unary, or how the method streams
	desc   *grpc.StreamDesc // nil for unary methods
	guard  handleGuard      // who may call it, its metrics
}

// table is an immutable routing table built from one Catalog.
type table struct {
	methods  map[string]*handle // every method, streaming ones included
	direct   bool               // some method has a direct path
	resolver mapping.Resolver
	document *lazyDocument // the OpenRPC document, served by rpc.discover
	guard    tableGuard    // per-identity views
}

// MethodName returns the JSON-RPC name of a gRPC method: its fully
// qualified name, "pkg.Service.Method". Names that would start with the
// reserved "rpc." (a protobuf package named rpc) take protobuf's own fully
// qualified form with a leading dot instead: ".rpc.ops.Ops.Ping".
// It is mapping.MethodName, which the OpenRPC document uses too.
func MethodName(md protoreflect.MethodDescriptor) string {
	return mapping.MethodName(md)
}

func newTable(c Catalog, conn grpc.ClientConnInterface, opts Options) *table {
	mds := c.Methods()
	t := &table{
		methods:  make(map[string]*handle, len(mds)),
		resolver: mapping.NewResolver(c.Types()),
	}
	for _, md := range mds {
		name := MethodName(md)
		mc := connOf(c, md, conn)
		direct := directOf(mc)
		t.direct = t.direct || direct != nil
		t.methods[name] = &handle{
			name:   name,
			path:   "/" + string(md.Parent().FullName()) + "/" + string(md.Name()),
			conn:   mc,
			direct: direct,
			codec:  mapping.NewCodec(md, t.resolver, mapping.Options{EmitUnpopulated: opts.EmitUnpopulated}),
			kind:   kindOf(md),
			desc:   streamDesc(md),
		}
	}
	t.document = newLazyDocument(func() []byte { return buildDocument(c, opts) })
	guardTable(t, c, opts)
	return t
}

// connOf is the connection md is called through: the Router's choice, or
// conn.
func connOf(c Catalog, md protoreflect.MethodDescriptor, conn grpc.ClientConnInterface) grpc.ClientConnInterface {
	if r, ok := c.(Router); ok {
		if rc := r.Conn(md); rc != nil {
			return rc
		}
	}
	return conn
}
