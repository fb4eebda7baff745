package bridge

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// This file is the writers of replies: the deadline a reply is written
// within, plain JSON bodies, and the pooled buffers of bodies and replies.

// bufPool recycles request bodies and replies.
var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooled keeps one huge request from pinning its buffer forever.
const maxPooled = 1 << 20

// startReply gives the reply of a POST / its deadline, ReplyTimeout from
// now: a client that does not read it frees its MaxInFlight slot when it
// expires, as the write fails (HTTP/1) or the stream is reset (HTTP/2).
// It replaces the server's WriteTimeout for the reply. The deadline is
// the request's own, so GET /ws is unaffected.
func (s *Server) startReply(rc *http.ResponseController) {
	_ = rc.SetWriteDeadline(time.Now().Add(s.opts.ReplyTimeout))
}

// endReply writes out the reply under its deadline and, over HTTP/1,
// where the deadline is the connection's, lifts it, lest it fail the
// next request on the connection (such as a GET /ws upgrade).
func (s *Server) endReply(rc *http.ResponseController, r *http.Request) {
	if r.ProtoMajor == 1 {
		_ = rc.Flush()
		_ = rc.SetWriteDeadline(time.Time{})
	}
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= maxPooled {
		bufPool.Put(b)
	}
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType // shared: net/http only reads it
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write(body)
}

var jsonContentType = []string{"application/json"}
