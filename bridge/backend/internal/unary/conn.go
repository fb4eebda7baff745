package unary

import (
	"bufio"
	"context"
	"errors"
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
	dec         headerDecoder
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
	cn.dec.init()
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
	if cn.maxHeaders > 0 && cn.headerListSize(call) > int64(cn.maxHeaders) {
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

// healthy reports whether cn worked: it answered a call, or lived long
// enough not to be the cause of a reconnection storm.
func (cn *conn) healthy() bool {
	return cn.answered.Load() || time.Since(cn.opened) >= healthyAfter
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
