package unary

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
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

// The states of a call on its connection.
const (
	stateIdle    = iota
	statePending // waiting for a stream
	stateTaken   // the writer is opening its stream
	stateOpen    // it has a stream
	stateDone
)

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
