package unary

// Conformance tests: behaviour the client must share with grpc-go's
// (google.golang.org/grpc v1.85.0, whose functions the comments cite) or,
// where grpc-go has none, with RFC 9113. Each test names the scripted peer
// it runs against; none takes more than a few seconds.

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // for grpc-go's client in TestConformanceReference
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// headers writes a header block of fields on s's stream.
func (s *h2stream) headers(endStream bool, fields ...string) {
	writeBlock(s.fr, s.id, s.encode(fields...), endStream)
}

// wantStatus fails the test unless err is a status error of code whose
// message contains msg.
func wantStatus(t testing.TB, err error, code codes.Code, msg string) {
	t.Helper()
	wantCode(t, err, code)
	if m := status.Convert(err).Message(); !strings.Contains(m, msg) {
		t.Fatalf("message %q does not contain %q", m, msg)
	}
}

// details is a grpc-status-details-bin value: a google.rpc.Status.
func details(code codes.Code, msg string) string {
	b, err := proto.Marshal(&spb.Status{Code: int32(code), Message: msg})
	if err != nil {
		panic(err)
	}
	return base64.RawStdEncoding.EncodeToString(b)
}

// A scriptedCase is a response an h2peer writes, with the outcome a call
// must have: the same as grpc-go's client (TestConformanceReference runs
// grpc-go's against the same cases).
type scriptedCase struct {
	name    string
	write   func(s *h2stream)
	code    codes.Code
	msg     string // a part of the status message
	want    string // the response, when OK
	capture bool
	check   func(header metadata.MD) error // of the response headers, with capture
}

// serveCases runs an h2peer answering "/t.S/<i>" with cases[i] and
// echoing anything else.
func serveCases(t testing.TB, cases []scriptedCase) string {
	return serveH2(t, &h2peer{respond: func(s *h2stream) {
		if i, err := strconv.Atoi(strings.TrimPrefix(s.path, "/t.S/")); err == nil {
			cases[i].write(s)
			return
		}
		s.ok(s.body)
	}})
}

// runCasesGRPCGo makes each case's call with grpc-go's client to target,
// which must see what the direct client sees (runCases).
func runCasesGRPCGo(t *testing.T, target string, cases []scriptedCase) {
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(1<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			var resp rawMsg
			var header metadata.MD
			err := cc.Invoke(ctx, "/t.S/"+strconv.Itoa(i), &rawMsg{}, &resp, grpc.ForceCodecV2(passCodec{}), grpc.Header(&header))
			wantStatus(t, err, tc.code, tc.msg)
			if err == nil && string(resp.b) != tc.want {
				t.Errorf("response %q, want %q", resp.b, tc.want)
			}
			if tc.check != nil && err == nil {
				if err := tc.check(header); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// runCases makes each case's call with c, then one more that must succeed.
func runCases(t *testing.T, c *Client, cases []scriptedCase) {
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			call := &Call{Method: "/t.S/" + strconv.Itoa(i), Capture: tc.capture}
			err := c.Invoke(ctx, call)
			wantStatus(t, err, tc.code, tc.msg)
			if err == nil && string(call.Response) != tc.want {
				t.Errorf("response %q, want %q", call.Response, tc.want)
			}
			if tc.check != nil && err == nil {
				if err := tc.check(call.Header); err != nil {
					t.Error(err)
				}
			}
		})
	}
	if call, err := invoke(t.Context(), c, "/t.S/Good", []byte("x")); err != nil || string(call.Response) != "x" {
		t.Fatalf("a call after the others: %q, %v", call.Response, err)
	}
}

// statusCases: how the status of a response is read, field by field, as
// grpc-go's http2Client.operateHeaders (internal/transport/
// http2_client.go) and internal/status.NewWithProto read it.
func statusCases() []scriptedCase {
	grpcHeaders := []string{":status", "200", "content-type", "application/grpc"}
	// trailersOnly answers with one HEADERS frame that ends the stream.
	trailersOnly := func(fields ...string) func(s *h2stream) {
		return func(s *h2stream) { s.headers(true, append(grpcHeaders[:4:4], fields...)...) }
	}
	// full answers with headers (extra fields in them), a message and
	// trailers of fields.
	full := func(extra []string, fields ...string) func(s *h2stream) {
		return func(s *h2stream) {
			s.headers(false, append(grpcHeaders[:4:4], extra...)...)
			s.fr.WriteData(s.id, false, grpcBody("resp"))
			s.headers(true, fields...)
		}
	}
	// bare answers with one HEADERS frame of just fields, ending the stream.
	bare := func(fields ...string) func(s *h2stream) {
		return func(s *h2stream) { s.headers(true, fields...) }
	}
	return []scriptedCase{
		// grpc-status is parsed with strconv.ParseInt(v, 10, 32); an error
		// is Unknown "transport: malformed grpc-status: ..." (operateHeaders).
		{name: "grpc-status UNAVAILABLE", write: trailersOnly("grpc-status", "UNAVAILABLE"), code: codes.Unknown, msg: "malformed grpc-status"},
		{name: "grpc-status 9x", write: trailersOnly("grpc-status", "9x"), code: codes.Unknown, msg: "malformed grpc-status"},
		{name: "grpc-status empty", write: trailersOnly("grpc-status", ""), code: codes.Unknown, msg: "malformed grpc-status"},
		{name: "grpc-status 99999999999", write: trailersOnly("grpc-status", "99999999999"), code: codes.Unknown, msg: "malformed grpc-status"},
		{name: "grpc-status 2147483648", write: trailersOnly("grpc-status", "2147483648"), code: codes.Unknown, msg: "malformed grpc-status"},
		{name: "grpc-status OK in trailers", write: full(nil, "grpc-status", "OK"), code: codes.Unknown, msg: "malformed grpc-status"},
		// "-1" is in ParseInt's range: grpc-go keeps it as
		// codes.Code(uint32(-1)), a code it has no name for, and not OK.
		{name: "grpc-status -1", write: trailersOnly("grpc-status", "-1"), code: codes.Code(math.MaxUint32)},
		{name: "grpc-status 0", write: full(nil, "grpc-status", "0"), want: "resp"},
		// Without grpc-status the code stays at operateHeaders' default,
		// codes.Unknown, with grpc-message (or nothing) as its message.
		{name: "no grpc-status in trailers", write: full(nil, "x-t", "1"), code: codes.Unknown},
		{name: "no grpc-status in trailers, with a message", write: full(nil, "grpc-message", "why"), code: codes.Unknown, msg: "why"},
		{name: "no grpc-status, trailers-only", write: trailersOnly(), code: codes.Unknown},
		// internal/status.NewWithProto: details whose code is not
		// grpc-status's are replaced by Internal "grpc-status-details-bin
		// mismatch: ..."; details that are no google.rpc.Status are
		// dropped; details that match replace the status.
		{name: "details of another code", write: trailersOnly("grpc-status", "5", "grpc-message", "nf",
			"grpc-status-details-bin", details(codes.InvalidArgument, "other")), code: codes.Internal, msg: "grpc-status-details-bin mismatch"},
		{name: "details of the same code", write: trailersOnly("grpc-status", "5", "grpc-message", "nf",
			"grpc-status-details-bin", details(codes.NotFound, "from details")), code: codes.NotFound, msg: "from details"},
		{name: "details not a status", write: trailersOnly("grpc-status", "5", "grpc-message", "nf",
			"grpc-status-details-bin", base64.RawStdEncoding.EncodeToString([]byte{0xff, 0xff})), code: codes.NotFound, msg: "nf"},
		// A -bin value that is not base64 is a headerError: Internal
		// "transport: malformed <name>: ..." (operateHeaders, via
		// decodeMetadataHeader), whether or not the caller wants metadata.
		{name: "details not base64", write: trailersOnly("grpc-status", "5", "grpc-message", "nf",
			"grpc-status-details-bin", "!!!"), code: codes.Internal, msg: "malformed grpc-status-details-bin"},
		{name: "bad -bin in headers", write: full([]string{"x-b-bin", "!!!"}, "grpc-status", "0"), code: codes.Internal, msg: "malformed x-b-bin"},
		{name: "bad -bin in headers, captured", write: full([]string{"x-b-bin", "!!!"}, "grpc-status", "0"), code: codes.Internal, msg: "malformed x-b-bin", capture: true},
		{name: "bad -bin in trailers", write: full(nil, "grpc-status", "0", "x-b-bin", "*"), code: codes.Internal, msg: "malformed x-b-bin", capture: true},
		{name: "good -bin, padded and not", write: full([]string{"x-p-bin", "YWI=", "x-u-bin", "YWI"}, "grpc-status", "0"), want: "resp", capture: true,
			check: func(h metadata.MD) error {
				if p, u := h.Get("x-p-bin"), h.Get("x-u-bin"); len(p) != 1 || p[0] != "ab" || len(u) != 1 || u[0] != "ab" {
					return fmt.Errorf("header %v", h)
				}
				return nil
			}},
		// A first HEADERS frame without a gRPC content-type is not gRPC,
		// whatever its grpc-status says: its code comes from the HTTP
		// status by HTTPStatusConvTab, Unknown for 200, with "malformed
		// header: missing HTTP content-type" (operateHeaders, !isGRPC).
		{name: "trailers-only without content-type, grpc-status 5", write: bare(":status", "200", "grpc-status", "5"), code: codes.Unknown, msg: "missing HTTP content-type"},
		{name: "trailers-only without content-type, grpc-status 0", write: bare(":status", "200", "grpc-status", "0"), code: codes.Unknown, msg: "missing HTTP content-type"},
		{name: "trailers-only without content-type, HTTP 503", write: bare(":status", "503", "grpc-status", "0"), code: codes.Unavailable, msg: "503"},
	}
}

