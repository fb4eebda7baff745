package bridge

import (
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// handleGuard is what a call of one method needs from the front door,
// prepared when the table is built: who may call it and its metrics.
type handleGuard struct {
	allow []bool       // by identity index; nil when authentication is off
	stats *methodStats // nil without metrics
}

// tableGuard keeps, per identity, the view of a table that identity sees:
// the same methods, and an OpenRPC document listing only what it may call.
// Views are built on first use and live as long as the table.
type tableGuard struct {
	catalog Catalog
	opts    Options
	views   []identityView // by identity index
}

type identityView struct {
	once sync.Once
	t    *table
}

// guardTable prepares the access rules and metrics of every method of t,
// built from c.
func guardTable(t *table, c Catalog, opts Options) {
	var ids []*identity
	if opts.Auth != nil {
		ids = opts.Auth.ids
	}
	for _, h := range t.methods {
		h.guard.stats = opts.Metrics.method(h.name)
		if ids != nil {
			h.guard.allow = make([]bool, len(ids))
			for _, id := range ids {
				h.guard.allow[id.index] = id.allows(h.name)
			}
		}
	}
	t.guard = tableGuard{catalog: c, opts: opts, views: make([]identityView, len(ids))}
}

// forIdentity returns the view of t that id sees: t itself for a nil id
// (authentication off) or an id that may call every method, otherwise a
// copy whose document lists only the methods id may call.
func (t *table) forIdentity(id *identity) *table {
	if t == nil || id == nil || id.all {
		return t
	}
	v := &t.guard.views[id.index]
	v.once.Do(func() {
		every := true
		for _, h := range t.methods {
			every = every && h.guard.allow[id.index]
		}
		if every {
			v.t = t
			return
		}
		view := *t
		view.guard.views = nil
		view.document = newLazyDocument(func() []byte {
			return buildDocument(allowedCatalog{t.guard.catalog, id}, t.guard.opts)
		})
		v.t = &view
	})
	return v.t
}

// allowedCatalog is a Catalog with only the methods id may call.
type allowedCatalog struct {
	Catalog
	id *identity
}

func (c allowedCatalog) Methods() []protoreflect.MethodDescriptor {
	var out []protoreflect.MethodDescriptor
	for _, md := range c.Catalog.Methods() {
		if c.id.allows(MethodName(md)) {
			out = append(out, md)
		}
	}
	return out
}
