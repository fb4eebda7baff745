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
//	  → prepare  (resolve the method, rpc.discover, Guard.Allow; a call
//	              of a streaming method asks Exchange.Streams how it is
//	              answered: Collect, Live or Detach, the stream methods and
//	              detached streams handed to its Detacher; params encoded
//	              into a backend.Call)
//	  → execute  (the deadline, set in one place: deadline; then the
//	              method's backend.Invoker, or a Group for a batch's
//	              direct calls; collect for client and bidi streams; live)
//	  → finish   (the reply: result or error)
//	  → settle   (the reply held to MaxResponseBytes, Guard.Done with the
//	              code as a value, the call given back)
//
// One recover (safely) turns a panic in any phase into -32603.
//
// The stream engine: every backend stream, of every transport, opens in
// OpenStream and is read by one loop, Stream.Pump, which hands each
// response, as JSON, to a Sink: the collector of a stream answered in one
// reply (with MCP's progress as a second Sink), a live reply (package
// live), a WebSocket stream (package ws). The transports' Sinks hold what
// their client has not read in an Outbox, the one bounded queue, which
// ends a stream whose client does not read with SLOW_CLIENT. A Sink that
// is a Waiter holds the stream back: the next response is read only once
// it has room.
//
// Files: engine.go (Options, Engine, the Exchange and the seams: Guard,
// Binder, Lister; the deadline), sink.go (the seams of streams: Sink,
// Streams, Mode, Opener, Detacher, Waiter), table.go (Catalog → Table,
// Method, the lazy OpenRPC document), call.go (Run, the phases, batches,
// rpc.discover), stream.go (OpenStream, Pump, the end of a stream),
// collect.go (streams answered in one reply), live.go (streams answered
// live), outbox.go (Outbox, Shared), budget.go (MaxResponseBytes shared by
// a batch's replies).
//
// It imports wire, backend and mapping; never net/http, a transport, or
// package bridge (.ci/run holds this).
package dispatch