// TestConformanceStatus: see statusCases.
func TestConformanceStatus(t *testing.T) {
	t.Parallel()
	cases := statusCases()
	runCases(t, newClient(t, serveCases(t, cases), Options{}), cases)
}

// informationalCases: a 1xx HEADERS frame before the response is skipped
// (operateHeaders: "In case of informational headers, return"), unless it
// ends the stream: Internal "protocol error: informational header with
// status code 100 must not have END_STREAM set".
func informationalCases() []scriptedCase {
	then := func(s *h2stream) {
		s.headers(false, ":status", "200", "content-type", "application/grpc", "x-real", "1")
		s.fr.WriteData(s.id, false, grpcBody("resp"))
		s.headers(true, "grpc-status", "0")
	}
	check := func(h metadata.MD) error {
		if h.Get("x-real") == nil || h.Get("link") != nil {
			return fmt.Errorf("header %v, want the final response's", h)
		}
		return nil
	}
	return []scriptedCase{
		{name: "100", write: func(s *h2stream) {
			s.headers(false, ":status", "100")
			then(s)
		}, want: "resp", capture: true, check: check},
		{name: "103 and 100", write: func(s *h2stream) {
			s.headers(false, ":status", "103", "link", "</a>; rel=preload")
			s.headers(false, ":status", "100")
			then(s)
		}, want: "resp", capture: true, check: check},
		{name: "100 with END_STREAM", write: func(s *h2stream) {
			s.headers(true, ":status", "100")
		}, code: codes.Internal, msg: "informational header"},
	}
}

// TestConformanceInformational: see informationalCases.
func TestConformanceInformational(t *testing.T) {
	t.Parallel()
	cases := informationalCases()
	runCases(t, newClient(t, serveCases(t, cases), Options{}), cases)
}

// gzipped compresses b.
func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Write(b)
	w.Close()
	return buf.Bytes()
}

// compressedBody is a gRPC message frame of b with the compressed flag.
func compressedBody(b []byte) []byte {
	body := grpcBody(string(b))
	body[0] = 1
	return body
}

// compressedCases: compressed responses, as grpc-go's client reads them
// (recvAndDecompress, checkRecvPayload and decompress in rpc_util.go),
// with a MaxRecvMsgSize of 1 MiB.
func compressedCases() []scriptedCase {
	respond := func(encoding string, body []byte) func(s *h2stream) {
		return func(s *h2stream) {
			fields := []string{":status", "200", "content-type", "application/grpc"}
			if encoding != "" {
				fields = append(fields, "grpc-encoding", encoding)
			}
			s.headers(false, fields...)
			for b := body; len(b) > 0; {
				n := min(len(b), defaultMaxFrame)
				s.fr.WriteData(s.id, false, b[:n])
				b = b[n:]
			}
			s.headers(true, "grpc-status", "0")
		}
	}
	big := bytes.Repeat([]byte("compressible "), 200000) // 2.6 MB
	return []scriptedCase{
		{name: "gzip", write: respond("gzip", compressedBody(gzipped([]byte("hello compressed")))), want: "hello compressed"},
		{name: "gzip, message not compressed", write: respond("gzip", grpcBody("plain")), want: "plain"},
		// checkRecvPayload: compressionMade with "" or identity.
		{name: "no grpc-encoding", write: respond("", compressedBody(gzipped([]byte("x")))), code: codes.Internal, msg: "compressed flag set with identity or empty encoding"},
		{name: "identity", write: respond("identity", compressedBody(gzipped([]byte("x")))), code: codes.Internal, msg: "compressed flag set with identity or empty encoding"},
		// checkRecvPayload on a client (isServer false): Internal; it is
		// Unimplemented only on a server.
		{name: "unknown encoding", write: respond("x-snappy", compressedBody([]byte("x"))), code: codes.Internal, msg: `Decompressor is not installed for grpc-encoding "x-snappy"`},
		// decompress: "grpc: failed to decompress the message: ..." or
		// "grpc: failed to read decompressed data: ...".
		{name: "not gzip", write: respond("gzip", compressedBody([]byte("this is not gzip"))), code: codes.Internal, msg: "decompress"},
		// decompress: the decompressed size counts against the limit:
		// ResourceExhausted "grpc: received message after decompression
		// larger than max 1048576".
		{name: "larger than max once decompressed", write: respond("gzip", compressedBody(gzipped(big))), code: codes.ResourceExhausted, msg: "larger than max"},
	}
}

