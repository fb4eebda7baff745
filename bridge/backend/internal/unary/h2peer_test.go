package unary

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// h2peer is a scripted HTTP/2 server for what grpc-go's never does
// (REFUSED_STREAM, a GOAWAY below a running stream, padding, ...). It
// checks the client's side of the protocol as it goes: the preface first,
// frame sizes, and DATA within the windows it grants.
type h2peer struct {
	t        testing.TB
	settings []http2.Setting // sent first
	// respond answers a request whose stream has ended; conn counts the
	// connections from 1.
	respond func(p *h2stream)
	conns   atomic.Int32
	pings   atomic.Int32 // PING acks received
	// pingsRecv counts the client's own PINGs, which the peer acknowledges
	// as a server does.
	pingsRecv atomic.Int32
	// onHeaders, when set, sees each request's HEADERS as they arrive,
	// before its message.
	onHeaders func(s *h2stream, f *http2.MetaHeadersFrame)
	// closeFirst closes the first connection this long after it opened.
	closeFirst time.Duration
	// lateAnswers holds the requests that end back until every frame
	// the client has sent is read, as a proxy's answers come later from
	// upstream: what the peer sends on reading a HEADERS (a GOAWAY) goes
	// out before the answers to requests sent with it.
	lateAnswers bool
}

// h2stream is one request to an h2peer, with what answers it.
type h2stream struct {
	fr     *http2.Framer
	conn   int32
	id     uint32
	path   string
	header []hpack.HeaderField
	body   []byte // the message, without its 5-byte prefix
	// setWindow sends SETTINGS_INITIAL_WINDOW_SIZE v.
	setWindow func(v uint32)
	nc        net.Conn
}

func (s *h2stream) encode(fields ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return buf.Bytes()
}

// ok answers with msg and status OK, in the ordinary three frames.
func (s *h2stream) ok(msg []byte) {
	s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true,
		BlockFragment: s.encode(":status", "200", "content-type", "application/grpc")})
	for b := grpcBody(string(msg)); len(b) > 0; {
		n := min(len(b), defaultMaxFrame)
		s.fr.WriteData(s.id, false, b[:n])
		b = b[n:]
	}
	s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true, EndStream: true,
		BlockFragment: s.encode("grpc-status", "0")})
}

// serveH2 runs p on a new listener and returns its target.
func serveH2(t testing.TB, p *h2peer) string {
	p.t = t
	lis, target := listen(t, "tcp")
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after acceptLoop's cleanup has closed the connections
	acceptLoop(t, lis, func(nc net.Conn) {
		n := p.conns.Add(1)
		wg.Go(func() { p.serveConn(nc, n) })
	})
	return target
}

func (p *h2peer) serveConn(nc net.Conn, n int32) {
	defer nc.Close()
	if n == 1 && p.closeFirst > 0 {
		t := time.AfterFunc(p.closeFirst, func() { nc.Close() })
		defer t.Stop()
	}
	// The server's preface goes out at once, before the client's can
	// have arrived, as grpc-go's does.
	br := bufio.NewReader(nc)
	fr := http2.NewFramer(nc, br)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	fr.SetMaxReadFrameSize(defaultMaxFrame) // the client must keep to it
	fr.AllowIllegalWrites = true
	fr.WriteSettings(p.settings...)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(nc, preface); err != nil {
		return
	}
	if string(preface) != http2.ClientPreface {
		p.t.Errorf("connection %d began with %q, not the client preface", n, preface)
		return
	}
	window := int64(defaultWindow) // what the client may still send on the connection
	streamWindow := int64(defaultWindow)
	for _, s := range p.settings {
		if s.ID == http2.SettingInitialWindowSize {
			streamWindow = int64(s.Val)
		}
	}
	streams := map[uint32]*h2stream{}
	sendWin := map[uint32]int64{}
	// The window a SETTINGS changes applies to the DATA the client sends
	// after its ACK: pending holds the windows of the SETTINGS not yet
	// acknowledged, -1 for none (the first SETTINGS, applied already).
	pending := []int64{-1}
	setWindow := func(v uint32) {
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: v})
		pending = append(pending, int64(v))
	}
	var late []*h2stream
	for {
		if len(late) > 0 && br.Buffered() == 0 {
			for _, s := range late {
				p.respond(s)
			}
			late = late[:0]
		}
		f, err := fr.ReadFrame()
		if err != nil {
			if err != io.EOF && !isClosed(err) {
				p.t.Errorf("connection %d: %v", n, err)
			}
			return
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
				continue
			}
			if v := pending[0]; v >= 0 {
				for id := range sendWin {
					sendWin[id] += v - streamWindow
				}
				streamWindow = v
			}
			pending = pending[1:]
		case *http2.PingFrame:
			if f.IsAck() {
				p.pings.Add(1)
			} else {
				p.pingsRecv.Add(1)
				fr.WritePing(true, f.Data)
			}
		case *http2.MetaHeadersFrame:
			s := &h2stream{fr: fr, conn: n, id: f.StreamID, header: f.Fields, setWindow: setWindow, nc: nc}
			for _, hf := range f.Fields {
				if hf.Name == ":path" {
					s.path = hf.Value
				}
			}
			streams[f.StreamID] = s
			sendWin[f.StreamID] = streamWindow
			if p.onHeaders != nil {
				p.onHeaders(s, f)
			}
		case *http2.DataFrame:
			s := streams[f.StreamID]
			if s == nil {
				continue
			}
			n := int64(f.Length)
			window -= n
			sendWin[f.StreamID] -= n
			if window < 0 || sendWin[f.StreamID] < 0 {
				p.t.Errorf("the client overran a window: connection %d, stream %d", window, sendWin[f.StreamID])
			}
			s.body = append(s.body, f.Data()...)
			if n > 0 { // grant it back, as a server reading the data does
				fr.WriteWindowUpdate(0, uint32(n))
				window += n
				if !f.StreamEnded() {
					fr.WriteWindowUpdate(f.StreamID, uint32(n))
					sendWin[f.StreamID] += n
				}
			}
			if f.StreamEnded() {
				if len(s.body) < 5 || int(binary.BigEndian.Uint32(s.body[1:])) != len(s.body)-5 {
					p.t.Errorf("stream %d: a malformed message of %d bytes", s.id, len(s.body))
				} else {
					s.body = s.body[5:]
				}
				delete(streams, f.StreamID)
				delete(sendWin, f.StreamID)
				if p.lateAnswers {
					late = append(late, s)
					continue
				}
				p.respond(s)
			}
		}
	}
}

