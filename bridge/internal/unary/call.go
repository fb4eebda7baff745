package unary

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// A Call is one unary call. The caller sets Method, Metadata, Request and
// Capture; the client sets Response, Header, Trailer and Err. A Call may be
// used again once Invoke or its Group's Wait has returned; Response keeps
// its storage.
type Call struct {
	Method   string      // the gRPC method path, "/pkg.Service/Method"
	Metadata metadata.MD // request metadata; keys in lower case, -bin values raw
	Request  []byte      // the request message's wire bytes; not modified
	Capture  bool        // whether to fill Header and Trailer

	Response []byte      // the response message's wire bytes, when Err is nil
	Header   metadata.MD // the backend's response headers, with Capture
	Trailer  metadata.MD // the backend's trailers, with Capture
	Err      error       // nil, or a status error (status.FromError)

	client   *Client
	conn     *conn
	id       uint32
	group    *Group
	done     chan struct{} // signalled when a single call ends
	refused  bool          // the backend did not process it: safe to retry
	deadline time.Time     // the context's deadline, if any

	// The send side, under conn.mu.
	at      uint64 // where its HEADERS begin in the connection's frames
	out     []byte // the length-prefixed message
	sent    int
	sendWin int32

	// The receive side, under conn.mu.
	recvUnacked int
	gotHeaders  bool
	inTrailers  bool
	prefix      [5]byte
	prefixN     int
	inMsg       bool
	msgLen      int
	msgs        int
	httpStatus  int
	grpcContent bool
	hasCode     bool
	code        int
	message     string
	details     string
}

func (call *Call) reset() {
	call.Response = call.Response[:0]
	call.Header, call.Trailer, call.Err = nil, nil, nil
	call.conn, call.id, call.refused, call.deadline = nil, 0, false, time.Time{}
	call.sent, call.recvUnacked = 0, 0
	call.gotHeaders, call.inTrailers, call.prefixN, call.inMsg = false, false, 0, false
	call.msgLen, call.msgs, call.httpStatus, call.grpcContent = 0, 0, 0, false
	call.hasCode, call.code, call.message, call.details = false, 0, "", ""
}

// complete tells the call's waiter that it has ended.
func (call *Call) complete() {
	if g := call.group; g != nil {
		if g.pending.Add(-1) == 0 {
			g.done <- struct{}{}
		}
		return
	}
	call.done <- struct{}{}
}

// Invoke makes call and waits until it ends, ctx is done or its deadline
// passes; it returns call.Err. A call the backend refused unprocessed
// (REFUSED_STREAM, or above a GOAWAY's last stream) or never received (its
// connection was lost before its frames were written) is tried once more.
func (c *Client) Invoke(ctx context.Context, call *Call) error {
	if call.done == nil {
		call.done = make(chan struct{}, 1)
	}
	for attempt := 0; ; attempt++ {
		call.group = nil
		if err := c.start(ctx, call); err != nil {
			call.Err = err
			return err
		}
		call.conn.flush()
		select {
		case <-call.done:
		case <-ctx.Done():
			if !call.conn.cancel(call, contextStatus(ctx)) {
				<-call.done
			}
		}
		if !call.refused || attempt > 0 {
			return call.Err
		}
	}
}

// A Group waits for calls started together, such as a batch's: their
// frames go out in as few writes as possible and the waiter wakes once.
// Its zero value is ready; it may be used again after Wait returns.
type Group struct {
	calls   []*Call
	conns   []*conn
	pending atomic.Int32 // calls not ended, plus one while Wait has not begun
	done    chan struct{}
	open    bool
}

// Start starts call on c as a member of g without waiting for it. Its
// frames are written by Wait at the latest. When it cannot start, call.Err
// says why at once.
func (g *Group) Start(ctx context.Context, c *Client, call *Call) {
	if !g.open {
		g.open = true
		g.pending.Store(1)
		if g.done == nil {
			g.done = make(chan struct{}, 1)
		}
	}
	g.calls = append(g.calls, call)
	call.group = g
	g.pending.Add(1)
	if err := c.start(ctx, call); err != nil {
		call.group = nil
		call.Err = err
		g.pending.Add(-1)
		return
	}
	if !slices.Contains(g.conns, call.conn) {
		g.conns = append(g.conns, call.conn)
	}
}

