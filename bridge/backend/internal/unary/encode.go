package unary

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2/hpack"
)

// blockWriter collects what the HPACK encoder writes.
type blockWriter struct{ b []byte }

func (w *blockWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// headerListSize is the size of call's header list as RFC 9113 counts it
// for SETTINGS_MAX_HEADER_LIST_SIZE (grpc-timeout taken at its longest).
func (cn *conn) headerListSize(call *Call) int64 {
	c := cn.client
	n := 8 * 32
	n += len(":method") + len("POST") + len(":scheme") + len(cn.scheme) + len(":path") + len(call.Method) +
		len(":authority") + len(c.auth) + len("content-type") + len("application/grpc") +
		len("user-agent") + len(c.opts.UserAgent) + len("te") + len("trailers") + len("grpc-timeout") + 9
	for k, vs := range call.Metadata {
		for _, v := range vs {
			n += 32 + len(k)
			if strings.HasSuffix(k, "-bin") {
				n += base64.RawStdEncoding.EncodedLen(len(v))
			} else {
				n += len(v)
			}
		}
	}
	return int64(n)
}

// appendHeaders appends call's HEADERS (and CONTINUATION) frames.
func (cn *conn) appendHeaders(b []byte, call *Call, timeout time.Duration) []byte {
	cn.block.b = cn.block.b[:0]
	e := cn.enc
	e.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
	e.WriteField(hpack.HeaderField{Name: ":scheme", Value: cn.scheme})
	e.WriteField(hpack.HeaderField{Name: ":path", Value: call.Method})
	e.WriteField(hpack.HeaderField{Name: ":authority", Value: cn.client.auth})
	e.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	e.WriteField(hpack.HeaderField{Name: "user-agent", Value: cn.client.opts.UserAgent})
	e.WriteField(hpack.HeaderField{Name: "te", Value: "trailers"})
	// Values that change with every call are kept out of the backend's
	// HPACK table, where they would only evict the others.
	if timeout > 0 {
		cn.block.b = appendNeverIndexed(cn.block.b, "grpc-timeout", func(b []byte) []byte { return appendTimeout(b, timeout) })
	}
	for k, vs := range call.Metadata {
		once := k == "x-request-id" || k == "traceparent" || k == "tracestate"
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			if once || len(v) > 64 {
				cn.block.b = appendLiteral(cn.block.b, k, v)
				continue
			}
			e.WriteField(hpack.HeaderField{Name: k, Value: v})
		}
	}
	block := cn.block.b
	typ := byte(frameHeaders)
	for {
		n := min(len(block), cn.maxFrame)
		var flags byte
		if n == len(block) {
			flags = flagEndHeaders
		}
		b = append(appendFrameHeader(b, n, typ, flags, call.id), block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			return b
		}
		typ = frameContinuation
	}
}

// appendLiteral appends a header field as an HPACK literal never indexed,
// with a new name (RFC 7541 section 6.2.3); the value is Huffman-coded
// when that makes it shorter, as grpc-go's encoder does.
func appendLiteral(b []byte, name, value string) []byte {
	if n := hpack.HuffmanEncodeLength(value); n < uint64(len(value)) {
		b = append(b, 0x10)
		b = appendHPACKInt(b, uint64(len(name)))
		b = append(b, name...)
		at := len(b)
		b = appendHPACKInt(b, n)
		b[at] |= 0x80 // the Huffman bit
		return hpack.AppendHuffmanString(b, value)
	}
	return appendNeverIndexed(b, name, func(b []byte) []byte { return append(b, value...) })
}

// appendNeverIndexed appends a header field as an HPACK literal never
// indexed, with a new name, both strings without Huffman coding (RFC 7541
// section 6.2.3). value appends the field's value. Such a field leaves
// both HPACK tables as they are, so it may be written around the encoder.
func appendNeverIndexed(b []byte, name string, value func([]byte) []byte) []byte {
	b = append(b, 0x10)
	b = appendHPACKInt(b, uint64(len(name)))
	b = append(b, name...)
	// The value's length comes first: write the value after a one-byte
	// length, and move it when its length needs more bytes.
	at := len(b)
	b = value(append(b, 0))
	n := len(b) - at - 1
	if n < 0x7f {
		b[at] = byte(n)
		return b
	}
	length := appendHPACKInt(nil, uint64(n))
	b = append(b, length[1:]...)
	copy(b[at+len(length):], b[at+1:at+1+n])
	copy(b[at:], length)
	return b
}

// appendHPACKInt appends i as an HPACK integer with a 7-bit prefix and the
// string's Huffman bit clear (RFC 7541 section 5.1).
func appendHPACKInt(b []byte, i uint64) []byte {
	if i < 0x7f {
		return append(b, byte(i))
	}
	b = append(b, 0x7f)
	for i -= 0x7f; i >= 0x80; i >>= 7 {
		b = append(b, byte(i&0x7f|0x80))
	}
	return append(b, byte(i))
}

// appendTimeout appends d as grpc-timeout writes it: at most 8 digits and
// a unit, rounded up.
func appendTimeout(b []byte, d time.Duration) []byte {
	units := [...]struct {
		unit time.Duration
		name byte
	}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}}
	for _, u := range units {
		v := d / u.unit
		if d%u.unit != 0 {
			v++ // d + u.unit - 1 would overflow for the longest durations
		}
		if v < 1e8 {
			return append(strconv.AppendInt(b, int64(v), 10), u.name)
		}
	}
	return append(b, "99999999H"...)
}
