package unary

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// conn is one HTTP/2 connection to the backend. Callers queue their calls
// under mu and wake the writer goroutine, which alone encodes and writes
// frames; the reader goroutine alone reads, and completes the calls.
// Neither caller nor reader ever waits for a write, so a call returns by
// its deadline whatever the backend does.
type conn struct {
	client *Client
	nc     net.Conn
	scheme string // "http" or "https", for :scheme
	// draining is set once the connection takes no new calls: after
	// GOAWAY, a failure, or when its stream ids run out.
	draining atomic.Bool
	settings chan struct{} // closed on the backend's first SETTINGS
	done     chan struct{} // closed when the reader has stopped
	wake     chan struct{} // wakes the writer
	opened   time.Time     // when the connection was established
	// answered is set once the backend has sent a response header block,
	// or a GOAWAY(NO_ERROR) whose last stream is one the client opened:
	// the connection worked, the backend took calls on it, whatever ends
	// it later. (nginx, with keepalive_requests at most its stream limit,
	// sends that GOAWAY before it answers any call.)
	answered atomic.Bool
	// readSome is set at every frame read when keepalive is on.
	readSome atomic.Bool
	kaTime   time.Duration // the keepalive interval, set when the connection opens

	mu          sync.Mutex
	pending     []*Call       // calls waiting for a stream, in order
	sending     []*Call       // open streams whose DATA waits for window
	ctrl        []byte        // frames to write before any call's: acks, WINDOW_UPDATE, RST_STREAM
	replies     int           // frames in ctrl the backend asked for (PING and SETTINGS acks)
	drained     chan struct{} // closed when replies fall below the limit; nil when nobody waits
	nextID      uint32
	streams     map[uint32]*Call
	maxStreams  uint32 // the backend's SETTINGS_MAX_CONCURRENT_STREAMS
	maxHeaders  uint32 // the backend's SETTINGS_MAX_HEADER_LIST_SIZE; 0 means none
	peerWindow  int32  // the backend's SETTINGS_INITIAL_WINDOW_SIZE
	sendWindow  int64  // the connection's send window
	maxFrame    int    // the backend's SETTINGS_MAX_FRAME_SIZE
	recvUnacked int    // bytes received on the connection not yet granted back
	closed      bool   // the reader has stopped
	broken      bool   // the connection is being torn down: the reader stops waiting for the writer
	gotSettings bool
	err         error  // why the connection closed
	lost        error  // the status calls still open fail with, when set before the reader stops
	last        []byte // GOAWAY to write before closing, after a connection error

	// The writer goroutine's own.
	enc   *hpack.Encoder
	block blockWriter // the header block being encoded
	wbuf  []byte

	// The reader goroutine's own.
	br          *bufio.Reader
	dec         *hpack.Decoder
	decCall     *Call // the call whose header block is being decoded
	decSize     int   // the decoded size of the header list so far
	hblock      []byte
	hblockID    uint32 // the stream of a header block awaiting CONTINUATION
	hblockFlags byte
}

// coalesceStreams is how many calls must be in flight on a connection
// before the writer yields once, when woken, to let other callers queue
// their frames: with few, the yield costs more than the writes it saves.
const coalesceStreams = 16

// maxReplies is how many frames the backend may make the client queue
// (PING and SETTINGS acks) before the reader stops reading until the
// writer has written them, as grpc-go's control buffer does: a backend
// that sends them without reading cannot grow the client's memory.
const maxReplies = 50

// writeChunk is about the most the writer gathers for one write: large
// messages go out in pieces, so that mu is never held for long (callers
// take it to cancel) and the write buffer stays small.
const writeChunk = 256 << 10

// maxHeaderList bounds the decoded size of a response header list (names
// and values plus 32 bytes a field, as RFC 9113 counts it): grpc-go's
// default.
const maxHeaderList = 16 << 20

// blockWriter collects what the HPACK encoder writes.
type blockWriter struct{ b []byte }

