// Package backend is how a prepared call reaches gRPC. An Invoker makes
// the unary calls (and server streams answered in one reply) of one
// backend connection; For picks it once per connection: the bridge's own
// HTTP/2 client (internal/unary) for a DirectConn, grpc-go's otherwise.
// Both fill the same Call, taking its response's bytes from its budget as
// they arrive, and tell whether a failure is the backend's own status,
// which Status passes through, or one made on the bridge's side, which it
// replaces with a fixed message.
//
// Entry points: NewDirectConn and DialOptions (constructors, for cmd);
// For → Invoker.Invoke or Invoker.Start (a Group for a batch) → Status.
// Streams that need more than one reply use grpc-go's NewStream with
// WithOrigin, so that Status can tell their statuses apart too.
//
// Files: invoker.go (Invoker, For, the direct invoker), grpcgo.go (the
// grpc-go invoker and its raw codecs), call.go (Call, its pool and
// budget), status.go (Status, the fixed messages), origin.go (where a
// grpc-go status came from), direct.go (DirectConn).
//
// It imports neither net/http nor the JSON-RPC wire: it knows gRPC alone.
package backend
