package unary

import (
	"bytes"
	"context"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// fuzzSeeds are what a backend might send after its SETTINGS, valid and
// not, mostly about stream 1, the call's.
func fuzzSeeds() [][]byte {
	frames := func(f func(fr *http2.Framer)) []byte {
		var buf bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		fr.AllowIllegalWrites = true
		f(fr)
		return buf.Bytes()
	}
	okHeaders := hpackBlock(":status", "200", "content-type", "application/grpc")
	trailers := hpackBlock("grpc-status", "0")
	compressed := grpcBody("x")
	compressed[0] = 1
	bomb := append(hpackBlock(":status", "200", "content-type", "application/grpc", "x-big", string(bytes.Repeat([]byte("v"), 4000))),
		bytes.Repeat([]byte{0x80 | 62}, 5000)...)
	return [][]byte{
		{},
		// A whole response.
		frames(func(fr *http2.Framer) {
			fr.WriteSettingsAck()
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: okHeaders})
			fr.WriteData(1, false, grpcBody("resp"))
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true, BlockFragment: trailers})
		}),
		// Trailers-only, with a status and a -bin value that is not base64.
		frames(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true,
				BlockFragment: hpackBlock(":status", "200", "content-type", "application/grpc", "grpc-status", "9x", "x-bin", "!!")})
		}),
		// Padding, priority, CONTINUATION, PING, an unknown frame type.
		frames(func(fr *http2.Framer) {
			fr.WritePing(false, [8]byte{1})
			fr.WriteRawFrame(0x42, 0, 0, []byte("?"))
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, PadLength: 3, Priority: http2.PriorityParam{Weight: 1}, BlockFragment: okHeaders[:2]})
			fr.WriteContinuation(1, true, okHeaders[2:])
			fr.WriteDataPadded(1, false, grpcBody("r"), make([]byte, 5))
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, EndStream: true, BlockFragment: trailers})
		}),
		// GOAWAY refusing the call; GOAWAY with an error covering it.
		frames(func(fr *http2.Framer) { fr.WriteGoAway(0, http2.ErrCodeNo, nil) }),
		frames(func(fr *http2.Framer) { fr.WriteGoAway(1, http2.ErrCodeCompression, []byte("debug")) }),
		// RST_STREAM.
		frames(func(fr *http2.Framer) { fr.WriteRSTStream(1, http2.ErrCodeRefusedStream) }),
		frames(func(fr *http2.Framer) { fr.WriteRSTStream(1, http2.ErrCodeCancel) }),
		// Windows: overflows, and a stream window of 0.
		frames(func(fr *http2.Framer) {
			fr.WriteWindowUpdate(1, maxWindow)
			fr.WriteWindowUpdate(0, maxWindow)
		}),
		frames(func(fr *http2.Framer) {
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
		}),
		// SETTINGS out of range.
		frames(func(fr *http2.Framer) {
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31})
		}),
		frames(func(fr *http2.Framer) {
			fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 0},
				http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0}, http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 0})
		}),
		// Broken framing and HPACK.
		frames(func(fr *http2.Framer) { fr.WriteContinuation(1, true, okHeaders) }),
		frames(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff}})
		}),
		frames(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: okHeaders}) // no END_HEADERS, and nothing after
		}),
		frames(func(fr *http2.Framer) { fr.WriteRawFrame(http2.FrameData, 0x8, 1, []byte{200, 1, 2}) }), // padding past the frame
		frames(func(fr *http2.Framer) { fr.WriteRawFrame(http2.FrameData, 0, 1, make([]byte, defaultMaxFrame+1)) }),
		frames(func(fr *http2.Framer) { fr.WriteData(1, false, grpcBody("before headers")) }),
		append(appendFrameHeader(nil, 100, frameHeaders, flagEndHeaders, 1), okHeaders...), // shorter than it says
		// A 1xx response, then the response with a compressed message.
		frames(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: hpackBlock(":status", "100")})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: hpackBlock(":status", "200",
				"content-type", "application/grpc", "grpc-encoding", "gzip")})
			fr.WriteData(1, false, compressed)
		}),
		// A small header block that decodes to 20 MB.
		frames(func(fr *http2.Framer) { writeBlock(fr, 1, bomb, false) }),
		// A HPACK table size update, then a reference past the table.
		frames(func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: []byte{0x20, 0x80 | 70}})
		}),
	}
}

// readUntilHeaders reads the client preface and frames up to the first
// HEADERS; it reports whether it got there.
func readUntilHeaders(nc net.Conn) bool {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, preface); err != nil {
		return false
	}
	fr := http2.NewFramer(nil, nc)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return false
		}
		if _, ok := f.(*http2.HeadersFrame); ok {
			return true
		}
	}
}

// FuzzFrames: whatever a backend sends after a valid SETTINGS (once the
// call's HEADERS have arrived, so that the bytes meet an open stream 1),
// the call returns by its deadline (and a little), nothing panics, and
// the client's goroutines end once it is closed. Each input costs a
// connection, and up to the deadline: fuzzing runs a few inputs a second.
func FuzzFrames(f *testing.F) {
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		served := make(chan struct{})
		go func() {
			defer close(served)
			nc, err := lis.Accept()
			if err != nil {
				return
			}
			defer nc.Close()
			drained := make(chan struct{})
			headers := make(chan bool, 1)
			go func() { // the client's writes never block; this ends when the client closes
				defer close(drained)
				headers <- readUntilHeaders(nc)
				io.Copy(io.Discard, nc)
			}()
			nc.Write(appendFrameHeader(nil, 0, frameSettings, 0, 0))
			if <-headers {
				nc.Write(data) // once the call's stream is open
			}
			<-drained
		}()
		c, err := newAt(lis.Addr().String(), Options{DialTimeout: time.Second, WriteTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		const deadline = 100 * time.Millisecond
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		select {
		case <-invokeAsync(ctx, c, &Call{Method: "/t.S/M", Request: []byte("request"), Capture: true}):
		case <-time.After(deadline + 2*time.Second):
			c.Close()
			t.Fatalf("Invoke had not returned 2s after its deadline of %v", deadline)
		}
		within(t, 2*time.Second, "Close", func() { c.Close() })
		lis.Close()
		select {
		case <-served:
		case <-time.After(2 * time.Second):
			t.Fatal("the client's connection is still open after Close")
		}
		checkClientGoroutines(t)
	})
}
