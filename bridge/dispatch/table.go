package dispatch

import (
	"bytes"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
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
// connection Conn returns for it; a nil one means the Engine's own.
type Router interface {
	Conn(md protoreflect.MethodDescriptor) grpc.ClientConnInterface
}

// Kind is how a method streams.
type Kind uint8

const (
	Unary        Kind = iota
	ServerStream      // one request, a stream of responses
	ClientStream      // a stream of requests, one response
	BidiStream        // a stream each way
)

func kindOf(md protoreflect.MethodDescriptor) Kind {
	switch {
	case md.IsStreamingClient() && md.IsStreamingServer():
		return BidiStream
	case md.IsStreamingClient():
		return ClientStream
	case md.IsStreamingServer():
		return ServerStream
	}
	return Unary
}

func (k Kind) String() string {
	switch k {
	case ServerStream:
		return "server-streaming"
	case ClientStream:
		return "client-streaming"
	case BidiStream:
		return "bidirectional-streaming"
	}
	return "unary"
}

// A Method is everything a call of one method needs, prepared once per
// discovery.
type Method struct {
	Name  string                   // the JSON-RPC method name
	Path  string                   // the gRPC method path, "/pkg.Service/Method"
	Conn  grpc.ClientConnInterface // the backend serving the method, for streams
	Codec *mapping.Codec
	Kind  Kind             // Unary, or how the method streams
	Desc  *grpc.StreamDesc // what NewStream needs; nil for unary methods
	// Index is the method's place in its Table's Methods, for Guards to
	// keep per-method state in slices.
	Index int

	invoker backend.Invoker // how unary calls (and server streams answered at once) reach conn
}

// A Table is the immutable routing table built from one Catalog, with
// the state its Guards bound to it.
type Table struct {
	Catalog  Catalog
	Methods  []*Method // in the Catalog's order
	Resolver mapping.Resolver

	byName   map[string]*Method
	document lazyDocument // the OpenRPC document of every method
	guards   []Guard      // bound to this table, in Options.Guards order
}

// Lookup returns the method named name, or nil.
func (t *Table) Lookup(name []byte) *Method {
	if t == nil {
		return nil
	}
	return t.byName[string(name)]
}

// Document is the OpenRPC document of every method of t, rendered on
// first use; nil when it cannot be rendered (the failure is logged).
func (t *Table) Document() []byte { return t.document.bytes() }

func (e *Engine) newTable(c Catalog) *Table {
	mds := c.Methods()
	t := &Table{
		Catalog:  c,
		Methods:  make([]*Method, 0, len(mds)),
		Resolver: mapping.NewResolver(c.Types()),
		byName:   make(map[string]*Method, len(mds)),
	}
	for _, md := range mds {
		name := mapping.MethodName(md)
		conn := connOf(c, md, e.conn)
		m := &Method{
			Name:    name,
			Path:    "/" + string(md.Parent().FullName()) + "/" + string(md.Name()),
			Conn:    conn,
			Codec:   mapping.NewCodec(md, t.Resolver, mapping.Options{EmitUnpopulated: e.opts.EmitUnpopulated}),
			Kind:    kindOf(md),
			Index:   len(t.Methods),
			invoker: backend.For(conn),
		}
		if m.Kind != Unary {
			m.Desc = &grpc.StreamDesc{StreamName: string(md.Name()), ServerStreams: md.IsStreamingServer(), ClientStreams: md.IsStreamingClient()}
		}
		t.Methods = append(t.Methods, m)
		t.byName[name] = m
	}
	t.document.build = func() []byte { return e.RenderDocument(c) }
	for _, b := range e.opts.Guards {
		t.guards = append(t.guards, b.Bind(t))
	}
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

// RenderDocument renders the OpenRPC document of c. A document that
// cannot be rendered is logged and nil: rpc.discover then answers -32603
// and GET /openrpc.json 503, while calls still work.
func (e *Engine) RenderDocument(c Catalog) []byte {
	doc, err := mapping.Document(c.Methods(), mapping.DocumentOptions{
		Info:            e.opts.Document,
		EmitUnpopulated: e.opts.EmitUnpopulated,
	})
	if err != nil {
		e.opts.Logger.Error("cannot render the OpenRPC document", "err", err)
		return nil
	}
	return bytes.TrimSpace(doc)
}

// lazyDocument is an OpenRPC document rendered the first time it is asked
// for, so that a discovery does not pay for a document nobody reads.
type lazyDocument struct {
	once  sync.Once
	build func() []byte
	doc   []byte
}

// NewLazyDocument is a document build renders on first use.
func NewLazyDocument(build func() []byte) *LazyDocument {
	return &LazyDocument{d: lazyDocument{build: build}}
}

// A LazyDocument is an OpenRPC document rendered on first use, such as
// the view of a table an identity sees.
type LazyDocument struct{ d lazyDocument }

// Bytes returns the document, rendering it on first use.
func (l *LazyDocument) Bytes() []byte { return l.d.bytes() }

func (d *lazyDocument) bytes() []byte {
	d.once.Do(func() {
		d.doc = d.build()
		d.build = nil
	})
	return d.doc
}
