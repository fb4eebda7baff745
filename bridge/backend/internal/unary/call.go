package unary

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
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

	// Stream makes the call server-streaming: the backend may answer with
	// any number of messages, which Response then holds one after the
	// other, each behind its 5-byte gRPC prefix (see Messages).
	Stream bool
	// MaxMessages, when not 0, bounds the messages of a Stream call: one
	// more ends the call with ErrTooManyMessages.
	MaxMessages int
	// Budget, when not nil, is shared by calls whose responses must fit in
	// it together. As soon as a response message's length is known, before
	// any of it is kept, the length is taken from Budget and added to
	// Reserved; when less is left the call ends with ErrOverBudget and its
	// stream is reset. The caller gives Reserved back, or keeps it.
	Budget *atomic.Int64
	// Limit, when not 0, bounds the bytes of the call's response messages
	// together, as Budget does for one call alone.
	Limit int64

	Response []byte      // the response message's wire bytes, when Err is nil
	Header   metadata.MD // the backend's response headers, with Capture
	Trailer  metadata.MD // the backend's trailers, with Capture
	Err      error       // nil, or a status error (status.FromError)
	// Remote is set when Err is the backend's own status, from its
	// trailers; any other Err was made by the client (transport
	// failures, deadlines, a backend breaking the protocol), with a
	// message that is the client's, not the backend's.
	Remote   bool
	Reserved int64 // the bytes of the response's messages so far, taken from Budget when set

	client   *Client
	conn     *conn
	group    *Group
	done     chan struct{} // signalled when a single call ends
	deadline time.Time     // the context's deadline, if any

	// Under conn.mu.
	state   uint8
	id      uint32
	refused bool // the backend did not process it: safe to retry
	// requeue is set with refused when the call was left out by a
	// connection that had answered other calls and drains: one that
	// served its quota of calls (nginx's keepalive_requests) while more
	// were queued, or above its GOAWAY's last stream. The backend has not
	// seen it, and calls are being served: it is tried again however
	// often this happens, while its deadline allows, as grpc-go's
	// transparent retry does for a call that got no stream.
	requeue bool
	reset   bool // its stream is to be reset, with rstCode
	rstCode uint32

	// The send side, under conn.mu. The message is prefix5 then Request,
	// sent from where they are.
	prefix5 [5]byte
	sent    int
	sendWin int32

	// The receive side, under conn.mu.
	recvUnacked int
	gotHeaders  bool // the response's (non-informational) headers came
	encoding    string
	block       blockState // the header block last read
	prefix      [5]byte
	prefixN     int
	inMsg       bool
	compressed  bool // some message is compressed
	msgEnd      int  // the length of Response once the message being read is in
	msgs        int
}

// Statuses of the calls that Budget, Limit or MaxMessages end. Their
// messages begin with "grpc: ", as those of other statuses made here.
var (
	ErrOverBudget      = status.Error(codes.ResourceExhausted, "grpc: the response is larger than what is left of the call's budget")
	ErrTooManyMessages = status.Error(codes.ResourceExhausted, "grpc: the backend sent more messages than the call allows")
)

// The states of a call on its connection.
const (
	stateIdle    = iota
	statePending // waiting for a stream
	stateTaken   // the writer is opening its stream
	stateOpen    // it has a stream
	stateDone
)

// blockState is what one response header block said.
type blockState struct {
	initial       bool // the first block of the response, or trailers-only
	trailers      bool // metadata goes to Trailer
	informational bool // a 1xx response
	tooLarge      bool
	grpcContent   bool
	contentType   string
	httpStatus    string
	hasCode       bool
	code          codes.Code
	message       string
	details       []string
	statusErr     error // a malformed grpc-status
	fieldErr      error // a malformed metadata value
	encoding      string
	// RFC 9113 section 8.2's rules (see checkField).
	sawRegular bool
	pseudos    int    // the pseudo-headers seen, as bits
	invalid    string // the first malformed field's reason
	pseudoErr  string // the first unknown or repeated pseudo-header's
}

func (call *Call) resetWith(code uint32) {
	call.reset, call.rstCode = true, code
}