func (w *blockWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

func newConn(c *Client, nc net.Conn, scheme string) *conn {
	cn := &conn{
		client:     c,
		nc:         nc,
		scheme:     scheme,
		settings:   make(chan struct{}),
		done:       make(chan struct{}),
		wake:       make(chan struct{}, 1),
		opened:     time.Now(),
		nextID:     1,
		streams:    make(map[uint32]*Call),
		maxStreams: ^uint32(0),
		peerWindow: defaultWindow,
		sendWindow: defaultWindow,
		maxFrame:   defaultMaxFrame,
		br:         bufio.NewReaderSize(nc, 64<<10),
	}
	// The preface goes first, so that no SETTINGS ack the reader queues
	// can be written before it.
	cn.ctrl = append([]byte(clientPreface), appendSettings(nil)...)
	cn.ctrl = appendWindowUpdate(cn.ctrl, 0, connWindow-defaultWindow)
	cn.enc = hpack.NewEncoder(&cn.block)
	cn.dec = hpack.NewDecoder(4096, cn.emit)
	cn.dec.SetMaxStringLength(maxHeaderBlock)
	return cn
}

// start has the writer send the client preface, the client's SETTINGS and
// its connection window, queued by newConn, and waits for the backend's
// SETTINGS.
func (cn *conn) start(ctx context.Context) error {
	cn.kick()
	select {
	case <-cn.settings:
		return nil
	case <-cn.done:
		return cn.err
	case <-ctx.Done():
		return errors.New("the backend sent no HTTP/2 SETTINGS in time")
	}
}

// kick wakes the writer. It never blocks, and may be called under mu.
func (cn *conn) kick() {
	select {
	case cn.wake <- struct{}{}:
	default:
	}
}

// shut tears the connection down with why as the status of the calls
// still open on it: the reader fails them once the network connection is
// closed.
func (cn *conn) shut(why error) {
	cn.mu.Lock()
	cn.draining.Store(true)
	cn.broken = true
	if cn.lost == nil {
		cn.lost = why
	}
	cn.releaseReaderLocked()
	cn.mu.Unlock()
	cn.nc.Close()
}

func (cn *conn) releaseReaderLocked() {
	if cn.drained != nil {
		close(cn.drained)
		cn.drained = nil
	}
}

// writeLoop is the connection's one writer. It also closes the network
// connection, once the reader has stopped or the connection is draining
// and idle: closing a TLS connection writes, which only the writer may do.
func (cn *conn) writeLoop() {
	for {
		select {
		case <-cn.wake:
		case <-cn.done:
			cn.mu.Lock()
			last := cn.last
			cn.mu.Unlock()
			if last != nil { // a connection error: say so before closing
				cn.nc.SetWriteDeadline(time.Now().Add(time.Second))
				cn.nc.Write(last)
			}
			cn.nc.Close()
			return
		}
		cn.mu.Lock()
		busy := len(cn.streams)+len(cn.pending) >= coalesceStreams
		cn.mu.Unlock()
		if busy {
			// Many calls in flight: let the goroutines ready to run queue
			// theirs first, so that one write carries them all.
			runtime.Gosched()
		}
		for {
			cn.mu.Lock()
			cn.wbuf = cn.fillLocked(cn.wbuf[:0])
			idle := cn.draining.Load() && len(cn.streams) == 0 && len(cn.pending) == 0 && !cn.closed
			cn.mu.Unlock()
			if len(cn.wbuf) == 0 {
				if idle {
					cn.nc.Close() // GOAWAY'd and idle: nothing more will come
				}
				break
			}
			// A backend that stops reading holds the writer, never a
			// caller: each call waits for its own end or deadline.
			cn.nc.SetWriteDeadline(time.Now().Add(cn.client.opts.WriteTimeout))
			if _, err := cn.nc.Write(cn.wbuf); err != nil {
				cn.client.opts.Logger.Debug("cannot write to the backend", "address", cn.client.ep.address, "error", err)
				cn.shut(status.Error(codes.Unavailable, "transport: cannot write to the backend"))
				<-cn.done
				return
			}
			if cap(cn.wbuf) > 1<<20 {
				cn.wbuf = nil
			}
		}
	}
}

// fillLocked appends what is ready to be written: the control frames
// first, then the DATA that waited for window, then the calls waiting for
// a stream, as far as the stream limit allows. Calls that ended before
// their turn are not there any more: nothing of theirs is written.
func (cn *conn) fillLocked(b []byte) []byte {
	if cn.closed || cn.broken {
		return b
	}
	b = append(b, cn.ctrl...)
	cn.ctrl = cn.ctrl[:0]
	if cn.replies >= maxReplies {
		cn.releaseReaderLocked()
	}
	cn.replies = 0
	if cn.recvUnacked >= connWindow/4 {
		b = appendWindowUpdate(b, 0, uint32(cn.recvUnacked))
		cn.recvUnacked = 0
	}
	if len(cn.sending) > 0 && cn.sendWindow > 0 {
		waiting := cn.sending[:0]
		for _, call := range cn.sending {
			if b = cn.appendData(b, call); call.sent < call.size() {
				waiting = append(waiting, call)
			}
		}
		clear(cn.sending[len(waiting):])
		cn.sending = waiting
	}
	n := 0
	for ; n < len(cn.pending) && uint32(len(cn.streams)) < cn.maxStreams && !cn.draining.Load() && len(b) < writeChunk; n++ {
		call := cn.pending[n]
		call.state = stateTaken
		b = cn.open(b, call)
	}
	if n > 0 {
		rest := copy(cn.pending, cn.pending[n:])
		clear(cn.pending[rest:])
		cn.pending = cn.pending[:rest]
	}
	// Out of stream ids: the calls still waiting go to another connection.
	for cn.draining.Load() && len(cn.pending) > 0 {
		call := cn.pending[0]
		cn.leftOutLocked(call)
		cn.finishLocked(call, errUnsent)
	}
	return b
}

// open gives call a stream and appends its HEADERS and as much of its
// DATA as the windows allow, or ends it without a stream.
func (cn *conn) open(b []byte, call *Call) []byte {
	var timeout time.Duration
	if !call.deadline.IsZero() {
		if timeout = time.Until(call.deadline); timeout <= 0 {
			cn.finishLocked(call, status.Error(codes.DeadlineExceeded, "context deadline exceeded"))
			return b
		}
	}
	if cn.maxHeaders > 0 && call.headerListSize(cn) > int64(cn.maxHeaders) {
		// Sent, the block would make the backend reset the connection,
		// and every call on it with this one.
		cn.finishLocked(call, status.Errorf(codes.Internal, "header list size to send violates the maximum size (%d bytes) set by server", cn.maxHeaders))
		return b
	}
	call.state = stateOpen
	call.id = cn.nextID
	call.sendWin = cn.peerWindow
	cn.nextID += 2
	if cn.nextID > maxStreamID {
		cn.draining.Store(true)
		go cn.client.retire(cn)
	}
	cn.streams[call.id] = call
	b = cn.appendHeaders(b, call, timeout)
	if b = cn.appendData(b, call); call.sent < call.size() {
		cn.sending = append(cn.sending, call)
	}
	return b
}

// enqueue queues call for a stream on cn; errRetry means cn takes no new
// calls. With wake, the writer is woken.
func (cn *conn) enqueue(call *Call, wake bool) error {
	cn.mu.Lock()
	if cn.draining.Load() || cn.closed {
		cn.mu.Unlock()
		return errRetry
	}
	call.conn = cn
	call.state = statePending
	cn.pending = append(cn.pending, call)
	cn.client.inFlight.Add(1)
	cn.mu.Unlock()
	if wake {
		cn.kick()
	}
	return nil
}

// endLocked ends call with err (nil for success) without signalling its
// waiter, and reports whether it had not ended already. A stream to be
// reset (call.reset) gets its RST_STREAM queued.
func (cn *conn) endLocked(call *Call, err error) bool {
	switch call.state {
	case statePending:
		if i := indexOf(cn.pending, call); i >= 0 {
			cn.pending = slices.Delete(cn.pending, i, i+1)
		}
	case stateTaken: // the writer is opening it
	case stateOpen:
		delete(cn.streams, call.id)
		if call.sent < call.size() {
			if i := indexOf(cn.sending, call); i >= 0 {
				cn.sending = slices.Delete(cn.sending, i, i+1)
			}
		}
		if call.reset && !cn.closed {
			cn.ctrl = appendRSTStream(cn.ctrl, call.id, call.rstCode)
			cn.kick()
		}
		if len(cn.pending) > 0 || cn.draining.Load() && len(cn.streams) == 0 {
			cn.kick() // a stream slot is free, or the idle connection may close
		}
	default:
		return false
	}
	cn.client.inFlight.Add(-1)
	call.state = stateDone
	call.Err = err
	return true
}

func indexOf(calls []*Call, call *Call) int {
	for i, c := range calls {
		if c == call {
			return i
		}
	}
	return -1
}

// finishLocked ends call with err and wakes its waiter.
func (cn *conn) finishLocked(call *Call, err error) {
	if cn.endLocked(call, err) {
		call.complete()
	}
}

// cancel ends call with err and resets its stream, unless the call has
// already ended; it reports whether it ended it. Its waiter is not
// signalled: it is the one cancelling.
func (cn *conn) cancel(call *Call, err error) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if call.conn != cn {
		return false
	}
	if call.state == stateOpen {
		call.resetWith(errCodeCancel)
	}
	return cn.endLocked(call, err)
}

