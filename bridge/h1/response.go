package h1

import (
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/net/http/httpguts"
)

const (
	// bufferBeforeChunking is how much of a reply without a
	// Content-Length is held to learn its length before it is sent
	// chunked (net/http holds 2 KiB).
	bufferBeforeChunking = 4 << 10
	// maxGather is the most of a body copied behind its head into one
	// write; a longer body is written from where it is.
	maxGather = 64 << 10
)

// response is the http.ResponseWriter of a request h1 serves.
type response struct {
	cn     *conn
	req    *http.Request
	body   *body
	header http.Header

	status      int
	wroteHeader bool  // the status is set
	headSent    bool  // the head is in out or written
	length      int64 // the reply's Content-Length, -1 unknown
	written     int64 // body bytes written by the handler
	chunked     bool
	noBody      bool // the status has no body
	closeAfter  bool // the connection closes after this reply
	out         []byte
	err         error // the first write error: the connection is done
}

var outPool = sync.Pool{New: func() any { b := make([]byte, 0, bufferBeforeChunking+512); return &b }}

func newResponse(cn *conn, r *http.Request, close bool) *response {
	w := &response{cn: cn, req: r, header: make(http.Header, 4), length: -1, closeAfter: close}
	if b, ok := r.Body.(*body); ok {
		w.body = b
	}
	w.out = (*outPool.Get().(*[]byte))[:0]
	return w
}

func (w *response) release() {
	if cap(w.out) <= maxGather+4<<10 { // a head and a gathered body
		b := w.out[:0]
		outPool.Put(&b)
	}
	w.out = nil
}

func (w *response) Header() http.Header { return w.header }

// WriteHeader sets the status as net/http does: informational statuses
// (but 101) are written at once, a second final status is ignored.
func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		return
	}
	if code < 100 || code > 999 {
		panic("invalid WriteHeader code " + strconv.Itoa(code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		w.out = appendStatus(w.out, code)
		w.out = w.appendHeaders(w.out, true) // RFC 9110 8.6: no Content-Length
		w.out = append(w.out, "\r\n"...)
		w.flushOut()
		return
	}
	w.wroteHeader, w.status = true, code
	w.noBody = code == http.StatusNoContent || code == http.StatusNotModified || code == http.StatusSwitchingProtocols
	if v := w.header.Get("Content-Length"); v != "" {
		if l, ok := parseLength(v); ok {
			w.length = l
		} else {
			w.cn.logf("http: invalid Content-Length of %q", v)
			w.header.Del("Content-Length")
		}
	}
	if v := w.header.Get("Connection"); v != "" && httpguts.HeaderValuesContainsToken(w.header["Connection"], "close") {
		w.closeAfter = true
	}
}

func (w *response) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if w.noBody {
		return 0, http.ErrBodyNotAllowed
	}
	if w.err != nil {
		return 0, w.err
	}
	if w.length >= 0 && w.written+int64(len(p)) > w.length {
		return 0, http.ErrContentLength
	}
	w.written += int64(len(p))
	switch {
	case w.headSent && w.chunked:
		if len(p) > 0 {
			w.out = strconv.AppendInt(w.out, int64(len(p)), 16)
			w.out = append(w.out, "\r\n"...)
			w.writeBody(p)
			w.out = append(w.out, "\r\n"...)
		}
	case w.headSent:
		w.writeBody(p)
	case w.length >= 0:
		w.out = w.appendHead(w.out, p)
		w.writeBody(p)
	default: // no length yet: hold the body to learn it
		if len(w.out)+len(p) > bufferBeforeChunking {
			held := w.out
			w.out = w.appendHead(make([]byte, 0, len(held)+512), held)
			w.chunked = true
			w.sendChunkedHead(held, p)
			return len(p), w.err
		}
		w.out = append(w.out, p...)
	}
	return len(p), w.err
}

// sendChunkedHead follows the head now in out with the held body and p,
// as chunks.
func (w *response) sendChunkedHead(held, p []byte) {
	if len(held) > 0 {
		w.out = strconv.AppendInt(w.out, int64(len(held)), 16)
		w.out = append(w.out, "\r\n"...)
		w.out = append(w.out, held...)
		w.out = append(w.out, "\r\n"...)
	}
	if len(p) > 0 {
		w.out = strconv.AppendInt(w.out, int64(len(p)), 16)
		w.out = append(w.out, "\r\n"...)
		w.writeBody(p)
		w.out = append(w.out, "\r\n"...)
	}
}

// writeBody appends p to out, or writes out and p at once when p is long;
// out is written once it holds maxGather bytes, so that a reply written
// in many pieces is held at most that much.
func (w *response) writeBody(p []byte) {
	if len(p) <= maxGather {
		w.out = append(w.out, p...)
		if len(w.out) >= maxGather {
			w.flushOut()
		}
		return
	}
	if w.err == nil {
		w.err = w.cn.write(w.out, p)
	}
	w.out = w.out[:0]
}

// Flush writes what is held, deciding the framing if nothing was sent.
func (w *response) Flush() { _ = w.FlushError() }