// TestConformanceCompressed: see compressedCases.
func TestConformanceCompressed(t *testing.T) {
	t.Parallel()
	cases := compressedCases()
	runCases(t, newClient(t, serveCases(t, cases), Options{MaxRecvMsgSize: 1 << 20}), cases)
}

// TestConformanceReference runs grpc-go's client through the scripted
// cases, to show that their outcomes are grpc-go's.
func TestConformanceReference(t *testing.T) {
	t.Parallel()
	for name, cases := range map[string][]scriptedCase{
		"status": statusCases(), "informational": informationalCases(), "compressed": compressedCases(),
	} {
		t.Run(name, func(t *testing.T) {
			runCasesGRPCGo(t, serveCases(t, cases), cases)
		})
	}
}

// TestConformanceGzipBomb: a small compressed message that decompresses
// far past MaxRecvMsgSize fails with ResourceExhausted without the client
// decompressing all of it: grpc-go reads at most the limit plus one byte
// from the decompressor (decompress in rpc_util.go, io.LimitReader).
func TestConformanceGzipBomb(t *testing.T) {
	// 128 MiB of zeros, about 128 KiB compressed: 128 gzip members of
	// 1 MiB each (RFC 1952 section 2.2; a reader reads them as one
	// stream), compressed once, as compressing 128 MiB under -race takes
	// seconds.
	var member bytes.Buffer
	w, _ := gzip.NewWriterLevel(&member, gzip.BestCompression)
	w.Write(make([]byte, 1<<20))
	w.Close()
	bomb := compressedBody(bytes.Repeat(member.Bytes(), 128))
	p := &h2peer{respond: func(s *h2stream) {
		s.headers(false, ":status", "200", "content-type", "application/grpc", "grpc-encoding", "gzip")
		for b := bomb; len(b) > 0; {
			n := min(len(b), defaultMaxFrame)
			s.fr.WriteData(s.id, false, b[:n])
			b = b[n:]
		}
		s.headers(true, "grpc-status", "0")
	}}
	target := serveH2(t, p)
	c := newClient(t, target, Options{MaxRecvMsgSize: 1 << 20})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := invoke(t.Context(), c, "/t.S/Bomb", nil)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 32<<20 {
		t.Errorf("the call allocated %d MiB", alloc>>20)
	}
	wantStatus(t, err, codes.ResourceExhausted, "larger than max")
}

// TestConformanceGzipServer: a grpc-go server whose responses are all
// gzip-compressed (the legacy grpc.RPCCompressor option compresses
// whatever the client advertises).
func TestConformanceGzipServer(t *testing.T) {
	t.Parallel()
	//lint:ignore SA1019 the one way to make grpc-go compress regardless of grpc-accept-encoding
	_, target := startBackend(t, "tcp", nil, grpc.RPCCompressor(grpc.NewGZIPCompressor()))
	c := newClient(t, target, Options{})
	for _, n := range []int{0, 10, 100000} {
		req := pattern(n)
		call, err := invoke(t.Context(), c, mEcho, req)
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if !bytes.Equal(call.Response, req) {
			t.Fatalf("%d bytes: a response of %d bytes", n, len(call.Response))
		}
	}
}

// stuckPeer accepts connections, grants the largest windows and then
// never reads.
func stuckPeer(t testing.TB) string {
	lis, target := listen(t, "tcp")
	acceptLoop(t, lis, func(nc net.Conn) {
		var b []byte
		b = appendFrameHeader(b, 6, frameSettings, 0, 0)
		b = binary.BigEndian.AppendUint16(b, settingInitialWindowSize)
		b = binary.BigEndian.AppendUint32(b, maxWindow)
		b = appendWindowUpdate(b, 0, maxWindow-defaultWindow)
		nc.Write(b) // and never read
	})
	return target
}

// invokeAsync makes call in a goroutine; the channel gets its error and
// when it returned. The client's Close ends it at the latest.
type result struct {
	err error
	at  time.Time
}

func invokeAsync(ctx context.Context, c *Client, call *Call) <-chan result {
	ch := make(chan result, 1)
	go func() {
		err := c.Invoke(ctx, call)
		ch <- result{err, time.Now()}
	}()
	return ch
}

// deadlineSlack is how late past its deadline a call may return.
const deadlineSlack = 500 * time.Millisecond

// TestConformanceDeadlineWhileWriting: a backend that stops reading holds
// no call past its deadline, whether the call is the one blocked writing
// or queued behind it (grpc-go: the caller waits on its context while
// loopyWriter writes; it never writes itself).
func TestConformanceDeadlineWhileWriting(t *testing.T) {
	t.Parallel()
	t.Run("the writer", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, stuckPeer(t), Options{})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		start := time.Now()
		ch := invokeAsync(ctx, c, &Call{Method: "/t.S/Big", Request: make([]byte, 64<<20)}) // more than the socket buffers hold
		select {
		case r := <-ch:
			wantCode(t, r.err, codes.DeadlineExceeded)
			if d := r.at.Sub(start); d > time.Second+deadlineSlack {
				t.Fatalf("the call returned after %v, its deadline was 1s", d)
			}
		case <-time.After(time.Second + deadlineSlack):
			t.Fatalf("the call, blocked writing, has not returned %v after its deadline of 1s", deadlineSlack)
		}
	})
	t.Run("behind the writer", func(t *testing.T) {
		t.Parallel()
		c := newClient(t, stuckPeer(t), Options{})
		bigCtx, cancelBig := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancelBig()
		big := invokeAsync(bigCtx, c, &Call{Method: "/t.S/Big", Request: make([]byte, 64<<20)})
		await.Until(t, 5*time.Second, "the big call's stream, its DATA being written", func() bool { return openStreams(c) == 1 })
		for _, n := range []int{10, 1 << 20} {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			start := time.Now()
			ch := invokeAsync(ctx, c, &Call{Method: "/t.S/Small", Request: make([]byte, n)})
			select {
			case r := <-ch:
				wantCode(t, r.err, codes.DeadlineExceeded)
			case <-time.After(time.Second + deadlineSlack):
				t.Fatalf("a call of %d bytes behind a blocked writer has not returned %v after its deadline", n, time.Since(start)-time.Second)
			}
			cancel()
		}
		cancelBig()
		select {
		case r := <-big:
			if r.err == nil {
				t.Fatal("the big call succeeded")
			}
		case <-time.After(deadlineSlack):
			t.Fatal("the big call, cancelled while it was writing, did not return")
		}
	})
}