// readLoop reads frames until the connection fails, then fails every call
// still open on it.
func (cn *conn) readLoop() {
	err := cn.read()
	var ce connError
	if errors.As(err, &ce) {
		cn.mu.Lock()
		cn.last = appendGoAway(nil, 0, ce.code) // the backend opens no streams
		cn.mu.Unlock()
	}
	cn.mu.Lock()
	cn.closed = true
	cn.draining.Store(true)
	cn.err = err
	lost := cn.lost
	if lost == nil {
		lost = status.Error(codes.Unavailable, "transport: the connection to the backend was lost")
	}
	open := make([]*Call, 0, len(cn.streams)+len(cn.pending))
	for _, call := range cn.pending {
		// A call that never had a stream cannot have reached the
		// backend: it is tried again, on another connection.
		cn.leftOutLocked(call)
		open = append(open, call)
	}
	for _, call := range cn.streams {
		open = append(open, call)
	}
	for _, call := range open {
		err := lost
		if call.refused {
			err = errUnsent
		}
		cn.endLocked(call, err)
	}
	cn.pending, cn.sending = nil, nil
	cn.releaseReaderLocked()
	cn.mu.Unlock()
	close(cn.done) // the writer closes nc
	cn.client.opts.Logger.Debug("connection to the backend closed", "address", cn.client.ep.address, "error", err)
	cn.client.forget(cn, len(open) > 0)
	for _, call := range open {
		call.complete()
	}
}

