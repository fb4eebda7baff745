// Package unary is a lean gRPC client for unary calls whose messages are
// already protobuf wire bytes, which is all the bridge's unary path needs.
//
// It speaks HTTP/2 itself on one connection per address (package backend
// holds a Client per address of a backend and picks one per call, by
// State, which takes no lock, and its own counts; OnAnswer tells it when
// the backend answers): a call is queued
// on the connection by the calling goroutine, and one writer goroutine per
// connection encodes the HEADERS and DATA frames of every queued call and
// writes them with one system call, so concurrent calls share writes;
// callers never wait for a write, so each returns by its own deadline
// whatever the backend does. One reader goroutine per connection parses the
// backend's frames and completes the calls. A batch queues all its calls
// before waking the writer and waits for them together (Group).
//
// It covers what unary calls need of HTTP/2 and gRPC: flow control both
// ways, SETTINGS (concurrent stream limit, window and frame sizes, header
// table size), PING, keepalive, GOAWAY and RST_STREAM (calls the backend never saw are
// retried once on a new connection, or each time when a draining connection
// that served others left them out: see Call.requeue), CONTINUATION, padding, trailers-only
// responses, grpc-timeout, metadata (-bin values in base64) and status
// details. A call made while the client has no connection may wait for
// a dial or fail at once, unsent, to be tried elsewhere (SetNoWait,
// Call.Unsent). A server-streaming call whose messages are wanted all at once
// is made the same way (Call.Stream). A call's response can be held to a
// budget shared with others (Call.Budget), checked against each message's
// length prefix before any of the message is kept. Other streaming calls,
// reflection and compression (gzip responses excepted) are left to
// grpc-go. Statuses made here rather than received from the backend
// carry messages that begin with "transport: " or "grpc: ".
//
// Each file has one job: call.go the Call and the Group, what a caller
// queues and waits for, with the call's side of a response's messages;
// conn.go the connection, its queues and its writer; encode.go a
// request's header block (HPACK encoding); read.go the reader's loop and
// the frames it handles; decode.go a response's header blocks (HPACK
// decoding, and what grpc-go makes of them); status.go the statuses a
// call ends with; compress.go gzip responses; keepalive.go the pings;
// client.go the connections of one address, dialled and redialled;
// frame.go and fields.go the HTTP/2 frames and header fields.
package unary