// TestConformanceNoSuccessAfterDeadline loads a backend that reads slowly
// with calls of short deadlines: every call returns by its deadline (and
// a little), and none that the backend answered after its deadline
// succeeds.
func TestConformanceNoSuccessAfterDeadline(t *testing.T) {
	t.Parallel()
	const late = 100 * time.Millisecond // a backend answer this late after the deadline cannot be a success
	var lateIDs sync.Map                // call id -> how late the backend answered it
	target, _ := serveScript(t, func(rc *rawConn) {
		if tc, ok := rc.nc.(interface{ SetReadBuffer(int) error }); ok {
			tc.SetReadBuffer(64 << 10) // no autotuning: the client's writes block
		}
		if !rc.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow}) {
			return
		}
		rc.write(func(fr *http2.Framer) { fr.WriteWindowUpdate(0, maxWindow-defaultWindow) })
		open := map[uint32][]byte{}
		for {
			f, err := rc.next()
			if err != nil {
				return
			}
			d, ok := f.(*http2.DataFrame)
			if !ok {
				continue
			}
			// The peer reads at 2 MB/s: a pace, with nothing to await.
			time.Sleep(time.Duration(d.Length) * time.Second / (2 << 20))
			body := append(open[d.StreamID], d.Data()...)
			open[d.StreamID] = body
			if !d.StreamEnded() {
				continue
			}
			delete(open, d.StreamID)
			if len(body) < 5+12 {
				continue
			}
			deadline := time.Unix(0, int64(binary.BigEndian.Uint64(body[5:])))
			id := binary.BigEndian.Uint32(body[13:])
			if d := time.Since(deadline); d > late {
				lateIDs.Store(id, d)
			}
			rc.ok(d.StreamID, []byte("ok"))
		}
	})
	c := newClient(t, target, Options{})
	type outcome struct {
		id       uint32
		err      error
		deadline time.Time
		at       time.Time
	}
	var (
		mu       sync.Mutex
		outcomes []outcome
		wg       sync.WaitGroup
		nextID   atomic.Uint32
	)
	stop := time.Now().Add(2500 * time.Millisecond)
	for range 16 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				id := nextID.Add(1)
				deadline := time.Now().Add(400 * time.Millisecond)
				req := make([]byte, 128<<10)
				binary.BigEndian.PutUint64(req, uint64(deadline.UnixNano()))
				binary.BigEndian.PutUint32(req[8:], id)
				ctx, cancel := context.WithDeadline(t.Context(), deadline)
				err := c.Invoke(ctx, &Call{Method: "/t.S/Slow", Request: req})
				at := time.Now()
				cancel()
				mu.Lock()
				outcomes = append(outcomes, outcome{id, err, deadline, at})
				mu.Unlock()
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Until(stop) + time.Second + deadlineSlack):
		t.Errorf("calls still running %v after the last deadline", time.Second+deadlineSlack)
	}
	mu.Lock()
	defer mu.Unlock()
	var ok, expired, tooLate, lateSuccess int
	for _, o := range outcomes {
		switch status.Code(o.err) {
		case codes.OK:
			ok++
			if d, isLate := lateIDs.Load(o.id); isLate {
				lateSuccess++
				if lateSuccess <= 3 {
					t.Errorf("call %d succeeded, but the backend answered it %v after its deadline", o.id, d)
				}
			}
		case codes.DeadlineExceeded:
			expired++
		default:
			t.Errorf("call %d: %v", o.id, o.err)
		}
		if d := o.at.Sub(o.deadline); d > deadlineSlack {
			tooLate++
			if tooLate <= 3 {
				t.Errorf("call %d returned %v after its deadline (%v)", o.id, d.Round(time.Millisecond), o.err)
			}
		}
	}
	t.Logf("%d calls: %d succeeded, %d expired; %d returned too late, %d succeeded after the backend answered late",
		len(outcomes), ok, expired, tooLate, lateSuccess)
}

// TestConformanceCancelledDataNotWritten: the DATA of a call cancelled
// before its frames were written is never written; RST_STREAM is (grpc-go:
// loopyWriter takes a stream's data only when it writes, and
// cleanupStreamHandler drops what is left).
func TestConformanceCancelledDataNotWritten(t *testing.T) {
	t.Parallel()
	gate := newWriteGate()
	aWaiting := make(chan struct{}) // call A has sent what its window of 100 allows
	bGranted := make(chan struct{}) // call B may send 1 GiB; the peer has stopped reading
	grantA := make(chan struct{})   // the peer is to grant A more window
	resume := make(chan struct{})   // A is cancelled: the peer reads again
	type report struct {
		after int           // bytes of A's DATA after its window grew
		rst   bool          // whether A's stream was reset
		code  http2.ErrCode // with what
	}
	reports := make(chan report, 1)
	target, _ := serveScript(t, func(rc *rawConn) {
		if rc.n != 1 {
			return
		}
		if tc, ok := rc.nc.(*net.TCPConn); ok {
			tc.SetReadBuffer(64 << 10)
		}
		if !rc.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100}) {
			return
		}
		rc.write(func(fr *http2.Framer) { fr.WriteWindowUpdate(0, 1<<30) })
		aData, bData := 0, 0
		for aData < 100 || bData < 100 {
			f, err := rc.next()
			if err != nil {
				return
			}
			if d, ok := f.(*http2.DataFrame); ok {
				switch d.StreamID {
				case 1:
					if aData += len(d.Data()); aData >= 100 {
						close(aWaiting)
					}
				case 3:
					bData += len(d.Data())
				}
			}
		}
		gate.hold.Store(true) // the client's next write, B's DATA, blocks as on full socket buffers
		rc.write(func(fr *http2.Framer) { fr.WriteWindowUpdate(3, 1<<30) })
		close(bGranted)
		select { // not reading: B's writes fill the socket buffers
		case <-grantA:
		case <-rc.stop:
			return
		}
		rc.write(func(fr *http2.Framer) { fr.WriteWindowUpdate(1, 100000) })
		select {
		case <-resume:
		case <-rc.stop:
			return
		}
		var r report
		defer func() { reports <- r }()
		rc.nc.SetReadDeadline(time.Now().Add(5 * time.Second))
		for {
			f, err := rc.next()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.DataFrame:
				if f.StreamID == 1 {
					r.after += len(f.Data())
				}
			case *http2.RSTStreamFrame:
				if f.StreamID == 1 {
					r.rst, r.code = true, f.ErrCode
					return
				}
			}
		}
	})
	c := newClient(t, target, Options{Creds: gate})
	t.Cleanup(gate.open) // before the client's Close, which waits for its writer
	ctxA, cancelA := context.WithCancel(t.Context())
	defer cancelA()
	a := invokeAsync(ctxA, c, &Call{Method: "/t.S/A", Request: make([]byte, 1<<20)})
	select {
	case <-aWaiting:
	case <-time.After(5 * time.Second):
		t.Fatal("call A sent no DATA")
	}
	ctxB, cancelB := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancelB()
	b := invokeAsync(ctxB, c, &Call{Method: "/t.S/B", Request: make([]byte, 32<<20)})
	select {
	case <-bGranted:
	case <-time.After(5 * time.Second):
		t.Fatal("call B sent no DATA")
	}
	await.Receive(t, 5*time.Second, "the writer blocked writing B's DATA", gate.held)
	close(grantA)
	await.Until(t, 5*time.Second, "call A's window to grow, the writer still blocked", func() bool {
		c.mu.Lock()
		cn := c.cur
		c.mu.Unlock()
		cn.mu.Lock()
		defer cn.mu.Unlock()
		a := cn.streams[1]
		return a != nil && a.sendWin > 0
	})
	cancelA()
	select {
	case r := <-a:
		wantCode(t, r.err, codes.Canceled)
	case <-time.After(2 * time.Second):
		t.Fatal("call A, cancelled, did not return")
	}
	gate.open()
	close(resume)
	select {
	case r := <-reports:
		if r.after != 0 {
			t.Errorf("the peer received %d bytes of DATA of call A after A was cancelled, when none had been written", r.after)
		}
		if !r.rst {
			t.Errorf("the peer saw no RST_STREAM of call A")
		} else if r.code != http2.ErrCodeCancel {
			t.Errorf("call A reset with %v, want CANCEL", r.code)
		}
	case <-time.After(8 * time.Second):
		t.Fatal("the peer did not report")
	}
	cancelB()
	<-b
}

