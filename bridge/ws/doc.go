// Package ws serves JSON-RPC on WebSocket connections (GET /ws), after
// the front door (package bridge) has let the upgrade in. Each frame is
// parsed once; frames calling the stream methods (rpc.stream.send, close,
// cancel) are answered in the reader, in order; others take an in-flight
// slot and the caller's rate limit (Front) and run in a goroutine. The
// frame is the engine's Session: a call of a streaming method opens a
// stream, whose messages go out as rpc.stream.message notifications and
// whose end as rpc.stream.end, each stream's and each connection's
// buffers bounded in messages and bytes.
//
// Entry points: New, Server.Serve, Server.Shutdown. conn.go holds the
// connection and its frames, stream.go the streams, control.go the
// stream methods.
package ws
