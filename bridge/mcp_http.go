package bridge

import (
	"crypto/rand"
	"io"
	"net/http"
	"sync"
	"time"
)

// This file is /mcp's route: the front door's first steps (origin, as for
// every route; authentication; the body-read slot and body_timeout), then
// the SDK's handler (package mcp), whose tool calls come back to the
// engine through mcpEngine (mcp_engine.go).

// serveMCP serves /mcp: 404 when MCP is off; otherwise the front door
// authenticates the request (401 as for POST /) and the SDK's handler
// serves it.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request) {
	if s.opts.DisableMCP {
		writeJSON(w, http.StatusNotFound, []byte(`{"error":"not found: MCP is off (mcp: false)"}`))
		return
	}
	x, ok := s.front(w, r)
	if !ok {
		return
	}
	key := rand.Text()
	s.mcp.callers.Store(key, &mcpCaller{x: x, r: r})
	defer s.mcp.callers.Delete(key)
	h := r.Header.Clone()
	h[mcpCallerKey] = []string{key}
	r = r.Clone(r.Context())
	r.Header = h
	rc := http.NewResponseController(w)
	if r.Method == http.MethodGet {
		// The stream of the session's notifications stays open: over
		// HTTP/1 the connection's deadlines would end it.
		_ = rc.SetReadDeadline(time.Time{})
		_ = rc.SetWriteDeadline(time.Time{})
	} else {
		// A POST's reply streams until its call ends.
		_ = rc.SetWriteDeadline(time.Now().Add(s.opts.MaxCallTimeout + s.opts.ReplyTimeout))
		if r.Body != nil && r.Body != http.NoBody {
			// The body is read under body_timeout and counts among the
			// client's bodies being read, as a POST /'s does.
			key := clientKey(r, x)
			if ref := s.startReading(r, key); ref != nil {
				s.refuse(w, r, x, ref)
				return
			}
			var once sync.Once
			done := func() { once.Do(func() { s.doneReading(r, key) }) }
			defer done()
			_ = rc.SetReadDeadline(time.Now().Add(s.opts.BodyTimeout))
			r.Body = &liftOnEOF{ReadCloser: r.Body, rc: rc, read: done}
		}
	}
	s.MCP().Handler().ServeHTTP(w, r)
}

// liftOnEOF lifts the read deadline of a request once its body is read,
// as serveRPC does: over HTTP/1 it would end the request's context. On
// the body's end, or its failure, it calls read.
type liftOnEOF struct {
	io.ReadCloser
	rc   *http.ResponseController
	read func()
	done bool
}
