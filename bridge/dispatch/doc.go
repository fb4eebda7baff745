// Package dispatch is the JSON-RPC engine: one parsed message and the
// Exchange its transport describes it with in, the reply out. It knows no
// transport (no net/http, no WebSocket): what a transport adds, it adds
// through the interfaces declared here.
//
// Entry points: New, Update (a Catalog becomes a Table, its Guards bound
// by each Binder), Run.
//
// Every call, single or a member of a batch, takes the same three phases:
//
//	Run → single | batch
//	  → prepare  (resolve the method, rpc.discover, Guard.Allow, the stream
//	              methods and WebSocket streams handed to the Session,
//	              params encoded into a backend.Call)
//	  → execute  (the deadline, set in one place: deadline; then the
//	              method's backend.Invoker, or a Group for a batch's
//	              direct calls; collect for client and bidi streams)
//	  → finish   (the reply: result or error)
//	  → settle   (the reply held to MaxResponseBytes, Guard.Done with the
//	              code as a value, the call given back)
//
// One recover (safely) turns a panic in any phase into -32603.
// A Session serves what needs more than one reply (WebSocket streams).
//
// Files: engine.go (Options, Engine, the Exchange and the seams: Guard,
// Binder, Lister, Session; the deadline), table.go (Catalog → Table,
// Method, the lazy OpenRPC document), call.go (Run, the phases, batches,
// rpc.discover), stream.go (streams answered in one reply), live.go
// (streams answered live through the seam Live: POST / with Accept
// text/event-stream or NDJSON), budget.go (MaxResponseBytes shared by a
// batch's replies).
//
// It imports wire, backend and mapping; never net/http, a transport, or
// package bridge (.ci/run holds this).
package dispatch