func (call *Call) init() {
	if call.Budget != nil && call.Reserved > 0 {
		call.Budget.Add(call.Reserved) // an attempt the backend refused
	}
	call.Reserved = 0
	call.Response = call.Response[:0]
	call.Header, call.Trailer, call.Err, call.Remote = nil, nil, nil, false
	call.conn, call.deadline = nil, time.Time{}
	call.state, call.id, call.refused, call.requeue, call.reset, call.rstCode = stateIdle, 0, false, false, false, 0
	call.sent, call.recvUnacked = 0, 0
	call.gotHeaders, call.encoding, call.block = false, "", blockState{}
	call.prefixN, call.inMsg, call.compressed, call.msgEnd, call.msgs = 0, false, false, 0, 0
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

// finish settles an ended call for its caller, in the caller's goroutine:
// a compressed response is decompressed.
func (call *Call) finish() error {
	if call.Err == nil && call.compressed {
		if call.Stream {
			call.Err = call.decompressStream(call.client.opts.MaxRecvMsgSize)
		} else {
			call.Err = call.decompress(call.client.opts.MaxRecvMsgSize)
		}
	}
	return call.Err
}

// Messages yields the response messages of a Stream call that succeeded.
func (call *Call) Messages(yield func([]byte) bool) {
	for b := call.Response; len(b) >= 5; {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		if !yield(b[5 : 5+n]) {
			return
		}
		b = b[5+n:]
	}
}

// Invoke makes call and waits until it ends, ctx is done or its deadline
// passes; it returns call.Err. A call the backend refused unprocessed
// (REFUSED_STREAM, or above a GOAWAY's last stream) or never received (its
// connection was lost before it had a stream) is tried once more; one
// left out by a draining connection that served others (see
// Call.requeue) is tried again each time.
func (c *Client) Invoke(ctx context.Context, call *Call) error {
	if call.done == nil {
		call.done = make(chan struct{}, 1)
	}
	for attempt := 0; ; attempt++ {
		call.group = nil
		cn, err := c.start(ctx, call, true)
		if err != nil {
			call.Err = err
			return err
		}
		select {
		case <-call.done:
		case <-ctx.Done():
			if !cn.cancel(call, contextStatus(ctx)) {
				<-call.done
			}
		}
		if !call.retry(attempt) {
			return call.finish()
		}
	}
}

// Answered reports whether the backend sent the response headers of
// call (a trailers-only response included), once the call has ended.
func (call *Call) Answered() bool { return call.gotHeaders }

// Unsent reports whether call, once ended, never reached the backend: it
// could not start (no connection, see Client.SetNoWait), or the backend
// refused it unprocessed. Such a call may be made again elsewhere.
func (call *Call) Unsent() bool { return call.state == stateIdle || call.refused }

// retry reports whether call, ended after attempt attempts (from 0), is to
// be tried again.
func (call *Call) retry(attempt int) bool {
	return call.refused && (attempt == 0 || call.requeue)
}

// A Group waits for calls started together, such as a batch's: their
// frames go out in as few writes as possible and the waiter wakes once.
// Its zero value is ready; it may be used again after Wait returns.
type Group struct {
	calls   []*Call
	retry   []*Call
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
	g.start(ctx, c, call)
}

func (g *Group) start(ctx context.Context, c *Client, call *Call) {
	call.group = g
	g.pending.Add(1)
	cn, err := c.start(ctx, call, false)
	if err != nil {
		call.group = nil
		call.Err = err
		g.pending.Add(-1)
		return
	}
	if !slices.Contains(g.conns, cn) {
		g.conns = append(g.conns, cn)
	}
}

// Wait writes the frames of g's calls and waits until all have ended; when
// ctx is done first it ends the others with its status. The calls the
// backend refused are tried once more, together (those left out by a
// draining connection that served others, see Call.requeue, again each
// time).
func (g *Group) Wait(ctx context.Context) {
	if !g.open {
		return
	}
	for attempt := 0; ; attempt++ {
		g.wait(ctx)
		g.retry = g.retry[:0]
		for _, call := range g.calls {
			if call.group == g && call.retry(attempt) {
				g.retry = append(g.retry, call)
			}
		}
		if len(g.retry) == 0 {
			break
		}
		g.conns = g.conns[:0]
		g.pending.Store(1)
		for _, call := range g.retry {
			g.start(ctx, call.client, call)
		}
	}
	for _, call := range g.calls {
		if call.group == g {
			call.finish()
		}
	}
	clear(g.calls)
	clear(g.retry)
	clear(g.conns)
	g.calls, g.retry, g.conns, g.open = g.calls[:0], g.retry[:0], g.conns[:0], false
}

func (g *Group) wait(ctx context.Context) {
	for _, cn := range g.conns {
		cn.kick()
	}
	if g.pending.Add(-1) == 0 {
		return
	}
	select {
	case <-g.done:
	case <-ctx.Done():
		err := contextStatus(ctx)
		var ended int32
		for _, call := range g.calls {
			if call.group == g && call.conn != nil && call.conn.cancel(call, err) {
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

// errRetry makes start try another connection.
var errRetry = errors.New("unary: the connection is draining")

// start queues call on a connection, waking its writer with wake. When it
// returns a connection the call will end by its waiter's signal;
// otherwise it never started.
func (c *Client) start(ctx context.Context, call *Call, wake bool) (*conn, error) {
	call.init()
	call.client = c
	if ctx.Err() != nil {
		return nil, contextStatus(ctx)
	}
	if d, ok := ctx.Deadline(); ok {
		call.deadline = d
	}
	call.prefix5 = [5]byte{}
	binary.BigEndian.PutUint32(call.prefix5[1:], uint32(len(call.Request)))
	for {
		cn, err := c.ready(ctx)
		if err != nil {
			return nil, err
		}
		if err := cn.enqueue(call, wake); err != errRetry {
			return cn, err
		}
	}
}

// size is the length of the message on the wire: its prefix and Request.
func (call *Call) size() int { return 5 + len(call.Request) }

// appendMessage appends n bytes of the message on the wire from off.
func (call *Call) appendMessage(b []byte, off, n int) []byte {
	if off < 5 {
		k := min(5-off, n)
		b = append(b, call.prefix5[off:off+k]...)
		off, n = off+k, n-k
		if n == 0 { // a frame that ends within the prefix (a window under 5 bytes)
			return b
		}
	}
	return append(b, call.Request[off-5:off-5+n]...)
}

// appendData appends DATA frames of call's message within the windows,
// until b holds writeChunk bytes.
func (cn *conn) appendData(b []byte, call *Call) []byte {
	for call.sent < call.size() && len(b) < writeChunk {
		n := min(call.size()-call.sent, cn.maxFrame, int(call.sendWin), int(min(cn.sendWindow, maxWindow)))
		if n <= 0 {
			return b
		}
		var flags byte
		if call.sent+n == call.size() {
			flags = flagEndStream
		}
		b = call.appendMessage(appendFrameHeader(b, n, frameData, flags, call.id), call.sent, n)
		call.sent += n
		call.sendWin -= int32(n)
		cn.sendWindow -= int64(n)
	}
	return b
}

// headerListSize is the size of call's header list as RFC 9113 counts it
// for SETTINGS_MAX_HEADER_LIST_SIZE (grpc-timeout taken at its longest).
func (call *Call) headerListSize(cn *conn) int64 {
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

// emit takes one decoded header field of the block being read.
func (cn *conn) emit(f hpack.HeaderField) {
	call := cn.decCall
	if call == nil {
		return
	}
	bs := &call.block
	if !bs.checkField(f) {
		cn.dec.SetEmitEnabled(false) // malformed: the rest is decoded for the HPACK state alone
		return
	}
	if cn.decSize += int(f.Size()); cn.decSize > maxHeaderList {
		bs.tooLarge = true
		cn.dec.SetEmitEnabled(false) // the block is still decoded, for the HPACK state
		return
	}
	switch f.Name {
	case ":status":
		bs.httpStatus = f.Value
		if len(f.Value) == 3 && f.Value[0] == '1' && bs.initial {
			bs.informational = true
		}
	case "content-type":
		bs.contentType = f.Value
		bs.grpcContent = f.Value == "application/grpc" || strings.HasPrefix(f.Value, "application/grpc+") ||
			strings.HasPrefix(f.Value, "application/grpc;")
	case "grpc-status":
		code, err := strconv.ParseInt(f.Value, 10, 32)
		if err != nil {
			if bs.statusErr == nil {
				bs.statusErr = status.Errorf(codes.Unknown, "transport: malformed grpc-status: %v", err)
			}
			return
		}
		bs.hasCode, bs.code = true, codes.Code(uint32(code))
	case "grpc-message":
		bs.message = decodeMessage(f.Value)
	case "grpc-status-details-bin":
		b, err := decodeBinary(f.Value)
		if err != nil {
			bs.malformed(f.Name, err)
			return
		}
		bs.details = append(bs.details, string(b))
	case "grpc-encoding":
		bs.encoding = f.Value
	case "grpc-accept-encoding", "grpc-message-type", "grpc-timeout", "te", "user-agent":
	default:
		if f.IsPseudo() || bs.informational {
			return
		}
		v := f.Value
		if strings.HasSuffix(f.Name, "-bin") {
			b, err := decodeBinary(v)
			if err != nil {
				bs.malformed(f.Name, err)
				return
			}
			v = string(b)
		}
		if !call.Capture {
			return
		}
		md := &call.Header
		if bs.trailers {
			md = &call.Trailer
		}
		if *md == nil {
			*md = metadata.MD{}
		}
		(*md)[f.Name] = append((*md)[f.Name], v)
	}
}

func (bs *blockState) malformed(name string, err error) {
	if bs.fieldErr == nil {
		bs.fieldErr = status.Errorf(codes.Internal, "transport: malformed %s: %v", name, err)
	}
}

// headersDone checks a header block once decoded, as grpc-go's
// operateHeaders does, and returns the status that ends the call if it
// must.
func (call *Call) headersDone(end bool) error {
	bs := &call.block
	if why := bs.malformedBlock(); why != "" {
		// A malformed response (RFC 9113 section 8.1.1): grpc-go's
		// reader fails the call with the Framer's reason.
		return status.Error(codes.Internal, why)
	}
	switch {
	case bs.tooLarge:
		return status.Error(codes.Internal, "peer header list size exceeded limit")
	case !bs.initial && !end:
		return status.Error(codes.Internal, "a HEADERS frame cannot appear in the middle of a stream")
	case bs.statusErr != nil:
		return bs.statusErr
	}
	if bs.initial && !bs.grpcContent {
		// Not gRPC: the HTTP status says what happened.
		contentErr := "malformed header: missing HTTP content-type"
		if bs.contentType != "" {
			contentErr = fmt.Sprintf("transport: received unexpected content-type %q", bs.contentType)
		}
		if bs.httpStatus == "" {
			return status.Error(codes.Internal, "malformed header: missing HTTP status; "+contentErr)
		}
		code, err := strconv.Atoi(bs.httpStatus)
		if err != nil {
			return status.Errorf(codes.Internal, "transport: malformed http-status: %v", err)
		}
		if code >= 100 && code < 200 {
			if end {
				return status.Errorf(codes.Internal, "protocol error: informational header with status code %d must not have END_STREAM set", code)
			}
			return nil
		}
		return httpStatusError(code, contentErr)
	}
	bs.informational = false
	if bs.fieldErr != nil {
		return bs.fieldErr
	}
	if bs.initial {
		call.gotHeaders = true
		call.encoding = bs.encoding
	}
	return nil
}

// addData takes a DATA frame's payload: the 5-byte prefixes and the
// messages, one for a unary call.
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
			if err := call.startMessage(max); err != nil {
				return err
			}
			continue
		}
		n := min(call.msgEnd-len(call.Response), len(q))
		call.Response = append(call.Response, q[:n]...)
		q = q[n:]
		if len(call.Response) == call.msgEnd {
			call.inMsg = false
		}
	}
	return nil
}

// startMessage takes the message whose prefix has just been read, once
// its length fits the limits and the budget.
func (call *Call) startMessage(max int) error {
	switch {
	case call.msgs > 0 && !call.Stream:
		return status.Error(codes.Internal, "grpc: the backend sent more than one response message to a unary call")
	case call.Stream && call.MaxMessages > 0 && call.msgs >= call.MaxMessages:
		return ErrTooManyMessages
	}
	if err := call.checkPayload(call.prefix[0]); err != nil {
		return err
	}
	n := int(binary.BigEndian.Uint32(call.prefix[1:]))
	if n > max {
		return status.Errorf(codes.ResourceExhausted, "grpc: received message larger than max (%d vs. %d)", n, max)
	}
	if call.Limit > 0 && call.Reserved+int64(n) > call.Limit {
		return ErrOverBudget
	}
	if b := call.Budget; b != nil && n > 0 {
		if b.Add(-int64(n)) < 0 {
			b.Add(int64(n))
			return ErrOverBudget
		}
	}
	call.Reserved += int64(n)
	call.compressed = call.compressed || call.prefix[0] == 1
	call.msgs++
	if call.Stream {
		call.Response = append(slices.Grow(call.Response, 5+n), call.prefix[:]...)
	} else {
		call.Response = slices.Grow(call.Response[:0], n)
	}
	call.msgEnd = len(call.Response) + n
	call.inMsg = n > 0
	return nil
}

// checkPayload checks a message's compressed flag against the response's
// grpc-encoding, as grpc-go's checkRecvPayload does.
func (call *Call) checkPayload(flag byte) error {
	switch flag {
	case 0:
		return nil
	case 1:
		switch call.encoding {
		case "", "identity":
			return status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
		case "gzip":
			return nil
		}
		return status.Errorf(codes.Internal, "grpc: Decompressor is not installed for grpc-encoding %q", call.encoding)
	}
	return status.Errorf(codes.Internal, "grpc: received unexpected payload format %d", flag)
}

var gzipReaders sync.Pool // *gzip.Reader

// decompress replaces the gzip response with what it decompresses to, at
// most max bytes.
func (call *Call) decompress(max int) error {
	b, err := inflate(call.Response, max)
	if err == nil {
		call.Response = b
	}
	return err
}

// decompressStream replaces the compressed messages of a Stream call with
// what they decompress to, at most max bytes each.
func (call *Call) decompressStream(max int) error {
	var out []byte
	for b := call.Response; len(b) >= 5; {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		m := b[5 : 5+n]
		if b[0] == 1 {
			var err error
			if m, err = inflate(m, max); err != nil {
				return err
			}
		}
		out = binary.BigEndian.AppendUint32(append(out, 0), uint32(len(m)))
		out = append(out, m...)
		b = b[5+n:]
	}
	call.Response = out
	return nil
}

// inflate returns what the gzip message b decompresses to, at most max
// bytes.
func inflate(b []byte, max int) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(b))
	} else {
		err = zr.Reset(bytes.NewReader(b))
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the received message: %v", err)
	}
	defer gzipReaders.Put(zr)
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(zr, int64(max)+1))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the received message: %v", err)
	}
	if n > int64(max) {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message after decompression larger than max %d", max)
	}
	return out.Bytes(), nil
}

