package auth

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// A Binder makes the authorisation Guard of each table: who may call
// each method, decided once per table, and the OpenRPC document each
// identity sees, which Render renders.
type Binder struct {
	Auth   *Auth
	Render func(dispatch.Catalog) []byte
}

// PermissionDenied answers a call the caller's patterns do not allow,
// as a PERMISSION_DENIED status from the backend would be answered.
var PermissionDenied = wire.Refused(codes.PermissionDenied, "the caller is not allowed to call this method")

// authGuard is the authorisation of one table (nil before discovery).
type authGuard struct {
	b     Binder
	t     *dispatch.Table
	allow [][]bool       // by method index, then identity index
	views []identityView // by identity index
}

type identityView struct {
	once sync.Once
	doc  *dispatch.LazyDocument // nil when the identity sees every method
}

// Bind prepares the allow bits of every method of t for every identity.
func (b Binder) Bind(t *dispatch.Table) dispatch.Guard {
	g := &authGuard{b: b, t: t}
	if t == nil {
		return g
	}
	ids := b.Auth.ids
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
	id, _ := x.Caller.(*Caller)
	switch {
	case id == nil:
		return PermissionDenied
	case m != nil && g.allow[m.Index][id.index]:
		return nil
	case m == nil && id.allows(string(name)):
		return nil
	case m == nil && wire.IsStreamMethod(name):
		// rpc.stream.send, close and cancel act only on streams of the
		// caller's own connection, each authorised when it was opened.
		return nil
	}
	return PermissionDenied
}

// Document is the OpenRPC document x's caller sees: the table's own for
// an identity that may call every method, otherwise one listing only
// what it may call, built on first use and kept as long as the table.
func (g *authGuard) Document(x *dispatch.Exchange, t *dispatch.Table) ([]byte, *mapping.Error) {
	id, _ := x.Caller.(*Caller)
	switch {
	case id == nil:
		return nil, PermissionDenied
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
					return g.b.Render(allowedCatalog{t.Catalog, id})
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
	dispatch.Catalog
	id *Caller
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
