package bridge

import (
	"context"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// authBinder makes the authorisation Guard of each table: who may call
// each method, decided once per table, and the OpenRPC document each
// identity sees.
type authBinder struct{ s *Server }

// authGuard is the authorisation of one table (nil before discovery).
type authGuard struct {
	s     *Server
	t     *dispatch.Table
	allow [][]bool       // by method index, then identity index
	views []identityView // by identity index
}

type identityView struct {
	once sync.Once
	doc  *dispatch.LazyDocument // nil when the identity sees every method
}

func (b authBinder) Bind(t *dispatch.Table) dispatch.Guard {
	g := &authGuard{s: b.s, t: t}
	if t == nil {
		return g
	}
	ids := b.s.opts.Auth.ids
	g.allow = make([][]bool, len(t.Methods))
	for _, m := range t.Methods {
		allow := make([]bool, len(ids))
		for _, id := range ids {
			allow[id.index] = id.allows(m.Name)
		}
		g.allow[m.Index] = allow
	}
	g.views = make([]identityView, len(ids))
	return g
}

func (*authGuard) Begin(*dispatch.Exchange)                                  {}
func (*authGuard) Done(context.Context, *dispatch.Exchange, dispatch.Record) {}

// Allow lets the call run when its caller may call the method: known
// methods use the answer prepared per table; other names are matched
// against the patterns, so a refusal tells nothing about whether the
// method exists. Calls that did not come through the front door (no
// caller) may call nothing.
func (g *authGuard) Allow(x *dispatch.Exchange, name []byte, m *dispatch.Method) *mapping.Error {
	id, _ := x.Caller.(*identity)
	switch {
	case id == nil:
		return errPermissionDenied
	case m != nil && g.allow[m.Index][id.index]:
		return nil
	case m == nil && id.allows(string(name)):
		return nil
	case m == nil && wire.IsStreamMethod(name):
		// rpc.stream.send, close and cancel act only on streams of the
		// caller's own connection, each authorised when it was opened.
		return nil
	}
	return errPermissionDenied
}

// Document is the OpenRPC document x's caller sees: the table's own for
// an identity that may call every method, otherwise one listing only
// what it may call, built on first use and kept as long as the table.
func (g *authGuard) Document(x *dispatch.Exchange, t *dispatch.Table) ([]byte, *mapping.Error) {
	id, _ := x.Caller.(*identity)
	switch {
	case id == nil:
		return nil, errPermissionDenied
	case t == nil:
		return nil, nil
	case id.all:
		return t.Document(), nil
	}
	v := &g.views[id.index]
	v.once.Do(func() {
		for _, m := range t.Methods {
			if !g.allow[m.Index][id.index] {
				v.doc = dispatch.NewLazyDocument(func() []byte {
					return g.s.engine.RenderDocument(allowedCatalog{t.Catalog, id})
				})
				return
			}
		}
	})
	if v.doc == nil {
		return t.Document(), nil
	}
	return v.doc.Bytes(), nil
}

// allowedCatalog is a Catalog with only the methods id may call.
type allowedCatalog struct {
	Catalog
	id *identity
}

func (c allowedCatalog) Methods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	for _, md := range c.Catalog.Methods() {
		if c.id.allows(mapping.MethodName(md)) {
			out = append(out, md)
		}
	}
	return out
}
