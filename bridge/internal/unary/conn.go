package unary

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// conn is one HTTP/2 connection to the backend. Callers write to it under
// mu; its reader goroutine owns the read side and completes the calls.
type conn struct {
	client *Client
	nc     net.Conn
	scheme string // "http" or "https", for :scheme
	// draining is set once the connection takes no new calls: after
	// GOAWAY, a failure, or when its stream ids run out.
	draining atomic.Bool
	settings chan struct{} // closed on the backend's first SETTINGS
	done     chan struct{} // closed when the reader has stopped
	ctrl     chan struct{} // wakes controlLoop to write what the reader queued

	mu          sync.Mutex
	wbuf        []byte // frames queued for writing
	spare       []byte // the other write buffer, swapped with wbuf by flush
	writing     bool   // a flush is in progress
	taken       uint64 // bytes of the connection's frames handed to nc.Write so far
	enc         *hpack.Encoder
	block       blockWriter // the header block being encoded
	nextID      uint32
	streams     map[uint32]*Call
	maxStreams  uint32        // the backend's SETTINGS_MAX_CONCURRENT_STREAMS
	peerWindow  int32         // the backend's SETTINGS_INITIAL_WINDOW_SIZE
	sendWindow  int64         // the connection's send window
	maxFrame    int           // the backend's SETTINGS_MAX_FRAME_SIZE
	changed     chan struct{} // closed when a stream slot or window frees; nil when nobody waits
	closed      bool
	gotSettings bool
	err         error // why the connection closed

	// The reader goroutine's own.
	br          *bufio.Reader
	dec         *hpack.Decoder
	decCall     *Call // the call whose header block is being decoded
	hblock      []byte
	hblockID    uint32 // the stream of a header block awaiting CONTINUATION
	hblockFlags byte
	recvUnacked int // received bytes not yet granted back by WINDOW_UPDATE
}

// coalesceStreams is how many calls must be in flight on a connection
// before a writer yields once to let others queue their frames: with few,
// the yield costs more than the system calls it saves.
const coalesceStreams = 16

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
		ctrl:       make(chan struct{}, 1),
		nextID:     1,
		streams:    make(map[uint32]*Call),
		maxStreams: ^uint32(0),
		peerWindow: defaultWindow,
		sendWindow: defaultWindow,
		maxFrame:   defaultMaxFrame,
		br:         bufio.NewReaderSize(nc, 64<<10),
	}
	// The preface goes first in the write buffer, so that no SETTINGS ack
	// the reader queues can be written before it.
	cn.wbuf = append([]byte(clientPreface), appendSettings(nil)...)
	cn.wbuf = appendWindowUpdate(cn.wbuf, 0, connWindow-defaultWindow)
	cn.enc = hpack.NewEncoder(&cn.block)
	cn.dec = hpack.NewDecoder(4096, cn.emit)
	cn.dec.SetMaxStringLength(maxHeaderBlock)
	return cn
}

// start sends the client preface, the client's SETTINGS and its connection
// window, queued by newConn, and waits for the backend's SETTINGS.
func (cn *conn) start(ctx context.Context) error {
	cn.flush()
	select {
	case <-cn.settings:
		return nil
	case <-cn.done:
		return cn.err
	case <-ctx.Done():
		return errors.New("the backend sent no HTTP/2 SETTINGS in time")
	}
}

// flush writes the queued frames, unless another goroutine is already
// writing: that one writes them too before it stops.
func (cn *conn) flush() {
	cn.mu.Lock()
	if cn.writing || len(cn.wbuf) == 0 {
		cn.mu.Unlock()
		return
	}
	cn.writing = true
	if len(cn.streams) >= coalesceStreams {
		// Many calls in flight: let the goroutines ready to run queue
		// their frames first, so that one write carries them all.
		cn.mu.Unlock()
		runtime.Gosched()
		cn.mu.Lock()
	}
	for len(cn.wbuf) > 0 && !cn.closed {
		buf := cn.wbuf
		cn.wbuf = cn.spare[:0]
		cn.taken += uint64(len(buf))
		cn.mu.Unlock()
		// A backend that stops reading must not hold the writer, and the
		// frames queued behind it, forever.
		cn.nc.SetWriteDeadline(time.Now().Add(cn.client.opts.WriteTimeout))
		_, err := cn.nc.Write(buf)
		cn.mu.Lock()
		if cap(buf) <= 1<<20 {
			cn.spare = buf[:0]
		} else {
			cn.spare = nil
		}
		if err != nil {
			cn.draining.Store(true)
			cn.writing = false
			cn.mu.Unlock()
			cn.client.opts.Logger.Debug("cannot write to the backend", "address", cn.client.ep.address, "error", err)
			cn.nc.Close() // the reader fails the calls
			return
		}
	}
	cn.writing = false
	cn.mu.Unlock()
}

