// Package h1 is a lean HTTP/1.1 server for the one request a bridge
// serves most: a keep-alive POST / with a Content-Length body. It serves
// that request itself, through the same http.Handler as net/http, and
// hands the connection to a net/http Server at the first request that is
// anything else: TLS, HTTP/2 with prior knowledge, another method or
// path, chunked bodies, Expect, Upgrade, HTTP/1.0, a header it does not
// parse as the plain case. The hand-over happens before that request is
// read: net/http gets its bytes as they arrived and serves the rest of
// the connection, so every request that is not plain is answered exactly
// as net/http answers it, refusals included. One exception: the HTTP/2
// preface after requests h1 served closes the connection, where net/http,
// given the connection, would switch it to HTTP/2 (alone, it takes HTTP/2
// with prior knowledge only at the start of a connection).
//
// What it saves per request, against net/http's HTTP/1.1 server: the
// background read that watches for the client going away, the deadline
// changes when the request was already in the buffer, the response
// writer's chunking layer and its header sort, and the allocations of
// textproto's reader. What it keeps: the http.Handler interface, the
// server's ReadHeaderTimeout, ReadTimeout, WriteTimeout, IdleTimeout and
// MaxHeaderBytes, http.ResponseController's Flush and deadlines, the
// keep-alive rules (Connection: close both ways, SetKeepAlivesEnabled),
// graceful Shutdown, and the request context's http.ServerContextKey and
// http.LocalAddrContextKey.
//
// At Shutdown, unlike net/http, it loses no request that came on a
// connection it accepted: a request that arrives during Shutdown is
// served, with Connection: close (net/http reads it and closes without a
// reply), and the connections in the listener's accept queue are taken
// out and served before the socket stops listening (closing a listener
// resets them); see stopListening.
//
// One difference on the requests it serves itself: a client that closes
// its connection while its request is handled cancels the request's
// context once the request has run for half a second (watchAfter), not at
// once as with net/http, whose background read costs every request a
// goroutine switch and two system calls.
//
// The files, each with one job: server.go (Serve, Shutdown, Close, the
// listener connections are handed over on), conn.go (a connection's loop:
// awaiting a request, its head, deadlines, serving it, the hand-over),
// parse.go (the request head), body.go (the Content-Length body), watch.go
// (the client-gone watch), response.go (the ResponseWriter), date.go (the
// Date header, formatted once a second), listen_*.go (stopping the
// listener without resetting the queued connections).
package h1
