package live

import (
	"bytes"
	"strings"
)

// A Form is how a stream answered live is framed.
type Form uint8

const (
	None   Form = iota
	SSE         // text/event-stream: each message an event's data
	NDJSON      // application/x-ndjson: one message per line
	JSONL       // application/jsonl: the same, by its other name
)

// The media types of the live forms, by Form.
var types = [...]string{SSE: "text/event-stream", NDJSON: "application/x-ndjson", JSONL: "application/jsonl"}

// Headers of every live reply: no cache may keep it, and nginx (and the
// proxies that follow its header) passes each event on at once rather
// than buffering the reply.
var (
	noCache   = []string{"no-cache"}
	noBuffers = []string{"no"}
)

// Accept returns the live form the Accept header values ask for, or
// None. A form is asked for when its media type is named with a
// q-value above 0 and at least that of application/json: a client that
// names both equally (as MCP clients do) can read either, and gets the
// stream live. Wildcards (*/*, text/*) ask for no live form. Among the
// live forms the highest q-value wins, the first named on a tie.
func Accept(values []string) Form {
	best, bestQ, jsonQ := None, 0, 0
	for _, v := range values {
		for len(v) > 0 {
			var r string
			r, v, _ = strings.Cut(v, ",")
			typ, params, _ := strings.Cut(r, ";")
			typ = strings.TrimSpace(typ)
			f := None
			switch {
			case strings.EqualFold(typ, "text/event-stream"):
				f = SSE
			case strings.EqualFold(typ, "application/x-ndjson"):
				f = NDJSON
			case strings.EqualFold(typ, "application/jsonl"):
				f = JSONL
			case strings.EqualFold(typ, "application/json"):
			default:
				continue
			}
			q := qValue(params)
			switch {
			case f == None:
				jsonQ = max(jsonQ, q)
			case q > bestQ:
				best, bestQ = f, q
			}
		}
	}
	if bestQ == 0 || bestQ < jsonQ {
		return None
	}
	return best
}

// qValue reads the weight among the parameters of one media range of
// Accept, as thousandths (RFC 9110, section 12.4.2): 1000 without one, 0
// for one that is not a qvalue, which refuses the range.
func qValue(params string) int {
	for len(params) > 0 {
		var p string
		p, params, _ = strings.Cut(params, ";")
		name, val, ok := strings.Cut(p, "=")
		if !ok || !strings.EqualFold(strings.TrimSpace(name), "q") {
			continue
		}
		val = strings.TrimSpace(val)
		if val == "" || len(val) > 5 || val[0] != '0' && val[0] != '1' || len(val) > 1 && val[1] != '.' {
			return 0
		}
		q := int(val[0]-'0') * 1000
		scale := 100
		for i := 2; i < len(val); i++ {
			c := val[i]
			if c < '0' || c > '9' || val[0] == '1' && c != '0' {
				return 0
			}
			q += int(c-'0') * scale
			scale /= 10
		}
		return q
	}
	return 1000
}

// The pieces of the frames of the live forms.
var (
	sseData      = []byte("data: ")
	sseEnd       = []byte("\n\n")
	lineEnd      = []byte("\n")
	sseKeepalive = []byte(": keepalive\n\n")
)

// frame returns the pieces that frame the message b: an event whose
// data is b, or b and a newline. A line break in b can only be space
// between JSON tokens (JSON strings escape them), so it becomes a space.
func (f Form) frame(b []byte) [3][]byte {
	if bytes.ContainsAny(b, "\r\n") {
		b = bytes.Map(func(r rune) rune {
			if r == '\r' || r == '\n' {
				return ' '
			}
			return r
		}, b)
	}
	if f == SSE {
		return [3][]byte{sseData, b, sseEnd}
	}
	return [3][]byte{b, lineEnd}
}

// keepalive returns what keeps an idle stream's connection open: an SSE
// comment, or an empty line (which NDJSON readers skip).
func (f Form) keepalive() [3][]byte {
	if f == SSE {
		return [3][]byte{sseKeepalive}
	}
	return [3][]byte{lineEnd}
}