// leftOutLocked marks call, which the backend never saw on cn (it had no
// stream, or one above a GOAWAY's last stream id), as refused: safe to
// retry. When cn had answered calls (or taken them, see conn.answered) it
// is retried however often this happens: a backend that serves some
// calls per connection and then drains it, as nginx after
// keepalive_requests, can leave a call out again and again while more are
// queued than one connection serves. A connection that never answered
// made no progress: its calls are retried once.
func (cn *conn) leftOutLocked(call *Call) {
	call.refused = true
	call.requeue = cn.answered.Load()
}

var errUnsent = status.Error(codes.Unavailable, "transport: the connection to the backend was lost before the call was sent")

// errProtocol closes a connection whose backend broke HTTP/2's rules.
var errProtocol = connError{errCodeProtocol, "HTTP/2 protocol error from the backend"}

// A connError is a connection error (RFC 9113 section 5.4.1): the client
// sends GOAWAY with its code and closes the connection.
type connError struct {
	code uint32
	msg  string
}

func (e connError) Error() string { return e.msg }

func (cn *conn) read() error {
	var hdr [frameHeaderLen]byte
	keepalive := cn.client.opts.KeepaliveTime > 0
	for first := true; ; first = false {
		if _, err := io.ReadFull(cn.br, hdr[:]); err != nil {
			return err
		}
		if keepalive {
			cn.readSome.Store(true)
		}
		h := parseFrameHeader(hdr[:])
		// The client never raises SETTINGS_MAX_FRAME_SIZE, and the server's
		// preface is a SETTINGS frame: anything else is not HTTP/2 (an
		// HTTP/1.1 response, say) and must not be waited for.
		if first && (h.typ != frameSettings || h.flags&flagAck != 0) {
			return errors.New("the backend does not speak HTTP/2")
		}
		if h.length > defaultMaxFrame {
			return connError{errCodeFrameSize, "a frame larger than SETTINGS_MAX_FRAME_SIZE from the backend"}
		}
		p, err := cn.br.Peek(h.length)
		if err != nil {
			return err
		}
		if err := cn.frame(h, p); err != nil {
			return err
		}
		cn.br.Discard(h.length)
	}
}

