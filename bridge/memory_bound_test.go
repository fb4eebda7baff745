package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// The tests of this file attack the bridge's memory as a hostile client
// would (issue 13, points 4 and 5) and measure the heap of the test's own
// process, where the bridge runs. Their backend, bigBackend, sends large
// responses encoded once and shared, so that the heap measures the bridge
// and not the backend.

// rawMsg is a message as its wire bytes, in parts that are sent one after
// the other: a field's encoding can be shared between messages.
type rawMsg struct{ parts [][]byte }

// rawServerCodec sends rawMsg as it is and every other message with
// protobuf, so that reflection keeps working.
type rawServerCodec struct{}

func (rawServerCodec) Name() string { return "proto" }

func (rawServerCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*rawMsg); ok {
		bs := make(mem.BufferSlice, len(m.parts))
		for i, p := range m.parts {
			bs[i] = mem.SliceBuffer(p)
		}
		return bs, nil
	}
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(b)}, err
}

func (rawServerCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b := data.Materialize()
	if m, ok := v.(*rawMsg); ok {
		m.parts = [][]byte{b}
		return nil
	}
	return proto.Unmarshal(b, v.(proto.Message))
}

// bigBackend serves test.v1.TestService.Echo, which answers a request
// with fInt32 n with a message whose fString has n bytes, and
// ServerStream, which sends count messages whose payload has payloadSize
// bytes, and ClientStream, which reads nothing. Fields are encoded once per
// size.
type bigBackend struct {
	mu     sync.Mutex
	fields map[[2]int][]byte // by field number and size
	sent   atomic.Int64      // stream messages sent
	ended  atomic.Int64      // ServerStream calls returned
}

// field is the encoding of string field num holding n bytes.
func (b *bigBackend) field(num, n int) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := [2]int{num, n}
	if f, ok := b.fields[k]; ok {
		return f
	}
	f := protowire.AppendTag(nil, protowire.Number(num), protowire.BytesType)
	f = protowire.AppendVarint(f, uint64(n))
	f = append(f, bytes.Repeat([]byte("x"), n)...)
	b.fields[k] = f
	return f
}

func (b *bigBackend) echo(_ any, _ context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
	var in rawMsg
	if err := dec(&in); err != nil {
		return nil, err
	}
	var req testv1.AllTypes
	if err := proto.Unmarshal(in.parts[0], &req); err != nil {
		return nil, err
	}
	return &rawMsg{parts: [][]byte{b.field(14, int(req.GetFInt32()))}}, nil
}

func (b *bigBackend) serverStream(_ any, ss grpc.ServerStream) error {
	defer b.ended.Add(1)
	var in rawMsg
	if err := ss.RecvMsg(&in); err != nil {
		return err
	}
	var req testv1.StreamRequest
	if err := proto.Unmarshal(in.parts[0], &req); err != nil {
		return err
	}
	payload := b.field(2, int(req.GetPayloadSize()))
	for i := range req.GetCount() {
		seq := protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(i+1))
		if err := ss.SendMsg(&rawMsg{parts: [][]byte{seq, payload}}); err != nil {
			return err
		}
		b.sent.Add(1)
	}
	return nil
}

// holdStream is bigBackend's ClientStream: it reads nothing until the
// call is cancelled.
func holdStream(_ any, ss grpc.ServerStream) error {
	<-ss.Context().Done()
	return ss.Context().Err()
}

// newBigEnv serves bigBackend on loopback and a bridge in front of it,
// whose unary calls take the direct path when direct is true.
func newBigEnv(t testing.TB, opts bridge.Options, direct bool) (*env, *bigBackend) {
	t.Helper()
	b := &bigBackend{fields: map[[2]int][]byte{}}
	e := newEnv(t, opts, withServices(func(gs *grpc.Server) {
		gs.RegisterService(&grpc.ServiceDesc{
			ServiceName: "test.v1.TestService",
			HandlerType: (*any)(nil),
			Methods:     []grpc.MethodDesc{{MethodName: "Echo", Handler: b.echo}},
			Streams: []grpc.StreamDesc{
				{StreamName: "ServerStream", Handler: b.serverStream, ServerStreams: true},
				{StreamName: "ClientStream", Handler: holdStream, ClientStreams: true},
			},
			Metadata: "test.proto",
		}, b)
	}),
		// A fixed window, so that a stream the backend does not read holds
		// the bridge back after a known amount.
		withServer(grpc.ForceServerCodecV2(rawServerCodec{}), grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(16<<20)),
		withDial(bridge.BackendDialOptions(opts)...),
		directIf(direct))
	return e, b
}

