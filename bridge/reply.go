package bridge

import (
	"bytes"
	"encoding/base64"
	"net/http"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/dispatch"
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

// writeReply writes reply, the engine's answer to the request r (empty
// for notifications alone), with md, the backend's response metadata of
// a single call, as headers (writeCapture), within ReplyTimeout; out is
// the pooled buffer reply was appended to.
func (s *Server) writeReply(w http.ResponseWriter, r *http.Request, rc *http.ResponseController, out *bytes.Buffer, reply []byte, md dispatch.ResponseMetadata) {
	s.startReply(rc)
	defer s.endReply(rc, r)
	writeCapture(w.Header(), md, s.md.response)
	if len(reply) == 0 {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if cap(reply) > maxPooled {
		writeJSON(w, http.StatusOK, reply) // too large for the pool: no copy
		return
	}
	out.Write(reply) // keep the grown buffer for the pool
	writeJSON(w, http.StatusOK, out.Bytes())
}

// writeCapture sets the response metadata md lists under keys (the
// allowed ones) as HTTP headers on h; -bin values are base64 encoded.
// The zero md sets nothing.
func writeCapture(h http.Header, md dispatch.ResponseMetadata, keys []string) {
	if md.Header == nil && md.Trailer == nil {
		return
	}
	for _, key := range keys {
		values := append(md.Header.Get(key), md.Trailer.Get(key)...)
		if len(values) == 0 {
			continue
		}
		name := textproto.CanonicalMIMEHeaderKey(key)
		for _, v := range values {
			if strings.HasSuffix(key, "-bin") {
				v = base64.StdEncoding.EncodeToString([]byte(v))
			} else if !printable(v) {
				continue
			}
			h.Add(name, v)
		}
	}
}