func isClosed(err error) bool {
	return err != nil && (bytes.Contains([]byte(err.Error()), []byte("use of closed")) ||
		bytes.Contains([]byte(err.Error()), []byte("connection reset")))
}

// TestH2Refused: a call the backend refuses (REFUSED_STREAM, or a stream
// above a GOAWAY's last) is made again, once.
func TestH2Refused(t *testing.T) {
	t.Parallel()
	var attempts sync.Map // path -> *atomic.Int32
	p := &h2peer{respond: func(s *h2stream) {
		v, _ := attempts.LoadOrStore(s.path+string(s.body), new(atomic.Int32))
		n := v.(*atomic.Int32).Add(1)
		switch s.path {
		case "/t.S/RefusedOnce":
			if n == 1 {
				s.fr.WriteRSTStream(s.id, http2.ErrCodeRefusedStream)
				return
			}
		case "/t.S/RefusedAlways":
			s.fr.WriteRSTStream(s.id, http2.ErrCodeRefusedStream)
			return
		case "/t.S/GoAway":
			if s.conn == 1 {
				s.fr.WriteGoAway(s.id-2, http2.ErrCodeNo, nil)
				return
			}
		case "/t.S/Reset":
			s.fr.WriteRSTStream(s.id, http2.ErrCodeInternal)
			return
		}
		s.ok(s.body)
	}}
	target := serveH2(t, p)
	c := newClient(t, target, Options{})
	tests := []struct {
		path     string
		code     codes.Code
		attempts int32
	}{
		{"/t.S/RefusedOnce", codes.OK, 2},
		{"/t.S/RefusedAlways", codes.Unavailable, 2},
		{"/t.S/Reset", codes.Internal, 1},
		{"/t.S/GoAway", codes.OK, 2},
		{"/t.S/Plain", codes.OK, 1},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			call, err := invoke(t.Context(), c, tt.path, []byte(tt.path))
			wantCode(t, err, tt.code)
			if err == nil && string(call.Response) != tt.path {
				t.Errorf("response %q", call.Response)
			}
			v, _ := attempts.Load(tt.path + tt.path)
			if n := v.(*atomic.Int32).Load(); n != tt.attempts {
				t.Errorf("%d attempts, want %d", n, tt.attempts)
			}
		})
	}
	// The same through a Group.
	attempts.Clear()
	var g Group
	calls := make([]*Call, 6)
	for i := range calls {
		calls[i] = &Call{Method: "/t.S/RefusedOnce", Request: []byte(strconv.Itoa(i))}
		if i%2 == 1 {
			calls[i].Method = "/t.S/Plain"
		}
		g.Start(t.Context(), c, calls[i])
	}
	g.Wait(t.Context())
	for i, call := range calls {
		if call.Err != nil || string(call.Response) != strconv.Itoa(i) {
			t.Errorf("call %d in a group: %q, %v", i, call.Response, call.Err)
		}
	}
}

