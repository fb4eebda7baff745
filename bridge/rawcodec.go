package bridge

import (
	"errors"
	"slices"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
)

// frame holds the protobuf wire bytes of one message. Unary calls send and
// receive frames through rawCodec, so that package mapping transcodes
// between JSON and wire bytes without a message in between.
type frame struct {
	b []byte
	// reservation, for a response, is what it takes of its reply's
	// budget, which Unmarshal takes as soon as grpc-go has the message;
	// over says the message did not fit.
	reservation
	over bool
}

var framePool = sync.Pool{New: func() any { return &frame{b: make([]byte, 0, 1024)} }}

func getFrame() *frame { return framePool.Get().(*frame) }

func putFrame(f *frame) {
	if cap(f.b) <= maxPooled {
		f.b = f.b[:0]
		f.reservation, f.over = reservation{}, false
		framePool.Put(f)
	}
}

// rawCodec passes frames through as they are. Its name is "proto", so the
// backend sees the ordinary application/grpc+proto content type.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.(*frame).b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	f := v.(*frame)
	n := data.Len()
	if (f.budget != nil || f.limit > 0) && !f.take(int64(n)) {
		f.over = true
		return errFrameOverBudget
	}
	f.b = slices.Grow(f.b, n)
	for _, buf := range data {
		f.b = append(f.b, buf.ReadOnlyData()...)
	}
	return nil
}

// errFrameOverBudget fails a call whose response does not fit in its
// budget; the frame says so (over), which is what the bridge reads.
var errFrameOverBudget = errors.New("the response does not fit in the reply's budget")

// rawCodecOptions makes a call use rawCodec.
var rawCodecOptions = []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}

// withRawCodec adds rawCodec to the per-call options opts.
func withRawCodec(opts []grpc.CallOption) []grpc.CallOption {
	if len(opts) == 0 {
		return rawCodecOptions
	}
	return append(opts, rawCodecOptions[0])
}
