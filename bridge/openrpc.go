package bridge

import (
	"bytes"
	"net/http"
	"sync"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// discoverMethod is the OpenRPC service discovery method.
const discoverMethod = "rpc.discover"

// lazyDocument is an OpenRPC document rendered the first time it is asked
// for, so that a discovery does not pay for a document nobody reads.
type lazyDocument struct {
	once  sync.Once
	build func() []byte
	doc   []byte
}

func newLazyDocument(build func() []byte) *lazyDocument { return &lazyDocument{build: build} }

// bytes returns the document, rendering it on first use; nil when it
// cannot be rendered.
func (d *lazyDocument) bytes() []byte {
	if d == nil {
		return nil
	}
	d.once.Do(func() {
		d.doc = d.build()
		d.build = nil
	})
	return d.doc
}

// buildDocument renders the OpenRPC document of c, once per Update, on
// first use. A document that cannot be rendered is logged and left nil:
// rpc.discover then answers -32603 and GET /openrpc.json 503, while calls
// still work.
func buildDocument(c Catalog, opts Options) []byte {
	doc, err := mapping.Document(c.Methods(), mapping.DocumentOptions{
		Info:            opts.Document,
		EmitUnpopulated: opts.EmitUnpopulated,
	})
	if err != nil {
		opts.Logger.Error("cannot render the OpenRPC document", "err", err)
		return nil
	}
	return bytes.TrimSpace(doc)
}

// discover answers rpc.discover with the document of t.
func (s *Server) discover(t *table, r *wire.Request, dst []byte) []byte {
	switch {
	case t == nil:
		return wire.AppendError(dst, r.ID, wire.NotDiscovered)
	case len(r.Params) > 2 && !isEmptyStructure(r.Params):
		return wire.AppendError(dst, r.ID, &mapping.Error{Code: mapping.CodeInvalidParams, Message: wire.MsgInvalidParams + ": rpc.discover takes no params"})
	}
	doc := t.document.bytes()
	if doc == nil {
		return wire.AppendError(dst, r.ID, wire.Internal)
	}
	dst = wire.AppendResultHead(dst, r.ID)
	dst = append(dst, doc...)
	return append(dst, '}')
}

// isEmptyStructure reports whether b, a JSON object or array, has no members.
func isEmptyStructure(b []byte) bool {
	i := wire.SkipSpace(b, 1)
	return i < len(b) && (b[i] == '}' || b[i] == ']')
}

// serveDocument answers GET /openrpc.json. Its refusals are counted and
// logged (refusedHere).
func (s *Server) serveDocument(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		s.refusedHere(r, "method_not_allowed", r.Method)
		writeJSON(w, http.StatusMethodNotAllowed, []byte(`{"error":"method not allowed"}`))
		return
	}
	id, _ := s.caller(r.Context()) // the front door has authenticated r
	t := s.table.Load().forIdentity(id)
	var doc []byte
	if t != nil {
		doc = t.document.bytes()
	}
	if doc == nil {
		detail := ""
		if t != nil { // discovered, but buildDocument failed and logged why
			detail = "the OpenRPC document could not be rendered"
		}
		s.refusedHere(r, "not_discovered", detail)
		writeJSON(w, http.StatusServiceUnavailable, []byte(`{"error":"the backend's services are not discovered yet"}`))
		return
	}
	writeJSON(w, http.StatusOK, doc)
}