// TestH2Framing answers with padding, priorities, CONTINUATIONs, PINGs
// and frames of unknown types between the response's frames.
func TestH2Framing(t *testing.T) {
	t.Parallel()
	p := &h2peer{settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 100}}}
	p.respond = func(s *h2stream) {
		fr := s.fr
		fr.WritePing(false, [8]byte{1, 2, 3})
		fr.WriteRawFrame(0x42, 0, 0, []byte("unknown frame type")) // ignored
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true, PadLength: 7,
			Priority:      http2.PriorityParam{StreamDep: 0, Weight: 10},
			BlockFragment: s.encode(":status", "200", "content-type", "application/grpc+proto", "x-h", "v")})
		fr.WritePriority(s.id, http2.PriorityParam{Weight: 1})
		body := grpcBody(string(s.body))
		for i := 0; i < len(body); i += 3 { // a message over many small, padded frames
			fr.WriteDataPadded(s.id, false, body[i:min(i+3, len(body))], make([]byte, i%5))
		}
		fr.WriteDataPadded(s.id, false, nil, make([]byte, 10))
		block := s.encode("grpc-status", "0", "x-t", string(bytes.Repeat([]byte("t"), 40000)))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndStream: true, BlockFragment: block[:100]})
		for rest := block[100:]; len(rest) > 0; {
			n := min(len(rest), 9000)
			fr.WriteContinuation(s.id, n == len(rest), rest[:n])
			rest = rest[n:]
		}
		fr.WriteRSTStream(s.id+1000, http2.ErrCodeCancel) // a stream it never had: ignored
	}
	target := serveH2(t, p)
	c := newClient(t, target, Options{})
	for i := range 5 {
		req := pattern(1000 * i)
		call := &Call{Method: "/t.S/M", Request: req, Capture: true}
		if err := c.Invoke(t.Context(), call); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(call.Response, req) {
			t.Fatalf("call %d: response of %d bytes, want %d", i, len(call.Response), len(req))
		}
		if call.Header.Get("x-h")[0] != "v" || len(call.Trailer.Get("x-t")[0]) != 40000 {
			t.Fatalf("call %d: header %d, trailer %d", i, len(call.Header), len(call.Trailer))
		}
	}
	await.NoError(t, 2*time.Second, "5 PING acks", func() error {
		if n := p.pings.Load(); n != 5 {
			return fmt.Errorf("%d PING acks, want 5", n)
		}
		return nil
	})
}

// TestH2FlowControl sends large requests through a small and changing
// stream window, and checks the client never overruns it.
func TestH2FlowControl(t *testing.T) {
	t.Parallel()
	p := &h2peer{settings: []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1000}}}
	var n atomic.Int32
	p.respond = func(s *h2stream) {
		// Change the window of all streams; the client applies the
		// difference to the streams it has, which may leave them
		// negative.
		switch n.Add(1) {
		case 1:
			s.setWindow(70000)
		case 3:
			s.setWindow(100)
		case 5:
			s.setWindow(20000)
		}
		s.ok(s.body)
	}
	target := serveH2(t, p)
	c := newClient(t, target, Options{})
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Go(func() {
			req := pattern(200000 + i)
			call, err := invoke(t.Context(), c, "/t.S/M", req)
			if err != nil || !bytes.Equal(call.Response, req) {
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
}

// TestH2ProtocolErrors: a backend that breaks HTTP/2 fails the calls on
// the connection with Unavailable, and the next call gets a new one.
func TestH2ProtocolErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		write func(s *h2stream)
		code  codes.Code
	}{
		{"DATA on stream 0", func(s *h2stream) { s.fr.WriteData(0, false, []byte("x")) }, codes.Unavailable},
		{"oversized frame", func(s *h2stream) {
			s.fr.WriteRawFrame(http2.FrameData, 0, s.id, make([]byte, defaultMaxFrame+1))
		}, codes.Unavailable},
		{"push promise", func(s *h2stream) {
			s.fr.WritePushPromise(http2.PushPromiseParam{StreamID: s.id, PromiseID: 2, EndHeaders: true,
				BlockFragment: s.encode(":method", "GET")})
		}, codes.Unavailable},
		{"interleaved header block", func(s *h2stream) {
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, BlockFragment: s.encode(":status", "200")})
			s.fr.WriteData(s.id, false, []byte("x"))
		}, codes.Unavailable},
		{"bad HPACK", func(s *h2stream) {
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff}})
		}, codes.Unavailable},
		{"trailers without END_STREAM", func(s *h2stream) {
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true,
				BlockFragment: s.encode(":status", "200", "content-type", "application/grpc")})
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true,
				BlockFragment: s.encode("grpc-status", "0")})
		}, codes.Internal},
		{"DATA with END_STREAM", func(s *h2stream) {
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true,
				BlockFragment: s.encode(":status", "200", "content-type", "application/grpc")})
			s.fr.WriteData(s.id, true, grpcBody("x"))
		}, codes.Internal},
		{"compressed message", func(s *h2stream) {
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true,
				BlockFragment: s.encode(":status", "200", "content-type", "application/grpc")})
			b := grpcBody("x")
			b[0] = 1
			s.fr.WriteData(s.id, false, b)
		}, codes.Internal},
		{"details of another code", func(s *h2stream) {
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: s.id, EndHeaders: true, EndStream: true,
				BlockFragment: s.encode(":status", "200", "content-type", "application/grpc", "grpc-status", "5",
					"grpc-message", "nf", "grpc-status-details-bin", "CAM")}) // code 3
		}, codes.Internal}, // as grpc-go: "grpc-status-details-bin mismatch" (internal/status.NewWithProto)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := &h2peer{respond: func(s *h2stream) {
				if s.path == "/t.S/Bad" {
					tt.write(s)
					return
				}
				s.ok(s.body)
			}}
			target := serveH2(t, p)
			c := newClient(t, target, Options{})
			_, err := invoke(t.Context(), c, "/t.S/Bad", nil)
			wantCode(t, err, tt.code)
			// A connection that failed before answering anything is a
			// failure to connect: the next dial waits for the backoff.
			await.NoError(t, 3*time.Second, "the next call, once the backoff has passed", func() error {
				call, err := invoke(t.Context(), c, "/t.S/Good", []byte("good"))
				if err != nil || string(call.Response) != "good" {
					return fmt.Errorf("the next call: %q, %v", call.Response, err)
				}
				return nil
			})
		})
	}
}