// writeGate is plaintext credentials whose connection's writes can be
// held: once hold is set, the next write blocks until open, as a write to
// a backend that has stopped reading blocks once the socket buffers are
// full, but at a moment the test knows (held is closed then).
type writeGate struct {
	credentials.TransportCredentials
	hold     atomic.Bool
	held     chan struct{}
	released chan struct{}
	once     sync.Once
	heldOnce sync.Once
}

func newWriteGate() *writeGate {
	return &writeGate{TransportCredentials: insecure.NewCredentials(), held: make(chan struct{}), released: make(chan struct{})}
}

func (g *writeGate) ClientHandshake(ctx context.Context, authority string, nc net.Conn) (net.Conn, credentials.AuthInfo, error) {
	nc, info, err := g.TransportCredentials.ClientHandshake(ctx, authority, nc)
	return gatedConn{nc, g}, info, err
}

// open releases the held write, and lets every later one through.
func (g *writeGate) open() { g.once.Do(func() { close(g.released) }) }

type gatedConn struct {
	net.Conn
	g *writeGate
}

func (c gatedConn) Write(p []byte) (int, error) {
	if c.g.hold.Load() {
		c.g.heldOnce.Do(func() { close(c.g.held) })
		<-c.g.released
	}
	return c.Conn.Write(p)
}

// TestConformanceControlFlood: a backend that sends PINGs and SETTINGS
// without reading the client's replies cannot make the client queue
// replies without bound: the client stops reading (grpc-go: the reader
// waits in controlBuffer.throttleWithTimeout while
// maxQueuedTransportResponseFrames replies wait, internal/transport/
// controlbuf.go; http2Client.reader), or drops the connection. The peer
// sees it as its writes blocking, or failing, long before it has written
// what the socket buffers could hold.
func TestConformanceControlFlood(t *testing.T) {
	t.Parallel()
	const total = 80 << 20 // more than the socket buffers of both ends hold (tcp_rmem's maximum is 32 MiB here)
	var chunk []byte
	for i := range 1000 {
		if i%10 == 9 {
			chunk = appendFrameHeader(chunk, 0, frameSettings, 0, 0)
			continue
		}
		chunk = appendFrameHeader(chunk, 8, framePing, 0, 0)
		chunk = binary.BigEndian.AppendUint64(chunk, uint64(i))
	}
	lis, target := listen(t, "tcp")
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait)
	written := make(chan string, 1)
	acceptLoop(t, lis, func(nc net.Conn) {
		wg.Go(func() {
			if tc, ok := nc.(*net.TCPConn); ok {
				tc.SetReadBuffer(16 << 10) // the client's replies soon fill it
				tc.SetWriteBuffer(64 << 10)
			}
			var b []byte
			nc.Write(appendFrameHeader(b, 0, frameSettings, 0, 0)) // and never read
			n := 0
			for n < total {
				nc.SetWriteDeadline(time.Now().Add(2 * time.Second))
				m, err := nc.Write(chunk)
				n += m
				if err != nil {
					written <- fmt.Sprintf("the peer's writes stopped after %d MiB: %v", n>>20, err)
					return
				}
			}
			written <- ""
		})
	})
	c := newClient(t, target, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	call := invokeAsync(ctx, c, &Call{Method: "/t.S/M"})
	select {
	case s := <-written:
		if s == "" {
			t.Errorf("the client read %d MiB of PINGs and SETTINGS whose replies were not read: it queues replies without bound", total>>20)
		} else {
			t.Log(s)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the peer neither finished nor blocked")
	}
	cancel()
	<-call
}

// goAwayPeer answers every connection with SETTINGS and at once GOAWAY,
// refusing every stream, and keeps it open.
func goAwayPeer(t testing.TB) (string, *scriptPeer) {
	return serveScript(t, func(rc *rawConn) {
		rc.write(func(fr *http2.Framer) {
			fr.WriteSettings()
			fr.WriteGoAway(0, http2.ErrCodeNo, nil)
		})
		rc.discard()
	})
}

// TestConformanceGoAwayStorm: a backend that sends GOAWAY as soon as it
// has sent SETTINGS. Idle, the client does not dial again by itself
// (grpc-go: addrConn's onClose moves the subchannel to IDLE, "wait for the
// LB policy to initiate a new connection attempt", clientconn.go
// createTransport); called in a loop, it dials with a backoff (grpc-go's
// connection backoff: 1 s, x1.6, jitter 0.2, at most 120 s; backoff.
// DefaultConfig, addrConn.resetTransportAndUnlock).
func TestConformanceGoAwayStorm(t *testing.T) {
	t.Parallel()
	t.Run("idle", func(t *testing.T) {
		t.Parallel()
		target, p := goAwayPeer(t)
		c := newClient(t, target, Options{})
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		_, err := invoke(ctx, c, "/t.S/M", nil)
		cancel()
		if err == nil {
			t.Fatal("the call succeeded")
		}
		await.Holds(t, 3*time.Second, "at most 2 connections, without calls after the first", func() bool { return p.conns.Load() <= 2 })
	})
	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		target, p := goAwayPeer(t)
		c := newClient(t, target, Options{})
		var calls int
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); calls++ {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			if _, err := invoke(ctx, c, "/t.S/M", nil); err == nil {
				t.Fatal("a call succeeded")
			}
			cancel()
		}
		if n := p.conns.Load(); n > 4 {
			t.Errorf("%d connections in 3s (%d calls): want at most 4, as a backoff starting at 1s allows", n, calls)
		}
	})
}

