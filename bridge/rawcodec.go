package bridge

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
)

// frame holds the protobuf wire bytes of one message. Unary calls send and
// receive frames through rawCodec, so that package mapping transcodes
// between JSON and wire bytes without a message in between.
type frame struct{ b []byte }

var framePool = sync.Pool{New: func() any { return &frame{b: make([]byte, 0, 1024)} }}

func getFrame() *frame { return framePool.Get().(*frame) }

func putFrame(f *frame) {
	if cap(f.b) <= maxPooled {
		f.b = f.b[:0]
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
	for _, buf := range data {
		f.b = append(f.b, buf.ReadOnlyData()...)
	}
	return nil
}

// rawCodecOptions makes a call use rawCodec.
var rawCodecOptions = []grpc.CallOption{grpc.ForceCodecV2(rawCodec{})}

// withRawCodec adds rawCodec to the per-call options opts.
func withRawCodec(opts []grpc.CallOption) []grpc.CallOption {
	if len(opts) == 0 {
		return rawCodecOptions
	}
	return append(opts, rawCodecOptions[0])
}