// Wait writes the frames of g's calls and waits until all have ended; when
// ctx is done first it ends the others with its status. Refused calls are
// tried once more, one at a time.
func (g *Group) Wait(ctx context.Context) {
	if !g.open {
		return
	}
	for _, cn := range g.conns {
		cn.flush()
	}
	if g.pending.Add(-1) != 0 {
		select {
		case <-g.done:
		case <-ctx.Done():
			err := contextStatus(ctx)
			var ended int32
			for _, call := range g.calls {
				if call.group == g && call.conn.cancel(call, err) {
					ended++
				}
			}
			// With none ended here, the others are ending by themselves
			// and the last of them signals done, perhaps already has:
			// the signal must be taken, or the group's next Wait would
			// return at once and its last call would block the reader.
			if ended == 0 || g.pending.Add(-ended) != 0 {
				<-g.done
			}
		}
	}
	for _, call := range g.calls {
		if call.group == g && call.refused {
			call.client.Invoke(ctx, call)
		}
	}
	clear(g.calls)
	g.calls, g.conns, g.open = g.calls[:0], g.conns[:0], false
}

// errRetry makes start try another connection.
var errRetry = errors.New("unary: the connection is draining")

// start opens call's stream and queues its frames. When it returns nil the
// call will end by its waiter's signal; otherwise it never started.
func (c *Client) start(ctx context.Context, call *Call) error {
	call.reset()
	call.client = c
	if ctx.Err() != nil {
		return contextStatus(ctx)
	}
	var p [5]byte
	binary.BigEndian.PutUint32(p[1:], uint32(len(call.Request)))
	call.out = append(append(call.out[:0], p[:]...), call.Request...)
	for {
		cn, err := c.ready(ctx)
		if err != nil {
			return err
		}
		if err := cn.send(ctx, call); err != errRetry {
			return err
		}
	}
}

// send opens call's stream on cn and queues as much of its message as the
// flow-control windows allow, waiting for the rest to fit.
func (cn *conn) send(ctx context.Context, call *Call) error {
	cn.mu.Lock()
	for uint32(len(cn.streams)) >= cn.maxStreams && !cn.draining.Load() {
		ch := cn.waitLocked()
		cn.mu.Unlock()
		cn.flush() // the group's earlier calls must go out before waiting
		select {
		case <-ch:
		case <-ctx.Done():
			return contextStatus(ctx)
		}
		cn.mu.Lock()
	}
	if cn.draining.Load() {
		cn.mu.Unlock()
		return errRetry
	}
	var timeout time.Duration
	if d, ok := ctx.Deadline(); ok {
		if timeout = time.Until(d); timeout <= 0 {
			cn.mu.Unlock()
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		}
		call.deadline = d
	}
	call.id = cn.nextID
	call.conn = cn
	call.sendWin = cn.peerWindow
	cn.nextID += 2
	if cn.nextID > maxStreamID {
		cn.draining.Store(true)
		go cn.client.retire(cn)
	}
	cn.streams[call.id] = call
	call.at = cn.taken + uint64(len(cn.wbuf))
	cn.appendHeaders(call, timeout)
	for !cn.appendData(call) {
		ch := cn.waitLocked()
		cn.mu.Unlock()
		cn.flush()
		select {
		case <-ch:
		case <-ctx.Done():
			if cn.cancel(call, contextStatus(ctx)) {
				return call.Err
			}
			return nil // it ended meanwhile; its waiter is signalled
		}
		cn.mu.Lock()
		if cn.streams[call.id] != call {
			break // it ended meanwhile (reset, or the connection failed)
		}
	}
	cn.mu.Unlock()
	return nil
}

// appendData queues DATA frames of call's message within the windows and
// reports whether all of it is queued.
func (cn *conn) appendData(call *Call) bool {
	for call.sent < len(call.out) {
		n := min(len(call.out)-call.sent, cn.maxFrame, int(call.sendWin), int(min(cn.sendWindow, maxWindow)))
		if n <= 0 {
			return false
		}
		var flags byte
		if call.sent+n == len(call.out) {
			flags = flagEndStream
		}
		cn.wbuf = append(appendFrameHeader(cn.wbuf, n, frameData, flags, call.id), call.out[call.sent:call.sent+n]...)
		call.sent += n
		call.sendWin -= int32(n)
		cn.sendWindow -= int64(n)
	}
	return true
}

// appendHeaders queues call's HEADERS (and CONTINUATION) frames.
func (cn *conn) appendHeaders(call *Call, timeout time.Duration) {
	cn.block.b = cn.block.b[:0]
	e := cn.enc
	e.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
	e.WriteField(hpack.HeaderField{Name: ":scheme", Value: cn.scheme})
	e.WriteField(hpack.HeaderField{Name: ":path", Value: call.Method})
	e.WriteField(hpack.HeaderField{Name: ":authority", Value: cn.client.ep.authority})
	e.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	e.WriteField(hpack.HeaderField{Name: "user-agent", Value: cn.client.opts.UserAgent})
	e.WriteField(hpack.HeaderField{Name: "te", Value: "trailers"})
	// Values that change with every call are kept out of the backend's
	// HPACK table, where they would only evict the others, and written
	// as plain literals: Huffman-coding them would cost more than the
	// bytes it saves.
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
				cn.block.b = appendNeverIndexed(cn.block.b, k, func(b []byte) []byte { return append(b, v...) })
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
		cn.wbuf = append(appendFrameHeader(cn.wbuf, n, typ, flags, call.id), block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			return
		}
		typ = frameContinuation
	}
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

