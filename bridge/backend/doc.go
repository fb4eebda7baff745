// Package backend is how a prepared call reaches gRPC. A Conn (Dial) is
// the connection to one backend over every address its target resolves
// to: a pool keeps the address set (a resolver loop, re-resolving every
// ResolveInterval and when a connection fails or drains; removed
// addresses drain), one unary client per address for the direct path
// with a picker above them (least_request, round_robin, pick_first; no
// lock, no allocation), health watches, and grpc-go's ClientConn fed the
// same set through a manual resolver, its balancer chosen by service
// config. An Invoker makes the unary calls (and server streams answered
// in one reply) of one backend connection; For picks it once per
// connection: the bridge's own HTTP/2 client (internal/unary) for a Conn
// with the direct path, grpc-go's otherwise.
// Both fill the same Call, taking its response's bytes from its budget as
// they arrive, and tell whether a failure is the backend's own status,
// which Status passes through, or one made on the bridge's side, which it
// replaces with a fixed message.
//
// Entry points: Dial, NewDirectConn and DialOptions (constructors, for cmd);
// For → Invoker.Invoke or Invoker.Start (a Group for a batch) → Status.
// Streams that need more than one reply use grpc-go's NewStream with
// WithOrigin, so that Status can tell their statuses apart too.
//
// Files: invoker.go (Invoker, For, the direct invoker), grpcgo.go (the
// grpc-go invoker and its raw codecs), call.go (Call, its pool and
// budget, Group), status.go (Status, the fixed messages), origin.go (where
// a grpc-go status came from), conn.go (Conn, Dial, grpc-go's service
// config and its per-address stats), target.go (targets and their
// resolution), pool.go (the address set, its loop, the picker), health.go
// (the health watches), status_pool.go (the addresses as /readyz and the
// metrics see them).
//
// It imports neither net/http nor the JSON-RPC wire: it knows gRPC alone.
package backend
