// Package backend is how a prepared call reaches gRPC. A Conn (Dial) is
// the connection to one backend over every address its target resolves
// to, and its one balancer for both call paths: a pool keeps the address
// set (a resolver loop, re-resolving every ResolveInterval and when a
// connection fails or drains; removed addresses drain), one unary client
// per address for the direct path, health watches and the outlier
// detector; its picker (least_request, round_robin, pick_first; no lock,
// no allocation on the direct path) chooses an address per call for the
// direct client, and for grpc-go, whose ClientConn gets the same set
// through a manual resolver and the pool as its balancer (one SubConn per
// address). Both paths count their calls on the same addresses, so that
// the policy, health, ejection, draining and /readyz read one state per
// address. An Invoker makes the unary calls (and server streams answered
// in one reply) of one backend connection; For picks it once per
// connection: the bridge's own HTTP/2 client (internal/unary) for a Conn
// with the direct path, grpc-go's otherwise.
// Both fill the same Call, taking its response's bytes from its budget as
// they arrive, and tell whether a failure is the backend's own status,
// which Status passes through, or one made on the bridge's side, which it
// replaces with a fixed message.
//
// Entry points: Dial and DialOptions (constructors, for cmd); For →
// Invoker.Invoke or Invoker.Start (a Group for a batch) → Status.
// Streams that need more than one reply use grpc-go's NewStream with
// WithOrigin, so that Status can tell their statuses apart too.
//
// Files: invoker.go (Invoker, For, the direct invoker), grpcgo.go (the
// grpc-go invoker and its raw codecs), call.go (Call, its pool and
// budget, Group: the direct path's picks and its one retry of unsent
// calls), status.go (Status, the fixed messages), origin.go (where a
// grpc-go status came from), conn.go (Conn, Dial, Options), target.go
// (targets and their resolution: the one parser), pool.go (the address
// set and its loop), address.go (an address as both paths share it),
// pick.go (the view and the picker, the time signal of stalled
// addresses), outlier.go (the outlier detector: outcomes, ejection,
// return), balancer.go (the pool as grpc-go's balancer: SubConns, its
// picker, Done), health.go (the health watches, on grpc-go's SubConns),
// status_pool.go (the addresses as /readyz and the metrics see them).
//
// It imports neither net/http nor the JSON-RPC wire: it knows gRPC alone.
package backend