// TestConformanceEarlyResponse: the backend answers a call before reading
// its request: the client resets the stream with NO_ERROR and sends no
// more of the request. grpc-go's operateHeaders resets only a stream still
// active ("rstStream := s.getState() == streamActive"), which a unary call
// is not once its request is queued: against this peer grpc-go's client
// sends neither RST_STREAM nor END_STREAM, leaving the stream half open,
// which grpc-js answers by resetting the connection at its stream limit
// (bridge/interop TestNodeLimits): this holds the client to RFC 9113
// section 8.1 instead.
func TestConformanceEarlyResponse(t *testing.T) {
	t.Parallel()
	type report struct {
		data int // bytes of the call's DATA
		rst  bool
		code http2.ErrCode
	}
	reports := make(chan report, 1)
	target, _ := serveScript(t, func(rc *rawConn) {
		if rc.n != 1 || !rc.handshake() {
			return
		}
		var r report
		defer func() { reports <- r }()
		for {
			f, err := rc.next()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.MetaHeadersFrame:
				rc.headers(f.StreamID, true, ":status", "200", "content-type", "application/grpc",
					"grpc-status", "8", "grpc-message", "early")
				rc.write(func(fr *http2.Framer) { // the client could send more now
					fr.WriteWindowUpdate(0, 1<<20)
					fr.WriteWindowUpdate(f.StreamID, 1<<20)
				})
				rc.nc.SetReadDeadline(time.Now().Add(2 * time.Second))
			case *http2.DataFrame:
				r.data += len(f.Data())
			case *http2.RSTStreamFrame:
				r.rst, r.code = true, f.ErrCode
				rc.nc.SetReadDeadline(time.Now().Add(200 * time.Millisecond)) // any DATA after it?
			}
		}
	})
	c := newClient(t, target, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	_, err := invoke(ctx, c, "/t.S/M", make([]byte, 1<<20))
	wantStatus(t, err, codes.ResourceExhausted, "early")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the call took %v", d)
	}
	select {
	case r := <-reports:
		if !r.rst {
			t.Error("the peer saw no RST_STREAM of the call")
		} else if r.code != http2.ErrCodeNo {
			t.Errorf("the call reset with %v, want NO_ERROR", r.code)
		}
		if r.data > defaultWindow {
			t.Errorf("the client sent %d bytes of the request after its response, more than the initial window", r.data)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the peer did not report")
	}
}

// TestConformanceHeaderListTooLarge: a response header block of a few KiB
// that decodes to more than 16 MiB (one large dynamic-table entry, indexed
// again and again) fails its call without the client decoding it all:
// grpc-go's framer (MaxHeaderListSize 16 MiB, defaultClientMaxHeaderListSize)
// marks the frame Truncated and operateHeaders fails the call with Internal
// "peer header list size exceeded limit".
func TestConformanceHeaderListTooLarge(t *testing.T) {
	value := base64.RawStdEncoding.EncodeToString(pattern(3000)) // 4000 bytes: one entry of 4041 fills the 4096-byte table
	const repeats = 20000                                        // 80 MB decoded
	p := &h2peer{respond: func(s *h2stream) {
		if s.path != "/t.S/Big" {
			s.ok(s.body)
			return
		}
		block := s.encode(":status", "200", "content-type", "application/grpc", "x-big-bin", value)
		block = append(block, bytes.Repeat([]byte{0x80 | 62}, repeats)...) // indexed: the newest dynamic entry
		writeBlock(s.fr, s.id, block, false)
		s.fr.WriteData(s.id, false, grpcBody("resp"))
		s.headers(true, "grpc-status", "0")
	}}
	target := serveH2(t, p)
	c := newClient(t, target, Options{})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	call := &Call{Method: "/t.S/Big", Capture: true}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := c.Invoke(ctx, call)
	runtime.ReadMemStats(&after)
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 48<<20 {
		t.Errorf("the call allocated %d MiB", alloc>>20)
	}
	if err == nil {
		t.Fatalf("the call succeeded, with %d values of x-big-bin", len(call.Header["x-big-bin"]))
	}
	wantStatus(t, err, codes.Internal, "header list size")
	if _, err := invoke(t.Context(), c, "/t.S/Small", []byte("x")); err != nil {
		t.Fatalf("the next call: %v", err)
	}
}

// TestConformancePeerMaxHeaderListSize: a call whose headers exceed the
// backend's SETTINGS_MAX_HEADER_LIST_SIZE fails without being sent:
// grpc-go's NewStream checks it (checkForHeaderListSize in http2_client.go)
// and fails with Internal "header list size to send violates the maximum
// size (16384 bytes) set by server". The other calls go on.
func TestConformancePeerMaxHeaderListSize(t *testing.T) {
	t.Parallel()
	var seen sync.Map // paths whose HEADERS the peer received
	p := &h2peer{
		settings:  []http2.Setting{{ID: http2.SettingMaxHeaderListSize, Val: 16384}},
		onHeaders: func(s *h2stream, _ *http2.MetaHeadersFrame) { seen.Store(s.path, true) },
		respond:   func(s *h2stream) { s.ok(s.body) },
	}
	target := serveH2(t, p)
	c := newClient(t, target, Options{})
	if _, err := invoke(t.Context(), c, "/t.S/First", nil); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Go(func() {
			for j := range 5 {
				req := []byte(fmt.Sprintf("%d.%d", i, j))
				call, err := invoke(t.Context(), c, "/t.S/Small", req)
				if err != nil || !bytes.Equal(call.Response, req) {
					t.Errorf("call %s: %q, %v", req, call.Response, err)
				}
			}
		})
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	big := &Call{Method: "/t.S/Big", Metadata: map[string][]string{"x-big": {strings.Repeat("v", 40<<10)}}}
	err := c.Invoke(ctx, big)
	wg.Wait()
	wantStatus(t, err, codes.Internal, "header list size")
	await.Holds(t, 100*time.Millisecond, "the peer not receiving the HEADERS of the call over its limit", func() bool {
		_, ok := seen.Load("/t.S/Big")
		return !ok
	})
}

