package ws

import (
	"strconv"
	"sync"

	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// The frames of a connection: each is dispatched (in the reader for the
// stream methods, in a goroutine of its own otherwise), and its reply
// written, counted among the bytes waiting for the client.

// wsFrame is one frame being answered on a connection: the
// dispatch.Streams of its calls (stream.go).
type wsFrame struct {
	conn *wsConn

	mu     sync.Mutex
	opened []*stream // streams whose ids the frame's reply carries
}

// add records that the reply to f carries the id of st.
func (f *wsFrame) add(st *stream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.opened = append(f.opened, st)
}

// replied lets the streams opened by f send their messages, now that the
// reply carrying their ids is written (or can never be).
func (f *wsFrame) replied() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, st := range f.opened {
		close(st.ready)
	}
	f.opened = nil
}

// dispatch answers msg, one frame which holds n of the connection's
// slots (perr when it could not be parsed), in a goroutine of the
// connection. Like a POST /, a frame takes one of the server's in-flight
// slots until its reply is written, or is answered error 8 when none is
// free; frames calling the stream methods, which act on the connection's
// own streams, take none and are answered here, in order. Every frame
// asks the caller's rate limiter, as a POST / does.
func (c *wsConn) dispatch(msg *wire.Message, perr *mapping.Error, n int) {
	f := &wsFrame{conn: c}
	x := *c.x
	x.Streams = f
	answer := func(reply []byte) { // a short reply, never dropped
		c.wg.Go(func() {
			defer c.release(n)
			c.reply(f, nil, reply)
		})
	}
	front := c.s.front
	switch {
	case perr != nil:
		answer(wire.AppendError(nil, wire.NullID, perr))
		return
	case msg.IsControl():
		if ref, ok := front.Admit(c.x, 1); !ok {
			answer(rateRefusal(ref))
			return
		}
		answer(front.Run(c.ctx, msg, &x, nil)) // short, and it acted already
		return
	}
	ref, ok := front.Enter()
	if !ok {
		answer(refuseFrame(msg, wire.Refused(codes.ResourceExhausted, ref)))
		return
	}
	c.wg.Go(func() {
		defer c.release(n)
		defer front.Leave()
		var reply []byte
		var ran *wire.Message // the message whose reply this is, once it ran
		defer func() {
			r := reply
			reply = nil // c.reply may drop it: keep it reachable from there alone
			c.reply(f, ran, r)
		}()
		if ref, ok := front.Admit(c.x, msg.Len()); !ok {
			reply = rateRefusal(ref)
			return
		}
		reply, ran = front.Run(c.ctx, msg, &x, nil), msg
	})
}

// rateRefusal is the reply to a frame the caller's rate limit refuses:
// one RESOURCE_EXHAUSTED error, whatever the frame held.
func rateRefusal(msg string) []byte {
	return wire.AppendError(nil, wire.NullID, wire.Refused(codes.ResourceExhausted, msg))
}

// refuseFrame is the reply to msg when none of its calls may run: the
// error e for each call, with its id, as a batch when msg is one; nothing
// for notifications.
func refuseFrame(msg *wire.Message, e *mapping.Error) []byte {
	refuse := func(dst []byte, r *wire.Request) []byte {
		switch {
		case r.Invalid != nil:
			return wire.AppendError(dst, wire.NullID, e)
		case r.Notification():
			return dst
		}
		return wire.AppendError(dst, r.ID, e)
	}
	if !msg.Batch {
		return refuse(nil, &msg.Single)
	}
	dst := []byte{'['}
	for i := range msg.Members {
		n := len(dst)
		if n > 1 {
			dst = append(dst, ',')
		}
		if dst = refuse(dst, &msg.Members[i]); len(dst) == n+1 && n > 1 {
			dst = dst[:n] // a notification: no comma either
		}
	}
	if len(dst) == 1 {
		return nil
	}
	return append(dst, ']')
}

// reply writes the reply of f, if any, and then lets the streams it
// opened start. While it waits for the socket the reply counts in the
// connection's WSBufferBytes (see countReply): when msg, the message it
// answers, is given, opened no stream, and its reply does not fit, the
// reply is dropped and each call of msg gets SLOW_CLIENT instead.
func (c *wsConn) reply(f *wsFrame, msg *wire.Message, reply []byte) {
	defer f.replied()
	if len(reply) == 0 {
		return
	}
	f.mu.Lock()
	refusable := msg != nil && len(f.opened) == 0
	f.mu.Unlock()
	n := int64(len(reply))
	if !c.countReply(n, refusable) {
		reply = refuseFrame(msg, c.repliesUnread())
		if len(reply) == 0 {
			return
		}
		n = int64(len(reply))
		c.countReply(n, false)
	}
	defer c.uncountReply(n)
	c.write(reply)
}

// countReply counts n bytes of a reply waiting for the socket among the
// connection's bytes waiting for the client (those of its streams too, so
// that they stop reading their backends while replies wait), unless
// refusable and the replies already waiting would go past WSBufferBytes
// with it: then it counts nothing and returns false. A reply with no
// other waiting always fits, so one of up to max_response_bytes is always
// sent.
func (c *wsConn) countReply(n int64, refusable bool) bool {
	b := &c.buffered
	b.mu.Lock()
	defer b.mu.Unlock()
	if refusable && b.replies > 0 && b.replies+n > c.s.opts.WSBufferBytes {
		return false
	}
	b.replies += n
	b.out.Add(n)
	return true
}

// uncountReply counts a written reply of n bytes no longer waiting, and
// wakes the streams waiting for room.
func (c *wsConn) uncountReply(n int64) {
	b := &c.buffered
	b.mu.Lock()
	b.replies -= n
	b.mu.Unlock()
	b.out.Done(n)
}

// repliesUnread is the error of each call whose reply did not fit in
// WSBufferBytes beside the replies the client has not read yet.
func (c *wsConn) repliesUnread() *mapping.Error {
	value := strconv.FormatInt(c.s.opts.WSBufferBytes, 10)
	return wire.Status(codes.ResourceExhausted, "SLOW_CLIENT",
		"the client has not read the replies waiting for it, over ws_buffer_bytes ("+value+
			" bytes) with this one, so its reply was dropped (the call may have run): read the earlier replies before calling again",
		"limit", "ws_buffer_bytes", "value", value)
}