// FlushError is Flush for http.ResponseController.
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		held := w.out
		w.out = w.appendHead(make([]byte, 0, len(held)+512), nil)
		if w.length < 0 && !w.noBody {
			w.chunked = true
			w.sendChunkedHead(held, nil)
		}
	}
	w.flushOut()
	return w.err
}

func (w *response) flushOut() {
	if len(w.out) > 0 && w.err == nil {
		w.err = w.cn.write(w.out, nil)
	}
	w.out = w.out[:0]
}

// finish completes the reply after the handler returned.
func (w *response) finish() {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if !w.headSent {
		held := w.out
		if w.length < 0 && !w.noBody {
			w.length = int64(len(held))
			w.header.Set("Content-Length", strconv.Itoa(len(held)))
		}
		w.out = w.appendHead(make([]byte, 0, len(held)+512), held)
		w.out = append(w.out, held...)
	} else if w.chunked {
		w.out = append(w.out, "0\r\n\r\n"...)
	}
	if w.length >= 0 && w.written < w.length && !w.noBody {
		w.closeAfter = true // the client waits for bytes that will not come
	}
	w.flushOut()
}

// SetReadDeadline is http.ResponseController's.
func (w *response) SetReadDeadline(t time.Time) error {
	w.cn.setReadDeadline(t)
	return nil
}

// SetWriteDeadline is http.ResponseController's.
func (w *response) SetWriteDeadline(t time.Time) error {
	w.cn.setWriteDeadline(t)
	return nil
}

// appendHead appends the status line and the headers; body is the start
// of the body, for sniffing a missing Content-Type.
func (w *response) appendHead(b []byte, body []byte) []byte {
	w.headSent = true
	if !w.closeAfter && (!w.cn.srv.keepAlive() || w.req.Close) {
		w.closeAfter = true
	}
	if !w.closeAfter {
		w.discardBody()
	}
	h := w.header
	if w.noBody {
		h.Del("Content-Length")
		h.Del("Transfer-Encoding")
	} else {
		h.Del("Transfer-Encoding") // h1 frames the body
		if _, ok := h["Content-Type"]; !ok && len(body) > 0 {
			h.Set("Content-Type", http.DetectContentType(body[:min(len(body), 512)]))
		}
	}
	b = appendStatus(b, w.status)
	b = w.appendHeaders(b, false)
	if _, ok := h["Date"]; !ok {
		b = append(b, "Date: "...)
		b = appendDate(b)
		b = append(b, "\r\n"...)
	}
	if w.closeAfter && !httpguts.HeaderValuesContainsToken(h["Connection"], "close") {
		b = append(b, "Connection: close\r\n"...)
	}
	if w.length < 0 && !w.noBody {
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	}
	return append(b, "\r\n"...)
}

func appendStatus(b []byte, code int) []byte {
	if code == http.StatusOK {
		return append(b, "HTTP/1.1 200 OK\r\n"...)
	}
	b = append(b, "HTTP/1.1 "...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, ' ')
	if text := http.StatusText(code); text != "" {
		b = append(b, text...)
	} else {
		b = append(b, "status code "...)
		b = strconv.AppendInt(b, int64(code), 10)
	}
	return append(b, "\r\n"...)
}

// appendHeaders appends the handler's headers in key order, as net/http
// writes them: keys that are not valid field names are left out, CR and
// LF in values become spaces; informational, those that frame a body
// (Content-Length, Transfer-Encoding) are left out too, as net/http
// leaves them out of a 1xx reply.
func (w *response) appendHeaders(b []byte, informational bool) []byte {
	var small [8]string
	keys := small[:0]
	for k := range w.header {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) || informational && (k == "Content-Length" || k == "Transfer-Encoding") {
			continue
		}
		for _, v := range w.header[k] {
			b = append(b, k...)
			b = append(b, ": "...)
			b = appendValue(b, v)
			b = append(b, "\r\n"...)
		}
	}
	return b
}

// appendValue appends v trimmed, its CR and LF bytes as spaces.
func appendValue(b []byte, v string) []byte {
	v = trim(v)
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c == '\r' || c == '\n' {
			c = ' '
		}
		b = append(b, c)
	}
	return b
}

// maxDiscard is the most of a request body left unread by its handler
// that is read and dropped so that the connection can serve another
// request (net/http's maxPostHandlerReadBytes); with more left, the reply
// closes the connection.
const maxDiscard = 256 << 10

// discardBody reads and drops what the handler left of the request body
// as the reply starts, as net/http does: a body closed before its end, or
// whose rest cannot be read, closes the connection after the reply
// without saying so (serveRequest); one with maxDiscard bytes or more
// left has the reply say Connection: close.
func (w *response) discardBody() {
	b := w.body
	switch {
	case b == nil || b.n == 0 || b.closed:
		return
	case b.n >= maxDiscard:
		w.closeAfter = true
		return
	}
	_, _ = io.Copy(io.Discard, b) // on failure b is broken
}