// authorityEcho answers with the :authority the server received.
func authorityEcho(ctx context.Context, _ string, _ []byte, _ grpc.ServerStream) ([]byte, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	return []byte(strings.Join(md[":authority"], ",")), nil
}

// TestConformanceAuthorityFromTLS: with TLS credentials that name the
// server, :authority is that name, as grpc-go's (ClientConn.initAuthority:
// creds.Info().ServerName before the target's endpoint).
func TestConformanceAuthorityFromTLS(t *testing.T) {
	t.Parallel()
	pool, cert := certFor(t, "x.test")
	_, target := startBackend(t, "tcp", authorityEcho, grpc.Creds(credentials.NewServerTLSFromCert(&cert)))
	creds := credentials.NewTLS(&tls.Config{ServerName: "x.test", RootCAs: pool})
	// grpc-go's own client, for reference.
	cc, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	var resp rawMsg
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := cc.Invoke(ctx, mEcho, &rawMsg{}, &resp, grpc.ForceCodecV2(passCodec{})); err != nil {
		t.Fatal(err)
	}
	if string(resp.b) != "x.test" {
		t.Fatalf("grpc-go sends :authority %q", resp.b)
	}
	c := newClient(t, target, Options{Creds: creds})
	call, err := invoke(t.Context(), c, mEcho, nil)
	if err != nil {
		t.Fatal(err)
	}
	if string(call.Response) != "x.test" {
		t.Errorf(":authority %q, want %q", call.Response, "x.test")
	}
}

// TestConformanceWindowOverflow: flow-control windows past 2^31-1 (RFC
// 9113 section 6.9.1: a stream error of FLOW_CONTROL_ERROR for a stream's
// WINDOW_UPDATE, a connection error for the connection's; section 6.9.2:
// a connection error for a SETTINGS_INITIAL_WINDOW_SIZE that overflows an
// open stream's window). grpc-go does not check (loopyWriter's
// incomingWindowUpdateHandler adds what it gets): these hold the client to
// the RFC. Each call is waiting for window when its window overflows, and
// must fail at once rather than at its deadline.
func TestConformanceWindowOverflow(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		settings []http2.Setting
		sent     int // the call's DATA the peer waits for
		overflow func(fr *http2.Framer)
		codes    []codes.Code
		rst      bool // a stream error: the peer must see RST_STREAM(FLOW_CONTROL_ERROR)
		request  int  // the request's size; 0 is 200,000 bytes
	}{
		{"stream WINDOW_UPDATE", nil, defaultWindow, func(fr *http2.Framer) {
			// The connection's window is empty: the call waits.
			fr.WriteWindowUpdate(1, maxWindow)
			fr.WriteWindowUpdate(1, 1)
		}, []codes.Code{codes.ResourceExhausted}, true, 0},
		{"stream WINDOW_UPDATE, the request sent whole", nil, 105, func(fr *http2.Framer) {
			// The call waits for its reply, its window at 65430.
			fr.WriteWindowUpdate(1, maxWindow)
		}, []codes.Code{codes.ResourceExhausted}, true, 100},
		{"stream WINDOW_UPDATE in two, the request sent whole", nil, 105, func(fr *http2.Framer) {
			fr.WriteWindowUpdate(1, maxWindow-defaultWindow)
			fr.WriteWindowUpdate(1, defaultWindow)
		}, []codes.Code{codes.ResourceExhausted}, true, 100},
		{"connection WINDOW_UPDATE", []http2.Setting{{ID: http2.SettingInitialWindowSize, Val: 1000}}, 1000, func(fr *http2.Framer) {
			fr.WriteWindowUpdate(0, maxWindow) // the connection's window has 64535 left
		}, []codes.Code{codes.Unavailable, codes.Internal}, false, 0},
		{"SETTINGS_INITIAL_WINDOW_SIZE", nil, defaultWindow, func(fr *http2.Framer) {
			fr.WriteWindowUpdate(1, maxWindow-defaultWindow) // the connection's window is empty: the call waits
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: maxWindow})
		}, []codes.Code{codes.Unavailable, codes.Internal}, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			type report struct {
				rst    http2.ErrCode
				goAway http2.ErrCode
				seen   string
			}
			reports := make(chan report, 1)
			target, _ := serveScript(t, func(rc *rawConn) {
				if rc.n != 1 {
					rc.handshake()
					rc.echo()
					return
				}
				if !rc.handshake(tt.settings...) {
					return
				}
				r := report{rst: math.MaxUint32, goAway: math.MaxUint32}
				defer func() { reports <- r }()
				sent := 0
				for sent < tt.sent {
					f, err := rc.next()
					if err != nil {
						return
					}
					if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 {
						sent += len(d.Data())
					}
				}
				rc.write(tt.overflow)
				rc.nc.SetReadDeadline(time.Now().Add(4 * time.Second)) // after the test's wait for the call: closing ends it
				for {
					f, err := rc.next()
					if err != nil {
						return
					}
					switch f := f.(type) {
					case *http2.RSTStreamFrame:
						r.rst = f.ErrCode
						r.seen += fmt.Sprintf("RST_STREAM(%d, %v) ", f.StreamID, f.ErrCode)
						if tt.rst {
							return // a stream error: the connection stays open, and nothing more is awaited
						}
					case *http2.GoAwayFrame:
						r.goAway = f.ErrCode
						r.seen += fmt.Sprintf("GOAWAY(%v) ", f.ErrCode)
						return
					}
				}
			})
			c := newClient(t, target, Options{})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			size := tt.request
			if size == 0 {
				size = 200000
			}
			ch := invokeAsync(ctx, c, &Call{Method: "/t.S/M", Request: make([]byte, size)})
			select {
			case r := <-ch:
				if r.err == nil || status.Code(r.err) == codes.DeadlineExceeded {
					t.Fatalf("the call: %v", r.err)
				}
				if len(tt.codes) > 0 && !slices.Contains(tt.codes, status.Code(r.err)) {
					t.Errorf("the call: %v, want one of %v", r.err, tt.codes)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the call was still waiting 2s after its window overflowed")
			}
			select {
			case r := <-reports:
				if tt.rst && r.rst != http2.ErrCodeFlowControl {
					t.Errorf("the peer saw %q; want RST_STREAM(1, FLOW_CONTROL_ERROR)", r.seen)
				}
				if !tt.rst && r.goAway != http2.ErrCodeFlowControl {
					t.Errorf("the peer saw %q; want GOAWAY(FLOW_CONTROL_ERROR), a connection error (RFC 9113)", r.seen)
				}
			case <-time.After(6 * time.Second):
				t.Fatal("the peer did not report")
			}
		})
	}
}