// kick has controlLoop write what the reader queued: the reader itself
// never blocks on a write.
func (cn *conn) kick() {
	select {
	case cn.ctrl <- struct{}{}:
	default:
	}
}

// controlLoop also closes the network connection, once the reader has
// stopped or the connection is draining and idle: closing a TLS connection
// writes, which neither the reader nor a holder of mu may do.
func (cn *conn) controlLoop() {
	for {
		select {
		case <-cn.ctrl:
			cn.flush()
			cn.mu.Lock()
			idle := cn.draining.Load() && len(cn.streams) == 0 && !cn.closed
			cn.mu.Unlock()
			if idle {
				cn.nc.Close() // GOAWAY'd and idle: nothing more will come
			}
		case <-cn.done:
			cn.nc.Close()
			return
		}
	}
}

// waitLocked returns a channel closed at the next change of stream slots,
// windows or state.
func (cn *conn) waitLocked() chan struct{} {
	if cn.changed == nil {
		cn.changed = make(chan struct{})
	}
	return cn.changed
}

func (cn *conn) signalLocked() {
	if cn.changed != nil {
		close(cn.changed)
		cn.changed = nil
	}
}

// finishLocked ends call with err (nil for success) and wakes its waiter.
func (cn *conn) finishLocked(call *Call, err error) {
	delete(cn.streams, call.id)
	call.Err = err
	cn.signalLocked()
	if cn.draining.Load() && len(cn.streams) == 0 {
		cn.kick() // controlLoop closes the idle connection
	}
	call.complete()
}

// cancel ends call with err and resets its stream, unless the call has
// already ended; it reports whether it ended it.
func (cn *conn) cancel(call *Call, err error) bool {
	cn.mu.Lock()
	if cn.streams[call.id] != call {
		cn.mu.Unlock()
		return false
	}
	delete(cn.streams, call.id)
	call.Err = err
	if !cn.closed {
		cn.wbuf = appendRSTStream(cn.wbuf, call.id, errCodeCancel)
	}
	cn.signalLocked()
	cn.mu.Unlock()
	cn.kick() // controlLoop writes the RST_STREAM, and closes the connection if it is draining and idle
	return true
}

// readLoop reads frames until the connection fails, then fails every call
// still open on it.
func (cn *conn) readLoop() {
	err := cn.read()
	cn.mu.Lock()
	cn.closed = true
	cn.draining.Store(true)
	cn.err = err
	open := cn.streams
	cn.streams = map[uint32]*Call{}
	for _, call := range open {
		// A call whose HEADERS were never handed to a write cannot have
		// reached the backend: it is tried again, on another connection.
		call.refused = call.at >= cn.taken
	}
	cn.signalLocked()
	cn.mu.Unlock()
	close(cn.done) // controlLoop closes nc
	cn.client.opts.Logger.Debug("connection to the backend closed", "address", cn.client.ep.address, "error", err)
	cn.client.forget(cn)
	lost := status.Error(codes.Unavailable, "transport: the connection to the backend was lost")
	for _, call := range open {
		call.Err = lost
		call.complete()
	}
}

// errProtocol closes a connection whose backend broke HTTP/2's rules.
var errProtocol = errors.New("HTTP/2 protocol error from the backend")