// emit takes one decoded header field of the block being read.
func (cn *conn) emit(f hpack.HeaderField) {
	call := cn.decCall
	if call == nil {
		return
	}
	switch f.Name {
	case ":status":
		call.httpStatus, _ = strconv.Atoi(f.Value)
	case "content-type":
		call.grpcContent = f.Value == "application/grpc" || strings.HasPrefix(f.Value, "application/grpc+") ||
			strings.HasPrefix(f.Value, "application/grpc;")
	case "grpc-status":
		call.hasCode = true
		call.code, _ = strconv.Atoi(f.Value)
	case "grpc-message":
		call.message = decodeMessage(f.Value)
	case "grpc-status-details-bin":
		call.details = f.Value
	case "grpc-encoding", "grpc-accept-encoding", "grpc-message-type", "grpc-timeout", "te", "user-agent":
	default:
		if !call.Capture || f.IsPseudo() {
			return
		}
		v := f.Value
		if strings.HasSuffix(f.Name, "-bin") {
			b, err := decodeBinary(v)
			if err != nil {
				return
			}
			v = string(b)
		}
		md := &call.Header
		if call.inTrailers {
			md = &call.Trailer
		}
		if *md == nil {
			*md = metadata.MD{}
		}
		(*md)[f.Name] = append((*md)[f.Name], v)
	}
}

// addData takes a DATA frame's payload: the 5-byte prefix and the one
// message a unary response has.
func (call *Call) addData(q []byte, max int) error {
	for len(q) > 0 {
		if !call.inMsg {
			n := copy(call.prefix[call.prefixN:], q)
			call.prefixN += n
			q = q[n:]
			if call.prefixN < 5 {
				return nil
			}
			call.prefixN = 0
			if call.msgs > 0 {
				return status.Error(codes.Internal, "grpc: the backend sent more than one response message to a unary call")
			}
			if call.prefix[0] != 0 {
				return status.Error(codes.Internal, "grpc: the backend sent a compressed message, which was not asked for")
			}
			call.msgLen = int(binary.BigEndian.Uint32(call.prefix[1:]))
			if call.msgLen > max {
				return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", call.msgLen, max)
			}
			call.msgs = 1
			call.inMsg = call.msgLen > 0
			call.Response = slices.Grow(call.Response[:0], call.msgLen)
			continue
		}
		n := min(call.msgLen-len(call.Response), len(q))
		call.Response = append(call.Response, q[:n]...)
		q = q[n:]
		if len(call.Response) == call.msgLen {
			call.inMsg = false
		}
	}
	return nil
}

// result is the status of a call whose stream has ended with trailers.
func (call *Call) result() error {
	if !call.hasCode {
		if call.httpStatus != 200 {
			return httpStatusError(call.httpStatus)
		}
		return status.Error(codes.Internal, "transport: the backend's trailers have no grpc-status")
	}
	if call.code == 0 {
		if call.msgs == 0 || call.inMsg || call.prefixN != 0 {
			return status.Error(codes.Internal, "grpc: the backend ended a unary call without a whole response message")
		}
		return nil
	}
	st := status.New(codes.Code(call.code), call.message)
	if call.details != "" {
		if b, err := decodeBinary(call.details); err == nil {
			p := new(spb.Status)
			if proto.Unmarshal(b, p) == nil && p.Code == int32(call.code) {
				st = status.FromProto(p)
			}
		}
	}
	return st.Err()
}

// httpStatusError is the status of a response that is not gRPC's, by its
// HTTP status, as grpc-go maps it.
func httpStatusError(code int) error {
	c := codes.Unknown
	switch code {
	case http.StatusBadRequest:
		c = codes.Internal
	case http.StatusUnauthorized:
		c = codes.Unauthenticated
	case http.StatusForbidden:
		c = codes.PermissionDenied
	case http.StatusNotFound:
		c = codes.Unimplemented
	case http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		c = codes.Unavailable
	}
	return status.Errorf(c, "unexpected HTTP status code received from server: %d (%s)", code, http.StatusText(code))
}

// decodeMessage undoes grpc-message's percent-encoding; a malformed escape
// is kept as it is.
func decodeMessage(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			if n, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(n))
				i += 2
				continue
			}
		}
		b = append(b, v[i])
	}
	return string(b)
}

// decodeBinary reads a -bin value: base64, padded or not.
func decodeBinary(v string) ([]byte, error) {
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
}