// frame handles one frame; an error closes the connection.
func (cn *conn) frame(h frameHeader, p []byte) error {
	if cn.hblockID != 0 && h.typ != frameContinuation {
		return errProtocol // a header block must not be interleaved
	}
	switch h.typ {
	case frameData:
		return cn.onData(h, p)
	case frameHeaders:
		q, ok := unpad(h, p)
		if !ok || h.stream == 0 {
			return errProtocol
		}
		if h.flags&flagEndHeaders == 0 {
			cn.hblock = append(cn.hblock[:0], q...)
			cn.hblockID, cn.hblockFlags = h.stream, h.flags
			return nil
		}
		return cn.onHeaders(h.stream, h.flags, q)
	case frameContinuation:
		if h.stream == 0 || h.stream != cn.hblockID {
			return errProtocol
		}
		cn.hblock = append(cn.hblock, p...)
		if len(cn.hblock) > maxHeaderBlock {
			return connError{errCodeEnhanceYourCalm, "a header block too large from the backend"}
		}
		if h.flags&flagEndHeaders == 0 {
			return nil
		}
		id := cn.hblockID
		cn.hblockID = 0
		err := cn.onHeaders(id, cn.hblockFlags, cn.hblock)
		if cap(cn.hblock) > 1<<20 {
			cn.hblock = nil
		}
		return err
	case frameRSTStream:
		if len(p) != 4 || h.stream == 0 {
			return errProtocol
		}
		cn.onReset(h.stream, binary.BigEndian.Uint32(p))
	case frameSettings:
		if h.stream != 0 || len(p)%6 != 0 || h.flags&flagAck != 0 && len(p) != 0 {
			return errProtocol
		}
		if h.flags&flagAck == 0 {
			return cn.onSettings(p)
		}
	case framePing:
		if h.stream != 0 || len(p) != 8 {
			return errProtocol
		}
		if h.flags&flagAck == 0 {
			cn.reply(append(appendFrameHeader(nil, 8, framePing, flagAck, 0), p...))
		}
	case frameGoAway:
		if h.stream != 0 || len(p) < 8 {
			return errProtocol
		}
		return cn.onGoAway(binary.BigEndian.Uint32(p)&maxStreamID, binary.BigEndian.Uint32(p[4:]), p[8:])
	case frameWindowUpdate:
		if len(p) != 4 {
			return errProtocol
		}
		return cn.onWindowUpdate(h.stream, binary.BigEndian.Uint32(p)&maxWindow)
	case framePushPromise:
		return errProtocol // the client's SETTINGS disable push
	}
	return nil // PRIORITY and unknown frame types are ignored
}

// reply queues a frame the backend asked for and wakes the writer; with
// maxReplies of them waiting, it waits for the writer before reading on.
func (cn *conn) reply(frame []byte) {
	cn.mu.Lock()
	cn.ctrl = append(cn.ctrl, frame...)
	cn.replies++
	for cn.replies >= maxReplies && !cn.broken {
		if cn.drained == nil {
			cn.drained = make(chan struct{})
		}
		ch := cn.drained
		cn.mu.Unlock()
		cn.kick()
		<-ch
		cn.mu.Lock()
	}
	cn.mu.Unlock()
	cn.kick()
}

func (cn *conn) onData(h frameHeader, p []byte) error {
	q, ok := unpad(h, p)
	if !ok || h.stream == 0 {
		return errProtocol
	}
	kick := false
	cn.mu.Lock()
	defer cn.mu.Unlock()
	// Padding counts against the windows too.
	if cn.recvUnacked += h.length; cn.recvUnacked >= connWindow/4 {
		kick = true
	}
	if call := cn.streams[h.stream]; call != nil {
		call.recvUnacked += h.length
		switch err := call.addData(q, cn.client.opts.MaxRecvMsgSize); {
		case err != nil:
			call.resetWith(errCodeCancel)
			cn.finishLocked(call, err)
		case h.flags&flagEndStream != 0:
			cn.finishLocked(call, status.Error(codes.Internal, "server closed the stream without sending trailers"))
		case call.recvUnacked >= streamWindow/4:
			cn.ctrl = appendWindowUpdate(cn.ctrl, call.id, uint32(call.recvUnacked))
			call.recvUnacked, kick = 0, true
		}
	}
	if kick {
		cn.kick()
	}
	return nil
}