func (cn *conn) read() error {
	var hdr [frameHeaderLen]byte
	for first := true; ; first = false {
		if _, err := io.ReadFull(cn.br, hdr[:]); err != nil {
			return err
		}
		h := parseFrameHeader(hdr[:])
		// The client never raises SETTINGS_MAX_FRAME_SIZE, and the server's
		// preface is a SETTINGS frame: anything else is not HTTP/2 (an
		// HTTP/1.1 response, say) and must not be waited for.
		if h.length > defaultMaxFrame || first && (h.typ != frameSettings || h.flags&flagAck != 0) {
			return errProtocol
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
			return errProtocol
		}
		if h.flags&flagEndHeaders == 0 {
			return nil
		}
		id := cn.hblockID
		cn.hblockID = 0
		return cn.onHeaders(id, cn.hblockFlags, cn.hblock)
	case frameRSTStream:
		if len(p) != 4 || h.stream == 0 {
			return errProtocol
		}
		cn.onReset(h.stream, binary.BigEndian.Uint32(p))
	case frameSettings:
		if h.stream != 0 || len(p)%6 != 0 {
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
			cn.mu.Lock()
			cn.wbuf = append(appendFrameHeader(cn.wbuf, 8, framePing, flagAck, 0), p...)
			cn.mu.Unlock()
			cn.kick()
		}
	case frameGoAway:
		if h.stream != 0 || len(p) < 8 {
			return errProtocol
		}
		cn.onGoAway(binary.BigEndian.Uint32(p) & maxStreamID)
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

func (cn *conn) onData(h frameHeader, p []byte) error {
	q, ok := unpad(h, p)
	if !ok || h.stream == 0 {
		return errProtocol
	}
	kick := false
	cn.mu.Lock()
	cn.recvUnacked += h.length
	if cn.recvUnacked >= connWindow/4 {
		cn.wbuf = appendWindowUpdate(cn.wbuf, 0, uint32(cn.recvUnacked))
		cn.recvUnacked, kick = 0, true
	}
	if call := cn.streams[h.stream]; call != nil {
		call.recvUnacked += h.length
		switch err := call.addData(q, cn.client.opts.MaxRecvMsgSize); {
		case err != nil:
			cn.wbuf = appendRSTStream(cn.wbuf, call.id, errCodeCancel)
			cn.finishLocked(call, err)
			kick = true
		case h.flags&flagEndStream != 0:
			cn.finishLocked(call, status.Error(codes.Internal, "server closed the stream without sending trailers"))
		case call.recvUnacked >= streamWindow/4:
			cn.wbuf = appendWindowUpdate(cn.wbuf, call.id, uint32(call.recvUnacked))
			call.recvUnacked, kick = 0, true
		}
	}
	cn.mu.Unlock()
	if kick {
		cn.kick()
	}
	return nil
}

func (cn *conn) onHeaders(id uint32, flags byte, block []byte) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	call := cn.streams[id]
	if call != nil {
		call.inTrailers = call.gotHeaders || flags&flagEndStream != 0
		call.gotHeaders = true
	}
	cn.decCall = call
	_, err := cn.dec.Write(block)
	if err == nil {
		err = cn.dec.Close()
	}
	cn.decCall = nil
	if err != nil {
		return err // the HPACK state is lost: the connection cannot go on
	}
	if call == nil {
		return nil
	}
	if flags&flagEndStream != 0 {
		cn.finishLocked(call, call.result())
		return nil
	}
	var err2 error
	switch {
	case call.inTrailers:
		err2 = status.Error(codes.Internal, "transport: the backend's trailers do not end the stream")
	case call.httpStatus != 200:
		err2 = httpStatusError(call.httpStatus)
	case !call.grpcContent: // grpc-go's code for an HTTP status of 200, which it has no mapping of
		err2 = status.Error(codes.Unknown, "transport: the backend's response is not gRPC (content-type)")
	}
	if err2 != nil {
		cn.wbuf = appendRSTStream(cn.wbuf, id, errCodeCancel)
		cn.finishLocked(call, err2)
		cn.kick()
	}
	return nil
}

func (cn *conn) onReset(id uint32, code uint32) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	call := cn.streams[id]
	if call == nil {
		return
	}
	c, msg := codes.Internal, "stream terminated by RST_STREAM with error code "
	switch code {
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
	return "UNKNOWN"
}

func (cn *conn) onSettings(p []byte) error {
	cn.mu.Lock()
	for ; len(p) >= 6; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:])
		switch binary.BigEndian.Uint16(p) {
		case settingHeaderTableSize:
			cn.enc.SetMaxDynamicTableSizeLimit(v)
		case settingMaxConcurrentStreams:
			cn.maxStreams = v
		case settingInitialWindowSize:
			if v > maxWindow {
				cn.mu.Unlock()
				return errProtocol
			}
			delta := int32(v) - cn.peerWindow
			cn.peerWindow = int32(v)
			for _, call := range cn.streams {
				call.sendWin += delta
			}
		case settingMaxFrameSize:
			if v < defaultMaxFrame || v > maxFrameLimit {
				cn.mu.Unlock()
				return errProtocol
			}
			cn.maxFrame = int(v)
		}
	}
	cn.wbuf = appendFrameHeader(cn.wbuf, 0, frameSettings, flagAck, 0)
	if !cn.gotSettings {
		cn.gotSettings = true
		close(cn.settings)
	}
	cn.signalLocked()
	cn.mu.Unlock()
	cn.kick()
	return nil
}

// onGoAway stops new calls on the connection; calls the backend will not
// process (ids above last) end as refused, to be retried elsewhere.
func (cn *conn) onGoAway(last uint32) {
	cn.draining.Store(true)
	cn.client.retire(cn)
	cn.mu.Lock()
	defer cn.mu.Unlock()
	for id, call := range cn.streams {
		if id > last {
			call.refused = true
			cn.finishLocked(call, status.Error(codes.Unavailable, "transport: received GOAWAY from the backend"))
		}
	}
	if len(cn.streams) == 0 {
		cn.kick() // controlLoop closes the idle connection
	}
	cn.signalLocked()
}

func (cn *conn) onWindowUpdate(id uint32, inc uint32) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if id == 0 {
		if inc == 0 || cn.sendWindow+int64(inc) > maxWindow {
			return errProtocol
		}
		cn.sendWindow += int64(inc)
	} else if call := cn.streams[id]; call != nil {
		call.sendWin += int32(inc)
	}
	cn.signalLocked()
	return nil
}
