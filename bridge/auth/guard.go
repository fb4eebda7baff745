package auth

import (
	"context"
	"sync/atomic"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// A Binder makes the authorisation Guard of each table: who may call
// each method, decided once per table and identity, and the OpenRPC
// document each identity sees, which Render renders.
type Binder struct {
	Auth   *Auth
	Render func(dispatch.Catalog) []byte
}

// PermissionDenied answers a call the caller's patterns do not allow,
// as a PERMISSION_DENIED status from the backend would be answered.
var PermissionDenied = wire.Refused(codes.PermissionDenied, "the caller is not allowed to call this method")

// authGuard is the authorisation of one table (nil before discovery).
type authGuard struct {
	b Binder
	t *dispatch.Table
}

// viewSlot holds an identity's view of the last table it was asked of:
// identities change with reloads and tables with discoveries, so the
// view is made on first use and replaced when the table changes.
type viewSlot struct{ p atomic.Pointer[view] }

// view is what one identity may call of one table.
type view struct {
	t     *dispatch.Table
	allow []bool                 // by method index
	doc   *dispatch.LazyDocument // nil when the identity may call every method
}

// of returns id's view of t, making it if the slot holds another table's.
func (s *viewSlot) of(id *identity, t *dispatch.Table, render func(dispatch.Catalog) []byte) *view {
	if v := s.p.Load(); v != nil && v.t == t {
		return v
	}
	v := &view{t: t, allow: make([]bool, len(t.Methods))}
	every := true
	for _, m := range t.Methods {
		v.allow[m.Index] = id.allows(m.Name)
		every = every && v.allow[m.Index]
	}
	if !every {
		v.doc = dispatch.NewLazyDocument(func() []byte { return render(allowedCatalog{t.Catalog, id}) })
	}
	s.p.Store(v)
	return v
}

// CallerOf is the Caller a front door stored in x (Exchange.Caller), nil
// when authentication is off or x came through none.
func CallerOf(x *dispatch.Exchange) *Caller {
	id, _ := x.Caller.(*Caller)
	return id
}

// Bind makes the guard of t.
func (b Binder) Bind(t *dispatch.Table) dispatch.Guard { return &authGuard{b: b, t: t} }

func (*authGuard) Begin(*dispatch.Exchange)                                  {}
func (*authGuard) Done(context.Context, *dispatch.Exchange, dispatch.Record) {}

// Allow lets the call run when its caller may call the method: known
// methods use the caller's view of the table; other names are matched
// against the patterns, so a refusal tells nothing about whether the
// method exists. Calls that did not come through the front door (no
// caller) may call nothing.
func (g *authGuard) Allow(x *dispatch.Exchange, name []byte, m *dispatch.Method) *mapping.Error {
	id := CallerOf(x)
	switch {
	case id == nil:
		return PermissionDenied
	case m != nil && g.t != nil && id.views.of(id.identity, g.t, g.b.Render).allow[m.Index]:
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
// what it may call, built on first use and kept with its view.
func (g *authGuard) Document(x *dispatch.Exchange, t *dispatch.Table) ([]byte, *mapping.Error) {
	id := CallerOf(x)
	switch {
	case id == nil:
		return nil, PermissionDenied
	case t == nil:
		return nil, nil
	case id.all:
		return t.Document(), nil
	}
	if v := id.views.of(id.identity, t, g.b.Render); v.doc != nil {
		return v.doc.Bytes(), nil
	}
	return t.Document(), nil
}

// allowedCatalog is a Catalog with only the methods id may call.
type allowedCatalog struct {
	dispatch.Catalog
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