// heapWatch samples the heap of the process until it is stopped, with the
// collector made eager so that the peak measures what is kept alive rather
// than garbage not yet collected.
type heapWatch struct {
	base, allocs0 uint64 // heap objects after a collection, bytes allocated so far
	peak          atomic.Uint64
	stop, done    chan struct{}
}

var heapMetrics = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/allocs:bytes"}

func readHeap() (objects, allocs uint64) {
	s := make([]metrics.Sample, len(heapMetrics))
	for i, n := range heapMetrics {
		s[i].Name = n
	}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func watchHeap(t testing.TB) *heapWatch {
	t.Helper()
	prev := debug.SetGCPercent(10)
	t.Cleanup(func() { debug.SetGCPercent(prev) })
	runtime.GC()
	h := &heapWatch{stop: make(chan struct{}), done: make(chan struct{})}
	h.base, h.allocs0 = readHeap()
	h.peak.Store(h.base)
	go func() {
		defer close(h.done)
		s := make([]metrics.Sample, 1)
		s[0].Name = heapMetrics[0]
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-h.stop:
				return
			case <-tick.C:
			}
			metrics.Read(s)
			if v := s[0].Value.Uint64(); v > h.peak.Load() {
				h.peak.Store(v)
			}
		}
	}()
	return h
}

// end stops the sampling and returns how far the heap rose above its
// starting point at its peak, and how many bytes were allocated meanwhile.
func (h *heapWatch) end() (peak, allocated int64) {
	close(h.stop)
	<-h.done
	_, allocs := readHeap()
	return int64(h.peak.Load()) - int64(h.base), int64(allocs - h.allocs0)
}

// live returns how far the heap is above its starting point after a
// collection.
func (h *heapWatch) live() int64 {
	runtime.GC()
	objects, _ := readHeap()
	return int64(objects) - int64(h.base)
}

// legitClients calls Echo over HTTP in a loop from a few clients until
// the returned function is called, which fails t unless every call was
// answered with its result.
func legitClients(t *testing.T, e *env) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	client := &http.Client{Timeout: 20 * time.Second}
	var ok, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fInt32":10},"id":%d}`, i)
			for ctx.Err() == nil {
				resp, err := client.Post(e.url, "application/json", strings.NewReader(body))
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"result":{"fString":"xxxxxxxxxx"}`)) {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("HTTP %d %s", resp.StatusCode, b))
					continue
				}
				ok.Add(1)
				time.Sleep(5 * time.Millisecond) // pacing, not a wait: a legitimate client's rate
			}
		})
	}
	return func() {
		t.Helper()
		cancel()
		wg.Wait()
		client.CloseIdleConnections()
		t.Logf("legitimate clients: %d calls answered, %d failed", ok.Load(), failed.Load())
		if failed.Load() > 0 || ok.Load() == 0 {
			t.Errorf("legitimate clients: %d answered, %d failed (first: %v); want all answered", ok.Load(), failed.Load(), firstErr.Load())
		}
	}
}

// postBig posts body and reads the reply into buf, made beforehand.
func postBig(t *testing.T, url, body string, buf *bytes.Buffer) (int, []byte) {
	t.Helper()
	resp, err := testClient.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, buf.Bytes()
}

// checkBatchRefusals checks the reply to a batch of n calls under the
// budget of max_response_bytes: the members that fit have results, the
// others the documented refusal, and the body stays within the budget
// plus one short error per member. With some, some members must fit.
func checkBatchRefusals(t *testing.T, reply []byte, n int, budget int64, some bool) (results int) {
	t.Helper()
	if int64(len(reply)) > budget+int64(n)*200 {
		t.Errorf("got a reply of %d bytes, want at most max_response_bytes plus one short error per member", len(reply))
	}
	var members []map[string]any
	if err := json.Unmarshal(reply, &members); err != nil {
		t.Fatalf("reply is not a batch reply: %v (%.200s)", err, reply)
	}
	if len(members) != n {
		t.Fatalf("got %d replies, want %d", len(members), n)
	}
	want := fmt.Sprintf("the replies of the batch would be larger than max_response_bytes (%d bytes)", budget)
	for _, m := range members {
		if _, ok := m["result"]; ok {
			results++
			continue
		}
		e, _ := m["error"].(map[string]any)
		d, _ := e["data"].(map[string]any)
		if e["code"] != 8.0 || e["message"] != want || d["status"] != "RESOURCE_EXHAUSTED" {
			t.Fatalf("got error %v, want code 8 %q", e, want)
		}
	}
	if results == 0 && some || results == n {
		t.Errorf("%d of %d members got their result, want some but not all", results, n)
	}
	return results
}

// TestBatchMemoryBounded sends one small request of 100 calls that each
// return 3 MB, under max_response_bytes 8 MiB (issue 13, point 5): the
// reply is refused member by member as documented, and the bridge's heap
// stays near the budget while other clients keep being answered. On the
// direct path a response is refused from its length prefix, before it is
// read; grpc-go reads each response whole before the bridge sees its size,
// so there the members running at once (batch_parallelism) hold one each.
func TestBatchMemoryBounded(t *testing.T) {
	const members, size, budget = 100, 3 << 20, 8 << 20
	for _, tt := range []struct {
		name        string
		direct      bool
		parallelism int
	}{
		{"direct path", true, 0},
		{"grpc-go path with batch_parallelism 4", false, 4},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newBigEnv(t, bridge.Options{MaxResponseBytes: budget, Limits: bridge.Limits{BatchParallelism: tt.parallelism}}, tt.direct)
			calls := make([]string, members)
			for i := range calls {
				calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","method":"test.v1.TestService.Echo","params":{"fInt32":%d},"id":%d}`, size, i+1)
			}
			body := "[" + strings.Join(calls, ",") + "]"
			stop := legitClients(t, e)
			buf := bytes.NewBuffer(make([]byte, 0, budget+members*200))
			h := watchHeap(t)
			code, reply := postBig(t, e.url, body, buf)
			peak, allocated := h.end()
			stop()
			t.Logf("request of %d bytes, %d calls of %d MiB each: reply of %.1f MiB; heap peak +%.1f MiB, %.1f MiB allocated",
				len(body), members, size>>20, mb(int64(len(reply))), mb(peak), mb(allocated))
			if code != http.StatusOK {
				t.Fatalf("got HTTP %d, want 200", code)
			}
			checkBatchRefusals(t, reply, members, budget, true)
			if peak > 40<<20 {
				t.Errorf("heap rose by %.1f MiB, want under 40 MiB for a budget of 8 MiB", mb(peak))
			}
		})
	}
}