func (cn *conn) onHeaders(id uint32, flags byte, block []byte) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	call := cn.streams[id]
	end := flags&flagEndStream != 0
	if call != nil {
		call.block = blockState{trailers: call.gotHeaders || end, initial: !call.gotHeaders}
	}
	cn.decCall, cn.decSize = call, 0
	cn.dec.SetEmitEnabled(call != nil) // a block of a call that ended is decoded for the HPACK state alone
	_, err := cn.dec.Write(block)
	if err == nil {
		err = cn.dec.Close()
	}
	cn.decCall = nil
	if err != nil {
		// The HPACK state is lost: the connection cannot go on.
		return connError{errCodeCompression, "malformed HPACK from the backend"}
	}
	if call == nil {
		return nil
	}
	if !cn.answered.Load() {
		cn.answered.Store(true)
	}
	err = call.headersDone(end)
	if hook := cn.client.opts.OnAnswer; hook != nil && !call.block.informational {
		hook()
	}
	switch {
	case err != nil && !end:
		call.resetWith(errCodeProtocol)
	case err == nil && call.block.informational:
		return nil // 1xx: the response's headers are still to come
	case err == nil && !end:
		return nil
	case call.sent < call.size():
		// The backend ended the stream before the request was all sent:
		// end the client's side too, as grpc-go does, or the backend
		// counts the stream as open.
		call.resetWith(errCodeNo)
	}
	if err == nil {
		err = call.result()
	}
	cn.finishLocked(call, err)
	return nil
}

func (cn *conn) onReset(id uint32, code uint32) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	call := cn.streams[id]
	if call == nil {
		return
	}
	// grpc-go's http2ErrConvTab, and its message (handleRSTStream).
	c, msg := codes.Internal, "stream terminated by RST_STREAM with error code: "
	switch code {
	case errCodeFlowControl:
		c = codes.ResourceExhausted
	case errCodeRefusedStream:
		call.refused = true
		c = codes.Unavailable
	case errCodeCancel:
		c = codes.Canceled
		if !call.deadline.IsZero() && !call.deadline.After(time.Now()) {
			// A backend resets a call whose grpc-timeout has passed, as
			// grpc-go's does: its deadline, not a cancellation, ended it.
			c = codes.DeadlineExceeded
		}
	case errCodeEnhanceYourCalm:
		c = codes.ResourceExhausted
	case errCodeInadequateSec:
		c = codes.PermissionDenied
	default:
		if code > errCodeHTTP11Required {
			c = codes.Unknown // a code grpc-go has no entry for
		}
	}
	cn.finishLocked(call, status.Error(c, msg+rstCodeName(code)))
}

func rstCodeName(code uint32) string {
	names := [...]string{"NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR",
		"SETTINGS_TIMEOUT", "STREAM_CLOSED", "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL",
		"COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM", "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED"}
	if int(code) < len(names) {
		return names[code]
	}
	return fmt.Sprintf("unknown error code 0x%x", code) // as x/net/http2's ErrCode.String
}

var errFlowControl = connError{errCodeFlowControl, "the backend overflowed a flow-control window"}

func (cn *conn) onSettings(p []byte) error {
	cn.mu.Lock()
	for ; len(p) >= 6; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:])
		switch binary.BigEndian.Uint16(p) {
		case settingHeaderTableSize:
			cn.enc.SetMaxDynamicTableSizeLimit(v)
		case settingEnablePush:
			if v > 1 {
				cn.mu.Unlock()
				return errProtocol
			}
		case settingMaxConcurrentStreams:
			cn.maxStreams = v
		case settingInitialWindowSize:
			if v > maxWindow {
				cn.mu.Unlock()
				return errFlowControl
			}
			delta := int64(v) - int64(cn.peerWindow)
			for _, call := range cn.streams {
				if int64(call.sendWin)+delta > maxWindow {
					cn.mu.Unlock()
					return errFlowControl
				}
			}
			cn.peerWindow = int32(v)
			for _, call := range cn.streams {
				call.sendWin += int32(delta)
			}
		case settingMaxFrameSize:
			if v < defaultMaxFrame || v > maxFrameLimit {
				cn.mu.Unlock()
				return errProtocol
			}
			cn.maxFrame = int(v)
		case settingMaxHeaderListSize:
			cn.maxHeaders = v
		}
	}
	if !cn.gotSettings {
		cn.gotSettings = true
		close(cn.settings)
	}
	cn.mu.Unlock()
	cn.reply(appendFrameHeader(nil, 0, frameSettings, flagAck, 0))
	return nil
}

