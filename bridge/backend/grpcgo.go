package backend

import (
	"context"
	"errors"
	"io"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// grpcGo makes calls through a grpc-go connection, the messages passing
// as wire bytes through rawCodec, so that package mapping transcodes
// between JSON and wire bytes without a message in between, as it does
// for the direct client.
type grpcGo struct{ conn grpc.ClientConnInterface }

func (grpcGo) Start(context.Context, *Group, *Call) bool { return false }

// Invoke makes c. A Stream call is read whole into c.Response, each
// message behind its 5-byte prefix, as the direct client does.
func (g grpcGo) Invoke(ctx context.Context, c *Call) error {
	if c.Metadata != nil {
		ctx = metadata.NewOutgoingContext(ctx, c.Metadata)
	}
	ctx, origin := WithOrigin(ctx)
	origin.unary = true
	rc := &rawCall{c: c}
	opts := rawCodecOptions
	if c.Capture {
		opts = []grpc.CallOption{rawCodecOptions[0], grpc.Header(&c.Header), grpc.Trailer(&c.Trailer)}
	}
	var err error
	if c.Stream {
		err = g.stream(ctx, rc, opts)
	} else {
		err = g.conn.Invoke(ctx, c.Method, rc, rc, opts...)
	}
	switch {
	case err == nil:
		return nil
	case rc.err != nil:
		return rc.err // over budget, too many messages: refused by the bridge
	}
	c.Remote = origin.Remote(status.Convert(err))
	return err
}

var serverStreamDesc = &grpc.StreamDesc{ServerStreams: true}

// stream makes the server-streaming call of rc and reads every response.
func (g grpcGo) stream(ctx context.Context, rc *rawCall, opts []grpc.CallOption) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // a refused message ends the stream
	cs, err := g.conn.NewStream(ctx, serverStreamDesc, rc.c.Method, opts...)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(rc); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	rc.stream = true
	for {
		if err := cs.RecvMsg(rc); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// rawCall is what rawCodec marshals (the request of c) and unmarshals
// into (the response of c, within its budget).
type rawCall struct {
	c      *Call
	stream bool  // responses are appended behind their prefix
	n      int   // responses so far
	err    error // why the bridge refused a response
}

// rawCodec passes wire bytes through as they are. Its name is "proto", so
// the backend sees the ordinary application/grpc+proto content type.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

// Marshal copies the request: grpc-go's writer may still be sending it
// when the call has ended (a backend that answers before it has read the
// request, as grpc-js does a message over its limit), and the call's
// buffer is pooled, the next call's request written into it at once. The
// copy is grpc-go's to free (pooled from 1 KiB, mem.Copy).
func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.Copy(v.(*rawCall).c.Request, mem.DefaultBufferPool())}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	rc := v.(*rawCall)
	c, n := rc.c, data.Len()
	if rc.stream && c.MaxMessages > 0 && rc.n >= c.MaxMessages {
		rc.err = ErrTooManyMessages
		return rc.err
	}
	if !take(c, int64(n)) {
		rc.err = ErrOverBudget
		return rc.err
	}
	rc.n++
	if rc.stream {
		c.Response = slices.Grow(c.Response, 5+n)
		c.Response = append(c.Response, 0, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	} else {
		c.Response = slices.Grow(c.Response[:0], n)
	}
	for _, buf := range data {
		c.Response = append(c.Response, buf.ReadOnlyData()...)
	}
	return nil
}

// rawCodecOptions makes a call use rawCodec.
var rawCodecOptions = []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}

// Raw holds the wire bytes of one message of a stream opened with
// StreamCodec: RecvMsg(&raw) fills B with a response as it came.
type Raw struct{ B []byte }

// StreamCodec is the call option of streams whose responses are read as
// Raw wire bytes, so that package mapping transcodes them to JSON with no
// message in between; requests may be Raw or proto messages.
var StreamCodec = grpc.ForceCodecV2(streamCodec{})

type streamCodec struct{}

func (streamCodec) Name() string { return "proto" }

func (streamCodec) Marshal(v any) (mem.BufferSlice, error) {
	switch m := v.(type) {
	case *Raw:
		return mem.BufferSlice{mem.SliceBuffer(m.B)}, nil
	case proto.Message:
		b, err := proto.Marshal(m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	return nil, errNotAMessage
}

func (streamCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch m := v.(type) {
	case *Raw:
		m.B = slices.Grow(m.B[:0], data.Len())
		for _, buf := range data {
			m.B = append(m.B, buf.ReadOnlyData()...)
		}
		return nil
	case proto.Message:
		return proto.Unmarshal(data.Materialize(), m)
	}
	return errNotAMessage
}

var errNotAMessage = errors.New("grpc: the stream's codec takes backend.Raw or proto messages")