// TestConformanceGoAwayWithError: a GOAWAY with an error code is a
// connection error (RFC 9113 sections 5.4.1 and 6.8): the calls it covers
// fail at once with Unavailable, though the backend leaves the connection
// open, and the next call goes to a new connection. (grpc-go's
// handleGoAway fails only the streams above last_stream_id whatever the
// code: this holds the client to the RFC.)
func TestConformanceGoAwayWithError(t *testing.T) {
	t.Parallel()
	target, p := serveScript(t, func(rc *rawConn) {
		if !rc.handshake() {
			return
		}
		if rc.n > 1 {
			rc.echo()
			return
		}
		rc.requests(func(r *rawRequest) bool {
			rc.write(func(fr *http2.Framer) { fr.WriteGoAway(r.id, http2.ErrCodeCompression, []byte("bad hpack")) })
			return false
		})
		rc.discard() // and never close
	})
	c := newClient(t, target, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	select {
	case r := <-invokeAsync(ctx, c, &Call{Method: "/t.S/M", Request: []byte("first")}):
		wantCode(t, r.err, codes.Unavailable)
	case <-time.After(2 * time.Second):
		t.Fatal("the call was still waiting 2s after a GOAWAY(COMPRESSION_ERROR) that covers it")
	}
	call, err := invoke(t.Context(), c, "/t.S/M", []byte("second"))
	if err != nil || string(call.Response) != "second" {
		t.Fatalf("the next call: %q, %v", call.Response, err)
	}
	if n := p.conns.Load(); n != 2 {
		t.Errorf("%d connections, want 2", n)
	}
}

// TestConformanceHuffman: a long metadata value of lowercase letters goes
// Huffman-coded, as grpc-go's (x/net/http2/hpack's Encoder codes every
// string whose Huffman form is shorter).
func TestConformanceHuffman(t *testing.T) {
	t.Parallel()
	rnd := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 4096)
	for i := range b {
		b[i] = 'a' + byte(rnd.IntN(26))
	}
	value := string(b)
	lengths := make(chan int, 1)
	target, _ := serveScript(t, func(rc *rawConn) {
		if !rc.handshake() {
			return
		}
		for {
			f, err := rc.next()
			if err != nil {
				return
			}
			if h, ok := f.(*http2.MetaHeadersFrame); ok {
				if !h.HeadersEnded() {
					rc.t.Errorf("the HEADERS of a 4 KiB value needed CONTINUATION")
				}
				if field(h.Fields, "x-long") != value {
					rc.t.Errorf("x-long arrived as %d bytes", len(field(h.Fields, "x-long")))
				}
				lengths <- int(h.HeadersFrame.Header().Length)
				rc.ok(h.StreamID, nil)
			}
		}
	})
	c := newClient(t, target, Options{})
	call := &Call{Method: "/t.S/M", Metadata: map[string][]string{"x-long": {value}}}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := c.Invoke(ctx, call); err != nil {
		t.Fatal(err)
	}
	n := <-lengths
	if limit := len(value) * 85 / 100; n >= limit {
		t.Errorf("a header block of %d bytes for a value of %d lowercase letters: want less than %d (Huffman: %d)",
			n, len(value), limit, hpack.HuffmanEncodeLength(value))
	}
}

// TestConformanceGroupRetryTogether: a GOAWAY refusing all 100 calls of a
// Group: their retries go out together on the new connection, which sees
// every one of them before it answers any.
func TestConformanceGroupRetryTogether(t *testing.T) {
	t.Parallel()
	const n = 100
	target, p := serveScript(t, func(rc *rawConn) {
		if !rc.handshake() {
			return
		}
		if rc.n == 1 {
			for {
				f, err := rc.next()
				if err != nil {
					return
				}
				if _, ok := f.(*http2.MetaHeadersFrame); ok {
					break
				}
			}
			rc.write(func(fr *http2.Framer) { fr.WriteGoAway(0, http2.ErrCodeNo, nil) }) // all refused
			rc.discard()
			return
		}
		var mu sync.Mutex
		var pending []*rawRequest
		released := false
		release := func() { // under mu
			released = true
			for _, r := range pending {
				rc.ok(r.id, r.body)
			}
			pending = nil
		}
		var timer *time.Timer
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		rc.requests(func(r *rawRequest) bool {
			mu.Lock()
			defer mu.Unlock()
			if released {
				rc.ok(r.id, r.body)
				return true
			}
			pending = append(pending, r)
			if timer == nil {
				timer = time.AfterFunc(3*time.Second, func() {
					mu.Lock()
					defer mu.Unlock()
					if !released {
						rc.t.Errorf("connection %d: only %d of the %d retried calls had arrived 3s after the first", rc.n, len(pending), n)
						release()
					}
				})
			}
			if len(pending) == n {
				release()
			}
			return true
		})
	})
	c := newClient(t, target, Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	var g Group
	calls := make([]*Call, n)
	for i := range calls {
		calls[i] = &Call{Method: "/t.S/M", Request: []byte(strconv.Itoa(i))}
		g.Start(ctx, c, calls[i])
	}
	g.Wait(ctx)
	for i, call := range calls {
		if call.Err != nil || string(call.Response) != strconv.Itoa(i) {
			t.Errorf("call %d: %q, %v", i, call.Response, call.Err)
		}
	}
	if k := p.conns.Load(); k != 2 {
		t.Errorf("%d connections, want 2", k)
	}
}

// TestConformanceTinyWindows: a backend whose stream windows are smaller
// than the gRPC message prefix (5 bytes), or not a multiple of it, gets
// the message in DATA frames that end inside the prefix: each call goes
// through whole. A frame that ended inside the prefix once sliced the
// request at a negative offset: a panic in the connection's writer,
// which took the bridge's process down.
func TestConformanceTinyWindows(t *testing.T) {
	t.Parallel()
	for _, w := range []uint32{1, 2, 3, 4, 5, 6, 7} {
		t.Run(fmt.Sprintf("window %d", w), func(t *testing.T) {
			target, _ := serveScript(t, func(rc *rawConn) {
				if !rc.handshake(http2.Setting{ID: http2.SettingInitialWindowSize, Val: w}) {
					return
				}
				rc.echo()
			})
			c := newClient(t, target, Options{})
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			for _, size := range []int{0, 1, 3, 17} {
				req := bytes.Repeat([]byte{'m'}, size)
				call := &Call{Method: "/t.S/M", Request: req}
				if err := c.Invoke(ctx, call); err != nil {
					t.Fatalf("a request of %d bytes: %v", size, err)
				}
				if !bytes.Equal(call.Response, req) {
					t.Errorf("a request of %d bytes: the reply %q, want the request back", size, call.Response)
				}
			}
		})
	}
}