// onGoAway stops new calls on the connection; calls the backend will not
// process (ids above last, and those still waiting for a stream) end as
// refused, to be retried elsewhere. A GOAWAY with an error code is the
// backend's last word: the calls it left open end too, and the
// connection is closed. GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings")
// makes new connections ping half as often.
func (cn *conn) onGoAway(last, code uint32, debug []byte) error {
	cn.mu.Lock()
	if code == errCodeNo && last > 0 && last < cn.nextID {
		cn.answered.Store(true) // the backend took calls: not a storm
	}
	cn.mu.Unlock()
	cn.draining.Store(true)
	if code == errCodeEnhanceYourCalm && string(debug) == "too_many_pings" && cn.kaTime > 0 {
		cn.client.calmDown(cn)
	}
	cn.client.retire(cn)
	cn.mu.Lock()
	refused := status.Error(codes.Unavailable, "transport: received GOAWAY from the backend")
	for id, call := range cn.streams {
		if id > last {
			cn.leftOutLocked(call)
			cn.finishLocked(call, refused)
		}
	}
	for len(cn.pending) > 0 {
		call := cn.pending[0]
		cn.leftOutLocked(call)
		cn.finishLocked(call, refused)
	}
	cn.mu.Unlock()
	if code != errCodeNo {
		cn.shut(status.Error(codes.Unavailable, "transport: the backend closed the connection with GOAWAY "+rstCodeName(code)))
		return nil
	}
	cn.kick() // the writer closes the connection once it is idle
	return nil
}

// The messages of the statuses of calls whose stream the client reset
// for the backend's flow-control errors (RFC 9113 6.9): fixed texts,
// which bridge/backend tells its clients in its own words.
const (
	MsgZeroWindowUpdate = "transport: the backend sent a WINDOW_UPDATE of 0"
	MsgWindowOverflow   = "transport: the backend overflowed the stream's flow-control window"
)

func (cn *conn) onWindowUpdate(id uint32, inc uint32) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if id == 0 {
		if inc == 0 {
			return errProtocol
		}
		if cn.sendWindow+int64(inc) > maxWindow {
			return errFlowControl
		}
		cn.sendWindow += int64(inc)
	} else if call := cn.streams[id]; call != nil {
		switch {
		case inc == 0:
			call.resetWith(errCodeProtocol)
			cn.finishLocked(call, status.Error(codes.Internal, MsgZeroWindowUpdate))
			return nil
		case int64(call.sendWin)+int64(inc) > maxWindow:
			// RFC 9113 6.9.1: a stream error of FLOW_CONTROL_ERROR, whose
			// code grpc-go's mapping of RST_STREAM codes makes 8.
			call.resetWith(errCodeFlowControl)
			cn.finishLocked(call, status.Error(codes.ResourceExhausted, MsgWindowOverflow))
			return nil
		}
		call.sendWin += int32(inc)
	}
	if len(cn.sending) > 0 {
		cn.kick()
	}
	return nil
}

// keepalive pings the backend when nothing was read for KeepaliveTime,
// and closes the connection when nothing comes back within
// KeepaliveTimeout, as grpc-go's keepalive does: while a ping waits for
// its answer the client looks again every KeepaliveTime, so that a
// connection that answers is pinged every KeepaliveTime of silence.
func (cn *conn) keepalive() {
	o := cn.client.opts
	o.KeepaliveTime = cn.kaTime
	t := time.NewTimer(o.KeepaliveTime)
	defer t.Stop()
	outstanding, left := false, time.Duration(0)
	for {
		select {
		case <-cn.done:
			return
		case <-t.C:
		}
		if cn.readSome.Swap(false) {
			outstanding = false
			t.Reset(o.KeepaliveTime)
			continue
		}
		if outstanding && left <= 0 {
			cn.client.opts.Logger.Debug("keepalive ping unanswered: closing the connection", "address", cn.client.ep.address)
			cn.shut(status.Error(codes.Unavailable, "keepalive ping failed to receive ACK within timeout"))
			return
		}
		if !outstanding {
			cn.mu.Lock()
			active := len(cn.streams) > 0 || len(cn.pending) > 0
			if active || o.KeepalivePermitWithoutStream {
				cn.ctrl = append(appendFrameHeader(cn.ctrl, 8, framePing, 0, 0), "bridgeka"...)
			}
			cn.mu.Unlock()
			if !active && !o.KeepalivePermitWithoutStream {
				t.Reset(o.KeepaliveTime) // dormant until a call comes
				continue
			}
			cn.kick()
			outstanding, left = true, o.KeepaliveTimeout
		}
		sleep := min(o.KeepaliveTime, left)
		left -= sleep
		t.Reset(sleep)
	}
}