// TestBatchStreamsMemoryBounded sends one request of 100 server streams of
// 3 messages of 2 MB, under max_response_bytes 8 MiB (issue 13, point 5):
// collected streams stop at the batch's remaining budget.
func TestBatchStreamsMemoryBounded(t *testing.T) {
	const members, count, size, budget = 100, 3, 2 << 20, 8 << 20
	e, _ := newBigEnv(t, bridge.Options{MaxResponseBytes: budget}, true)
	calls := make([]string, members)
	for i := range calls {
		calls[i] = fmt.Sprintf(`{"jsonrpc":"2.0","method":"test.v1.TestService.ServerStream","params":{"count":%d,"payloadSize":%d},"id":%d}`, count, size, i+1)
	}
	body := "[" + strings.Join(calls, ",") + "]"
	stop := legitClients(t, e)
	buf := bytes.NewBuffer(make([]byte, 0, budget+members*200))
	h := watchHeap(t)
	code, reply := postBig(t, e.url, body, buf)
	peak, allocated := h.end()
	stop()
	t.Logf("request of %d bytes, %d streams of %d x %d MiB: reply of %.1f MiB; heap peak +%.1f MiB, %.1f MiB allocated",
		len(body), members, count, size>>20, mb(int64(len(reply))), mb(peak), mb(allocated))
	if code != http.StatusOK {
		t.Fatalf("got HTTP %d, want 200", code)
	}
	// Streams collected at once take their messages as they come: those
	// still running when the budget runs out are all refused.
	checkBatchRefusals(t, reply, members, budget, false)
	if peak > 40<<20 {
		t.Errorf("heap rose by %.1f MiB, want under 40 MiB for a budget of 8 MiB", mb(peak))
	}
}

