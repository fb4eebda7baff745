package h1

import (
	"context"
	"net/http"
	"net/textproto"
	"net/url"

	"golang.org/x/net/http/httpguts"
)

// request is a parsed request head of the one shape h1 serves itself.
type request struct {
	host   string
	header http.Header
	length int64 // Content-Length, 0 without one
	close  bool  // Connection: close
}

// requestLine is the only request line h1 serves itself.
const requestLine = "POST / HTTP/1.1\r\n"

// parse parses head (the request line through the blank line) and tells
// whether it is a request h1 serves itself: POST / over HTTP/1.1, with one
// valid Host, at most one Content-Length and no transfer coding, no
// Expect, Upgrade or Pragma, a Connection of keep-alive or close at most,
// and every header line a token, a colon and a valid value, ended by
// CRLF. Anything else is net/http's, which then reads the same bytes.
func (cn *conn) parse(head []byte) (*request, bool) {
	if len(head) > maxHeaderBytes(cn.srv.HTTP) || len(head) < len(requestLine)+2 ||
		string(head[:len(requestLine)]) != requestLine {
		return nil, false
	}
	return parseHeaders(head[len(requestLine) : len(head)-2])
}

func maxHeaderBytes(hs *http.Server) int {
	if hs.MaxHeaderBytes > 0 {
		return hs.MaxHeaderBytes
	}
	return http.DefaultMaxHeaderBytes
}

// parseHeaders parses the header lines of a head, each ended by CRLF.
func parseHeaders(lines []byte) (*request, bool) {
	n := 0
	for _, c := range lines {
		if c == '\n' {
			n++
		}
	}
	all := string(lines) // one allocation: keys and values are its substrings
	req := &request{header: make(http.Header, n)}
	values := make([]string, n) // one backing array for the headers' value slices, as textproto does
	haveHost, haveLength := false, false
	for len(all) > 0 {
		i := indexByte(all, '\n')
		if i < 1 || all[i-1] != '\r' {
			return nil, false
		}
		line := all[:i-1]
		all = all[i+1:]
		colon := indexByte(line, ':')
		if colon < 1 {
			return nil, false
		}
		key, value := line[:colon], trim(line[colon+1:])
		if !validKey(key) || !httpguts.ValidHeaderFieldValue(value) {
			return nil, false
		}
		key = canonicalKey(key)
		switch key {
		case "Host":
			if haveHost || !httpguts.ValidHostHeader(value) {
				return nil, false
			}
			haveHost, req.host = true, value
			continue
		case "Content-Length":
			l, ok := parseLength(value)
			if haveLength || !ok {
				return nil, false
			}
			haveLength, req.length = true, l
		case "Transfer-Encoding", "Expect", "Upgrade", "Pragma", "Http2-Settings", "Te":
			return nil, false
		case "Connection":
			switch {
			case asciiEqualFold(value, "close"):
				req.close = true
			case asciiEqualFold(value, "keep-alive"):
			default:
				return nil, false
			}
		}
		vv := req.header[key]
		if vv == nil && len(values) > 0 {
			vv, values = values[:1:1], values[1:]
			vv[0] = value
		} else {
			vv = append(vv, value)
		}
		req.header[key] = vv
	}
	if !haveHost {
		return nil, false
	}
	return req, true
}

// httpRequest is req as net/http gives it to a handler.
func (req *request) httpRequest(ctx context.Context, cn *conn) *http.Request {
	r := &http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: "/"},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        req.header,
		ContentLength: req.length,
		Close:         req.close,
		Host:          req.host,
		RemoteAddr:    cn.remote,
		RequestURI:    "/",
		Body:          http.NoBody,
	}
	if req.length > 0 {
		r.Body = &body{cn: cn, n: req.length}
	}
	return r.WithContext(ctx)
}

func indexByte(s string, c byte) int {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// trim trims spaces and tabs, as textproto does.
func trim(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// validKey tells whether k is a token (RFC 9110 5.1).
func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		if !httpguts.IsTokenRune(rune(k[i])) {
			return false
		}
	}
	return true
}

// canonicalKey is k in net/http's canonical form, without an allocation
// when k is already in it.
func canonicalKey(k string) string {
	upper := true
	for i := 0; i < len(k); i++ {
		c := k[i]
		if upper && 'a' <= c && c <= 'z' || !upper && 'A' <= c && c <= 'Z' {
			return textproto.CanonicalMIMEHeaderKey(k)
		}
		upper = c == '-'
	}
	return k
}

// parseLength parses a Content-Length: 1 to 18 digits, nothing else.
func parseLength(v string) (int64, bool) {
	if v == "" || len(v) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		a, b := s[i], t[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}