// result is the status of a call whose stream has ended with trailers.
func (call *Call) result() error {
	bs := &call.block
	code := codes.Unknown // grpc-go's, for trailers without grpc-status
	if bs.hasCode {
		code = bs.code
	}
	if code == codes.OK {
		if call.msgs == 0 && !call.Stream || call.inMsg || call.prefixN != 0 {
			return status.Error(codes.Internal, "grpc: the backend ended a unary call without a whole response message")
		}
		if !call.deadline.IsZero() && time.Now().After(call.deadline) {
			// Too late: the caller has been told, or is about to be.
			return status.Error(codes.DeadlineExceeded, "context deadline exceeded")
		}
		return nil
	}
	call.Remote = true
	st := status.New(code, bs.message)
	if len(bs.details) == 1 {
		p := new(spb.Status)
		if proto.Unmarshal([]byte(bs.details[0]), p) == nil {
			if p.Code == int32(code) {
				st = status.FromProto(p)
			} else {
				st = status.Newf(codes.Internal, "grpc-status-details-bin mismatch: grpc-status=%v, grpc-message=%q, grpc-status-details-bin=%+v", code, bs.message, p)
			}
		}
	}
	return st.Err()
}

// httpStatusError is the status of a response that is not gRPC's, by its
// HTTP status, as grpc-go maps it.
func httpStatusError(code int, more string) error {
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
	msg := fmt.Sprintf("unexpected HTTP status code received from server: %d (%s)", code, http.StatusText(code))
	if more != "" {
		msg += "; " + more
	}
	return status.Error(c, msg)
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