// TestStreamWSMemoryBounded opens four server streams of 64 messages of
// 3 MB on a WebSocket connection in four small frames and never reads
// (issue 13, point 4): the bridge stops reading the backend once the
// connection's buffer is full, instead of buffering the streams, while
// other clients keep being answered.
func TestStreamWSMemoryBounded(t *testing.T) {
	const streams, count, size = 4, 64, 3 << 20
	e, backend := newBigEnv(t, bridge.Options{Streaming: bridge.Streaming{WSPingInterval: -1}}, true)
	stop := legitClients(t, e)
	h := watchHeap(t)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	attacker, _, err := websocket.Dial(ctx, e.url+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer attacker.CloseNow()
	for i := range streams {
		frame := request(serverStream, fmt.Sprintf(`{"count":%d,"payloadSize":%d}`, count, size), i+1)
		if err := attacker.Write(ctx, websocket.MessageText, []byte(frame)); err != nil {
			t.Fatal(err)
		}
	}
	// Let the bridge buffer all it will, and check that it holds. The
	// bound is a "never" (await.Holds), sampled once a second because
	// each sample collects garbage.
	var live int64
	for range 3 {
		time.Sleep(time.Second)
		live = max(live, h.live())
	}
	peak, _ := h.end()
	sent := backend.sent.Load()

	// A well-behaved WebSocket client on another connection is served.
	w := dialWS(t, e)
	id := w.open(serverStream, `{"count":3,"payloadSize":10}`, 1)
	if msgs, end := w.drain(id); len(msgs) != 3 || end != nil {
		t.Errorf("well-behaved stream: got %d messages and end %v, want 3 and success", len(msgs), end)
	}
	stop()
	t.Logf("%d streams of %d x %d MiB never read: the backend sent %d messages; heap +%.1f MiB after GC, peak +%.1f MiB",
		streams, count, size>>20, sent, mb(live), mb(peak))
	if live > 32<<20 {
		t.Errorf("the heap holds %.1f MiB more after GC, want under 32 MiB", mb(live))
	}
	if sent > streams*count/2 {
		t.Errorf("the backend sent %d of %d messages to a client that reads none, want it held back", sent, streams*count)
	}
}

// TestReplyBudget: unary responses and collected streams take their share
// of max_response_bytes as they arrive, on both call paths, and what does
// not fit is refused with the documented errors.
func TestReplyBudget(t *testing.T) {
	stream := func(id int) string {
		return request(serverStream, `{"count":3,"payloadSize":200}`, id) // about 720 bytes as a reply
	}
	hello := request("helloworld.Greeter.SayHello", `{"name":"a"}`, 9)
	batchMsg := "the replies of the batch would be larger than max_response_bytes (2000 bytes)"
	singleMsg := "the reply is larger than max_response_bytes (2000 bytes)"
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			opts := bridge.Options{MaxResponseBytes: 2000, Limits: bridge.Limits{BatchParallelism: 1}}
			var e *env
			if direct {
				e = newEnv(t, opts)
			} else {
				e = newEnv(t, opts, onBufconn())
			}
			// One at a time: the small unary call and two streams fit,
			// the third stream does not.
			code, body := e.post(t, "["+hello+","+stream(1)+","+stream(2)+","+stream(3)+"]")
			if code != http.StatusOK {
				t.Fatalf("got HTTP %d %s", code, body)
			}
			replies := decode(t, body).([]any)
			for i, want := range []string{"", "", "", batchMsg} {
				r := replies[i].(map[string]any)
				e, _ := r["error"].(map[string]any)
				switch {
				case want == "" && e != nil:
					t.Errorf("member %d: got %v, want a result", i, r)
				case want != "" && (e == nil || e["message"] != want || errCode(t, r) != 8):
					t.Errorf("member %d: got %v, want error 8 %q", i, r, want)
				}
			}
			// A single stream is held to max_response_bytes too, before
			// max_stream_bytes.
			r := e.call(t, request(serverStream, `{"count":10,"payloadSize":200}`, 1))
			if eo, _ := r["error"].(map[string]any); errCode(t, r) != 8 || eo["message"] != singleMsg {
				t.Errorf("single stream: got %v, want error 8 %q", r, singleMsg)
			}
			r = e.call(t, request("test.v1.TestService.Echo", `{"fString":"`+strings.Repeat("x", 2000)+`"}`, 1))
			if eo, _ := r["error"].(map[string]any); errCode(t, r) != 8 || eo["message"] != singleMsg {
				t.Errorf("single call: got %v, want error 8 %q", r, singleMsg)
			}
			// The budget is the request's: the next one has all of it.
			if r := e.call(t, stream(1)); errCode(t, r) != 0 {
				t.Errorf("the next request: got %v, want a result", r)
			}
		})
	}
}

