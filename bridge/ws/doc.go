// Package ws serves JSON-RPC on WebSocket connections (GET /ws), after
// the front door (package bridge) has let the upgrade in. Each frame is
// parsed once; frames calling the stream methods (rpc.stream.send, close,
// cancel) are answered in the reader, in order; others take an in-flight
// slot and the caller's rate limit (Front) and run in a goroutine. The
// frame is the engine's dispatch.Streams: a call of a streaming method
// opens a stream (the engine's OpenStream), whose messages the engine
// pumps into the stream's dispatch.Outbox, as rpc.stream.message
// notifications, then its end as rpc.stream.end; each stream's and each
// connection's buffers are bounded in messages and bytes.
//
// Entry points: New, Server.Serve, Server.Shutdown. conn.go holds the
// connection and its reader, frame.go its frames and their replies,
// stream.go the streams, control.go the stream methods, shutdown.go the
// connections' count, keepalive and Shutdown.
package ws
