package dispatch

import (
	"context"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/wire"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// Limits bound the messages of a stream waiting for its client, in an
// Outbox: the next is read from the backend only while fewer than
// Messages of them and Bytes of their bytes wait (so one may take the
// bytes past Bytes); a stream that finds no room for SlowClient ends with
// SLOW_CLIENT.
type Limits struct {
	Messages   int           // stream_buffer
	Bytes      int64         // stream_buffer_bytes
	SlowClient time.Duration // slow_client_timeout
}

// An Outbox is the bounded queue of one stream's messages waiting for
// its client: the stream waits for room (Wait) before it reads each from
// the backend, its Sink puts it in (Put), and the transport's writer
// takes them out (Take) and counts them written (Written). It is the one
// place of the SLOW_CLIENT ending, for every transport. Its zero value is
// not ready: use NewOutbox.
type Outbox struct {
	limits Limits
	shared *Shared       // the bytes of a connection's outboxes together, or nil
	wake   chan struct{} // a message or the last one waits for the writer
	room   chan struct{} // the writer wrote messages, or failed

	mu     sync.Mutex
	q      [][]byte // waiting for the writer
	n      int      // messages waiting: in q, and being written
	bytes  int64    // their bytes
	last   []byte   // the message that ends the stream, once Close gave it
	closed bool
	gone   bool // the writer failed: nobody reads the stream
}

// NewOutbox returns an empty Outbox bounded by limits and, when shared is
// not nil, by what is left of it.
func NewOutbox(limits Limits, shared *Shared) *Outbox {
	return &Outbox{limits: limits, shared: shared, wake: make(chan struct{}, 1), room: make(chan struct{}, 1),
		q: make([][]byte, 0, min(max(limits.Messages, 1), 8))}
}

// A Shared bounds the bytes waiting for one client together (a WebSocket
// connection's streams and replies: ws_buffer_bytes): an Outbox with one
// waits while they are at Limit or past it. Its zero value has no room;
// set Limit.
type Shared struct {
	Limit int64
	Name  string // the setting of Limit, named in SLOW_CLIENT

	mu    sync.Mutex
	bytes int64
	room  chan struct{} // closed when bytes leave; nil while nobody waits
}

// Add counts n more bytes waiting (a reply the transport writes).
func (s *Shared) Add(n int64) {
	s.mu.Lock()
	s.bytes += n
	s.mu.Unlock()
}

// Done counts n bytes fewer waiting, and wakes the outboxes waiting for
// room.
func (s *Shared) Done(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bytes -= n
	if s.room != nil {
		close(s.room)
		s.room = nil
	}
}

// full returns the channel closed when bytes leave, when they are at
// Limit or past it.
func (s *Shared) full() (room chan struct{}, full bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytes < s.Limit {
		return nil, false
	}
	if s.room == nil {
		s.room = make(chan struct{})
	}
	return s.room, true
}

// signal wakes the one waiting on c, if any, or the next.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Put queues b, which the outbox keeps, for the writer. It does not wait:
// Wait found room for it.
func (o *Outbox) Put(b []byte) {
	n := int64(len(b))
	o.mu.Lock()
	o.q = append(o.q, b)
	o.n++
	o.bytes += n
	o.mu.Unlock()
	if o.shared != nil {
		o.shared.Add(n)
	}
	signal(o.wake)
}

// Wait is dispatch.Waiter's: it waits until there is room for the next
// message, before the stream reads it from the backend (so that a client
// that does not read holds the backend back, through gRPC's flow
// control, rather than the bridge's memory): fewer than Limits.Messages
// messages and Limits.Bytes bytes wait, and fewer than Shared's Limit
// bytes of the connection's. Past Limits.SlowClient without room, the
// client is not reading: the error is SLOW_CLIENT, naming the limit that
// was reached. It returns errGone once the writer failed or ctx ended.
func (o *Outbox) Wait(ctx context.Context) error {
	var timer *time.Timer
	for {
		o.mu.Lock()
		full := ""
		var shared chan struct{}
		switch {
		case o.gone:
			o.mu.Unlock()
			return errGone
		case o.n >= o.limits.Messages:
			full = "stream_buffer"
		case o.bytes >= o.limits.Bytes:
			full = "stream_buffer_bytes"
		case o.shared != nil:
			var ok bool
			if shared, ok = o.shared.full(); ok {
				full = o.shared.Name
			}
		}
		o.mu.Unlock()
		if full == "" {
			if timer != nil {
				timer.Stop()
			}
			return nil
		}
		if timer == nil {
			timer = time.NewTimer(o.limits.SlowClient)
			defer timer.Stop()
		}
		select {
		case <-o.room:
		case <-shared: // nil unless the shared bytes were full
		case <-timer.C:
			return o.slowClient(full)
		case <-ctx.Done():
			return errGone // the engine answers the context's error
		}
	}
}

// errGone ends a stream whose client is gone; nobody sees it.
var errGone = wire.Refused(codes.Canceled, "the client went away")

// slowClient is the error that ends a stream whose client did not read
// in time, naming the limit that was reached.
func (o *Outbox) slowClient(limit string) *mapping.Error {
	value := int64(o.limits.Messages)
	switch limit {
	case "stream_buffer_bytes":
		value = o.limits.Bytes
	case o.shared.name():
		value = o.shared.Limit
	}
	return wire.SlowClient(limit, value, o.limits.SlowClient)
}

func (s *Shared) name() string {
	if s == nil {
		return ""
	}
	return s.Name
}

// Close gives the message that ends the stream (nil for none), which the
// writer takes after every message queued before, whatever the limits.
func (o *Outbox) Close(last []byte) {
	o.mu.Lock()
	o.last, o.closed = last, true
	o.mu.Unlock()
	signal(o.wake)
}

// Wake is the channel that tells the writer something waits for it.
func (o *Outbox) Wake() <-chan struct{} { return o.wake }

// Take returns the messages waiting (to be written, then counted with
// Written), and keeps batch, emptied, for the next ones: the writer gives
// back the batch it wrote. Once Close was called, closed is true and last
// is Close's message, after the messages returned.
func (o *Outbox) Take(batch [][]byte) (_ [][]byte, last []byte, closed bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	batch, o.q = o.q, batch[:0]
	if o.closed {
		last, o.last = o.last, nil
	}
	return batch, last, o.closed
}

// Written counts the messages of batch, which Take gave, no longer
// waiting (and lets go of them), and wakes Wait.
func (o *Outbox) Written(batch [][]byte) {
	if len(batch) == 0 {
		return
	}
	var size int64
	for i, b := range batch {
		size += int64(len(b))
		batch[i] = nil
	}
	o.mu.Lock()
	o.n -= len(batch)
	o.bytes -= size
	o.mu.Unlock()
	if o.shared != nil {
		o.shared.Done(size)
	}
	signal(o.room)
}

// Fail records that the writer cannot write (the client is gone): Wait
// refuses what comes.
func (o *Outbox) Fail() {
	o.mu.Lock()
	o.gone = true
	o.mu.Unlock()
	signal(o.room)
}

// Gone reports whether Fail was called.
func (o *Outbox) Gone() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.gone
}