// TestStreamWSBufferBytes: a stream stops reading its backend once
// stream_buffer_bytes of it wait for the client, and a connection once
// ws_buffer_bytes of its streams' do; a client that reads nothing for
// slow_client_timeout gets SLOW_CLIENT naming the limit it hit.
func TestStreamWSBufferBytes(t *testing.T) {
	const count, size = 64, 1 << 20
	tests := []struct {
		name    string
		opts    bridge.Options
		streams int
		limit   string
		value   string
	}{
		{"stream_buffer_bytes", bridge.Options{}, 1, "stream_buffer_bytes", "1048576"},
		{"ws_buffer_bytes", bridge.Options{Streaming: bridge.Streaming{StreamBufferBytes: 64 << 20, WSBufferBytes: 4 << 20}}, 6, "ws_buffer_bytes", "4194304"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkLeaks(t)
			tt.opts.SlowClientTimeout, tt.opts.WSPingInterval = 500*time.Millisecond, -1
			e, backend := newBigEnv(t, tt.opts, true)
			w := dialWS(t, e)
			w.c.SetReadLimit(4 << 20)
			// Opened in one batch: no stream sends before its reply.
			calls := make([]string, tt.streams)
			for i := range calls {
				calls[i] = request(serverStream, fmt.Sprintf(`{"count":%d,"payloadSize":%d}`, count, size), i+1)
			}
			w.send("[" + strings.Join(calls, ",") + "]")
			if b, err := w.recvRaw(); err != nil || !bytes.Contains(b, []byte(`"result":{"stream":"s1"}`)) {
				t.Fatalf("got %.300s, %v, want the batch's reply", b, err)
			}
			// Reading nothing until slow_client_timeout has passed and the
			// bridge has ended every stream, cancelling its backend call.
			await.Until(t, 20*time.Second, "the bridge to end the streams of a client that reads nothing", func() bool {
				return backend.ended.Load() == int64(tt.streams)
			})
			sent := backend.sent.Load()
			t.Logf("%d streams of %d x %d MiB not read: the backend sent %d messages", tt.streams, count, size>>20, sent)
			// What the sockets hold, the window per stream and one message
			// in the backend's own buffers: far fewer than all.
			if sent > int64(tt.streams*count/2) {
				t.Errorf("the backend sent %d of %d messages, want it held back", sent, tt.streams*count)
			}
			ends := 0
			for ends < tt.streams {
				m := w.recv()
				p, _ := m["params"].(map[string]any)
				if m["method"] != "rpc.stream.end" {
					continue
				}
				ends++
				end, _ := p["error"].(map[string]any)
				d, _ := end["data"].(map[string]any)
				details, _ := d["details"].([]any)
				var meta map[string]any
				if len(details) == 1 {
					meta, _ = details[0].(map[string]any)["metadata"].(map[string]any)
				}
				if errReason(end) != "SLOW_CLIENT" || meta["limit"] != tt.limit || meta["value"] != tt.value {
					t.Errorf("stream %v: got end %v, want SLOW_CLIENT with limit %s, value %s", p["stream"], end, tt.limit, tt.value)
				}
			}
			// The connection still works.
			w.result(request("test.v1.TestService.Echo", `{"fInt32":3}`, 100))
		})
	}
}

// TestStreamWSSendBytes: messages of rpc.stream.send queue for a backend
// that does not read them only up to stream_buffer_bytes; past it they are
// refused with SEND_BUFFER_FULL naming the limit.
func TestStreamWSSendBytes(t *testing.T) {
	checkLeaks(t)
	e, _ := newBigEnv(t, bridge.Options{Streaming: bridge.Streaming{WSPingInterval: -1}}, true)
	w := dialWS(t, e)
	id := w.open(clientStream, "", 1)
	msg := fmt.Sprintf(`{"text":%q}`, strings.Repeat("x", 100<<10))
	accepted := 0
	for i := range 200 {
		reply, _ := w.call(control("rpc.stream.send", id, msg, 10+i))
		if reply["result"] == true {
			accepted++
			continue
		}
		e, _ := reply["error"].(map[string]any)
		d, _ := e["data"].(map[string]any)
		details, _ := d["details"].([]any)
		var meta map[string]any
		if len(details) == 1 {
			meta, _ = details[0].(map[string]any)["metadata"].(map[string]any)
		}
		if errReason(e) != "SEND_BUFFER_FULL" || meta["limit"] != "stream_buffer_bytes" || meta["value"] != "1048576" {
			t.Fatalf("send %d: got %v, want SEND_BUFFER_FULL with limit stream_buffer_bytes, value 1048576", i, e)
		}
		break
	}
	t.Logf("%d sends of 100 KiB accepted for a backend that reads none", accepted)
	// The queue, and what the windows and the stream's writer hold.
	if accepted == 0 || accepted > 20 {
		t.Errorf("%d sends of 100 KiB accepted, want about 1 MiB of them", accepted)
	}
	if got := w.result(control("rpc.stream.cancel", id, "", 2)); got != true {
		t.Errorf("cancel: got %v, want true", got)
	}
}