// TestH2PrefaceFirst connects many times to a backend whose SETTINGS
// arrive before the client has written anything: the client's preface
// must still be the first thing it writes.
func TestH2PrefaceFirst(t *testing.T) {
	t.Parallel()
	p := &h2peer{respond: func(s *h2stream) { s.ok(s.body) }}
	target := serveH2(t, p)
	for range 100 {
		c, err := newAt(target, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := invoke(t.Context(), c, "/t.S/M", nil); err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
}

// TestH2UnsentRetried loses a connection while calls are queued on it but
// not yet written, and one that was written: only the unsent ones are
// made again, on a new connection.
func TestH2UnsentRetried(t *testing.T) {
	t.Parallel()
	var attempts sync.Map // request -> *atomic.Int32
	p := &h2peer{closeFirst: 200 * time.Millisecond, respond: func(s *h2stream) {
		v, _ := attempts.LoadOrStore(string(s.body), new(atomic.Int32))
		v.(*atomic.Int32).Add(1)
		if s.path == "/t.S/Drop" {
			s.nc.Close()
			return
		}
		s.ok(s.body)
	}}
	target := serveH2(t, p)
	c := newClient(t, target, Options{})
	if _, err := invoke(t.Context(), c, "/t.S/M", []byte("first")); err != nil {
		t.Fatal(err)
	}
	var g Group
	calls := make([]*Call, 5)
	for i := range calls {
		calls[i] = &Call{Method: "/t.S/M", Request: []byte(strconv.Itoa(i))}
		g.Start(t.Context(), c, calls[i]) // queued: Wait writes them
	}
	// The connection is lost meanwhile (closeFirst), and the calls
	// queued on it end: the one pending count left is Wait's.
	await.Until(t, 5*time.Second, "the queued calls to end with the first connection", func() bool { return g.pending.Load() == 1 })
	g.Wait(t.Context())
	for i, call := range calls {
		if call.Err != nil || string(call.Response) != strconv.Itoa(i) {
			t.Errorf("call %d: %q, %v", i, call.Response, call.Err)
		}
		if v, _ := attempts.Load(strconv.Itoa(i)); v == nil || v.(*atomic.Int32).Load() != 1 {
			t.Errorf("call %d did not reach the backend exactly once", i)
		}
	}
	// A call the backend received is not made again.
	_, err := invoke(t.Context(), c, "/t.S/Drop", []byte("drop"))
	wantCode(t, err, codes.Unavailable)
	v, _ := attempts.Load("drop")
	if n := v.(*atomic.Int32).Load(); n != 1 {
		t.Errorf("the dropped call reached the backend %d times", n)
	}
}
