package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	demov1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/demo/v1"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"google.golang.org/grpc"
)

// TestLiveForms: a server stream and a bidi stream asked for live, in
// each form and on both call paths, answer 200 with the headers that turn
// caches and proxy buffers off, one rpc.stream.message notification per
// response naming the request's id, then the reply {"messages": N}.
func TestLiveForms(t *testing.T) {
	checkLeaks(t)
	forBothPaths(t, func(t *testing.T, direct bool) {
		e := newEnvPath(t, bridge.Options{}, direct)
		client := newHTTPClient(t)
		for _, accept := range []string{acceptSSE, acceptNDJSON, acceptJSONL} {
			for _, tc := range []struct {
				name, method, params, id string
				want                     []string
			}{
				{"server stream", serverStream, `{"count":3,"payloadSize":2}`, `7`,
					[]string{`{"seq":1,"payload":"xx"}`, `{"seq":2,"payload":"xx"}`, `{"seq":3,"payload":"xx"}`}},
				{"server stream, a string id", serverStream, `{"count":1}`, `"w-1"`, []string{`{"seq":1}`}},
				{"server stream, none", serverStream, `{}`, `8`, nil},
				{"bidi", bidiStream, `[{"seq":1,"text":"a"},{"seq":2,"text":"b"}]`, `9`,
					[]string{`{"seq":1,"text":"a"}`, `{"seq":2,"text":"b"}`}},
			} {
				t.Run(accept+"/"+tc.name, func(t *testing.T) {
					body := fmt.Sprintf(`{"jsonrpc":"2.0","method":%q,"params":%s,"id":%s}`, tc.method, tc.params, tc.id)
					resp := postLive(t, client, e.url, accept, body, nil)
					checkLiveHead(t, resp, accept)
					msgs := readLive(t, resp, accept).rest(waitTimeout)
					if len(msgs) != len(tc.want)+1 {
						t.Fatalf("got %d messages %v, want %d notifications and the reply", len(msgs), msgs, len(tc.want))
					}
					for i, want := range tc.want {
						notificationOf(t, msgs[i].msg, tc.id)
						want = `{"jsonrpc":"2.0","method":"rpc.stream.message","params":{"stream":` + tc.id + `,"message":` + want + `}}`
						if msgs[i].raw != want {
							t.Errorf("message %d: got %s, want %s", i, msgs[i].raw, want)
						}
					}
					if want := fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"messages":%d}}`, tc.id, len(tc.want)); msgs[len(tc.want)].raw != want {
						t.Errorf("reply: got %s, want %s", msgs[len(tc.want)].raw, want)
					}
				})
			}
		}
	})
}

// liveLatency bounds the time from the backend sending a message to the
// client receiving it.
const liveLatency = 50 * time.Millisecond

// TestLiveLatency: WatchNotes with follow, asked for live through each
// HTTP front (h1, net/http's HTTP/1.1, h2c, HTTP/2 over TLS), with and
// without Accept-Encoding: gzip, sends the note that existed at once,
// before the stream ends, and every note created afterwards within
// liveLatency of the backend's send (see withinLatency); the reply is
// never compressed, and its head comes at once, before any message.
func TestLiveLatency(t *testing.T) {
	checkLeaks(t)
	clock := new(sendClock)
	e := newEnv(t, bridge.Options{}, withServer(grpc.StreamInterceptor(clock.intercept)))
	notes := demov1.NewNotesClient(e.conn)
	n := 0
	var worst time.Duration
	for _, f := range liveFronts(t, e.bridge) {
		for _, enc := range []string{"identity", "gzip"} {
			for _, accept := range []string{acceptSSE, acceptNDJSON} {
				t.Run(f.name+"/"+enc+"/"+accept, func(t *testing.T) {
					n++
					tag := fmt.Sprintf("latency-%d", n)
					// The head comes at once, before any message (well
					// before the first keepalive): a client sees the
					// stream open.
					headCtx, headCancel := context.WithCancel(t.Context())
					start := time.Now()
					resp := postLiveCtx(t, headCtx, f.client, f.url, accept, fmt.Sprintf(`{"jsonrpc":"2.0","method":"demo.v1.Notes.WatchNotes","params":{"tags":["%s-none"],"follow":true},"id":1}`, tag), http.Header{"Accept-Encoding": {enc}})
					if d := time.Since(start); d > time.Second {
						t.Errorf("the head of a stream with no message yet came after %s, want it at once", d)
					}
					checkLiveHead(t, resp, accept)
					headCancel()
					first, err := notes.CreateNote(t.Context(), &demov1.CreateNoteRequest{Note: &demov1.Note{Title: "before", Tags: []string{tag}}})
					if err != nil {
						t.Fatal(err)
					}
					ctx, cancel := context.WithCancel(t.Context())
					defer cancel()
					body := fmt.Sprintf(`{"jsonrpc":"2.0","method":"demo.v1.Notes.WatchNotes","params":{"tags":[%q],"follow":true},"id":1}`, tag)
					resp = postLiveCtx(t, ctx, f.client, f.url, accept, body, http.Header{"Accept-Encoding": {enc}})
					checkLiveHead(t, resp, accept)
					if resp.Proto != f.proto {
						t.Errorf("served over %s, want %s", resp.Proto, f.proto)
					}
					lr := readLive(t, resp, accept)
					if got := notificationOf(t, lr.next(waitTimeout).msg, "1")["id"]; got != first.GetId() {
						t.Fatalf("first message is note %v, want %s", got, first.GetId())
					}
					for i := range 3 {
						worst = max(worst, withinLatency(t, fmt.Sprint("note ", i), func() time.Duration {
							note, err := notes.CreateNote(t.Context(), &demov1.CreateNoteRequest{Note: &demov1.Note{Title: fmt.Sprint("after ", i), Tags: []string{tag}}})
							if err != nil {
								t.Fatal(err)
							}
							ev := lr.next(waitTimeout)
							if got := notificationOf(t, ev.msg, "1")["id"]; got != note.GetId() {
								t.Fatalf("got note %v, want %s", got, note.GetId())
							}
							return clock.since(t, note.GetId(), ev.at)
						}))
					}
				})
			}
		}
	}
	t.Logf("slowest message: %s after the backend sent it", worst)
}

// postLiveCtx is postLive with the request's context.
func postLiveCtx(t testing.TB, ctx context.Context, client *http.Client, url, accept, body string, h http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// TestLiveBackendError: a backend that fails after 3 messages gives 3
// notifications, then the error, exactly as the same call answered in
// one reply (which drops the messages) gives it; on both paths.
func TestLiveBackendError(t *testing.T) {
	checkLeaks(t)
	forBothPaths(t, func(t *testing.T, direct bool) {
		e := newEnvPath(t, bridge.Options{}, direct)
		client := newHTTPClient(t)
		for _, tc := range []struct{ name, method, params string }{
			{"server stream", serverStream, `{"count":5,"failCode":5,"failAfter":3}`},
			{"bidi", bidiStream, `[{"seq":1},{"seq":2},{"seq":3},{"seq":4,"failCode":9},{"seq":5}]`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				body := request(tc.method, tc.params, 3)
				_, collected := e.post(t, body)
				if !strings.Contains(string(collected), `"error"`) {
					t.Fatalf("collected: got %s, want an error", collected)
				}
				for _, accept := range []string{acceptSSE, acceptNDJSON} {
					resp := postLive(t, client, e.url, accept, body, nil)
					checkLiveHead(t, resp, accept)
					msgs := readLive(t, resp, accept).rest(waitTimeout)
					if len(msgs) != 4 {
						t.Fatalf("%s: got %d messages, want 3 notifications and the error", accept, len(msgs))
					}
					for i := range 3 {
						if seq := notificationOf(t, msgs[i].msg, "3")["seq"]; fmt.Sprint(seq) != fmt.Sprint(i+1) {
							t.Errorf("%s: message %d has seq %v", accept, i, seq)
						}
					}
					if msgs[3].raw != string(collected) {
						t.Errorf("%s: got the end %s, want the collected call's error %s", accept, msgs[3].raw, collected)
					}
				}
			})
		}
	})
}

// TestLiveNotAsked: without a live form in Accept (none, application/json,
// */*, a live form refused with q=0 or preferred less than JSON), and for
// what is not a single call with an id of a server or bidi stream (a
// batch, a notification, a unary or client-streaming method) or fails
// before its stream opens (unknown method, bad params), the reply is
// today's, byte for byte, with its Content-Type.
func TestLiveNotAsked(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	client := newHTTPClient(t)
	today := func(body string) (int, string, []byte) {
		resp := postLive(t, client, e.url, "", body, nil)
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), b
	}
	stream := request(serverStream, `{"count":2}`, 1)
	if _, _, b := today(stream); string(b) != `{"jsonrpc":"2.0","id":1,"result":[{"seq":1},{"seq":2}]}` {
		t.Fatalf("the collected answer is %s", b)
	}
	for _, tc := range []struct{ name, accept, body string }{
		{"no live form: application/json", "application/json", stream},
		{"no live form: */*", "*/*", stream},
		{"no live form: text/*", "text/*, application/*", stream},
		{"refused: q=0", "text/event-stream;q=0, application/json", stream},
		{"refused: q=0.000", "application/x-ndjson; q=0.000", stream},
		{"JSON preferred", "application/json, text/event-stream;q=0.9", stream},
		{"JSON preferred, jsonl", "application/jsonl;q=0.5, application/json;q=0.8", stream},
		{"a batch", acceptSSE, "[" + stream + "," + request(serverStream, `{"count":1}`, 2) + "]"},
		{"a batch of one", acceptSSE, "[" + stream + "]"},
		{"a notification", acceptSSE, `{"jsonrpc":"2.0","method":"` + serverStream + `","params":{"count":2}}`},
		{"a unary method", acceptSSE, request("helloworld.Greeter.SayHello", `{"name":"x"}`, 1)},
		{"a client stream", acceptNDJSON, request(clientStream, `[{"seq":1},{"seq":2}]`, 1)},
		{"an unknown method", acceptSSE, request("no.such.Method", `{}`, 1)},
		{"bad params", acceptSSE, request(serverStream, `{"count":"many"}`, 1)},
		{"params of a bidi stream not by position", acceptSSE, request(bidiStream, `{"seq":1}`, 1)},
		{"an invalid request", acceptSSE, `{"jsonrpc":"2.0","method":"` + serverStream + `","id":1,"extra":true}`},
		{"not JSON", acceptSSE, `{"jsonrpc":`},
		{"rpc.stream.cancel", acceptSSE, request("rpc.stream.cancel", `{"stream":"s1"}`, 1)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, ct, want := today(tc.body)
			resp := postLive(t, client, e.url, tc.accept, tc.body, nil)
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != code || resp.Header.Get("Content-Type") != ct || string(got) != string(want) {
				t.Errorf("got HTTP %d %q %s\nwant HTTP %d %q %s", resp.StatusCode, resp.Header.Get("Content-Type"), got, code, ct, want)
			}
			if resp.Header.Get("X-Accel-Buffering") != "" {
				t.Errorf("a reply that is not live has X-Accel-Buffering: %s", resp.Header.Get("X-Accel-Buffering"))
			}
		})
	}
}

// TestAcceptLive: which Accept values ask for which live form.
func TestAcceptLive(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	client := newHTTPClient(t)
	body := request(serverStream, `{"count":1}`, 1)
	for _, tc := range []struct {
		accept []string
		want   string // the Content-Type of the reply
	}{
		{[]string{"text/event-stream"}, acceptSSE},
		{[]string{"TEXT/Event-Stream"}, acceptSSE},
		{[]string{"application/json, text/event-stream"}, acceptSSE}, // as MCP clients send it
		{[]string{"application/json", "text/event-stream"}, acceptSSE},
		{[]string{"text/event-stream;q=0.5, application/x-ndjson"}, acceptNDJSON},
		{[]string{"application/x-ndjson, text/event-stream"}, acceptNDJSON},
		{[]string{"application/jsonl; q=1.0"}, acceptJSONL},
		{[]string{"application/json;q=0.2, text/event-stream;q=0.3"}, acceptSSE},
		{[]string{" text/event-stream ; charset=utf-8 ;q=0.9 "}, acceptSSE},
		{[]string{"*/*, text/event-stream"}, acceptSSE},
		{[]string{"text/event-stream;q=2"}, "application/json"}, // not a qvalue
		{[]string{"text/event-stream;q=0.1234"}, "application/json"},
		{[]string{"text/event-streams"}, "application/json"},
		{[]string{""}, "application/json"},
	} {
		resp := postLive(t, client, e.url, "", body, http.Header{"Accept": tc.accept})
		io.Copy(io.Discard, resp.Body)
		if got := resp.Header.Get("Content-Type"); got != tc.want {
			t.Errorf("Accept %q: got %s, want %s", tc.accept, got, tc.want)
		}
	}
}

// TestLiveDisconnect: a client that goes away in the middle of a live
// stream cancels the backend stream within a second, through each HTTP
// front, and frees its max_in_flight slot: with one slot, the next call
// is answered.
func TestLiveDisconnect(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{MaxInFlight: 1})
	for i, f := range liveFronts(t, e.bridge) {
		t.Run(f.name, func(t *testing.T) {
			key := fmt.Sprintf("gone-%d", i)
			ctx, cancel := context.WithCancel(t.Context())
			// The last call of the subtest before gives its slot back just
			// after its client has read its reply: until then this one is
			// refused (429), as any call would be.
			var resp *http.Response
			await.Until(t, waitTimeout, "the slot of the subtest before", func() bool {
				resp = postLiveCtx(t, ctx, f.client, f.url, acceptSSE, request(serverStream, `{"count":2,"hold":true,"key":"`+key+`"}`, 1), nil)
				if resp.StatusCode == http.StatusTooManyRequests {
					io.Copy(io.Discard, resp.Body)
					return false
				}
				return true
			})
			checkLiveHead(t, resp, acceptSSE)
			lr := readLive(t, resp, acceptSSE)
			lr.next(waitTimeout)
			lr.next(waitTimeout)
			// The slot is taken while the stream runs.
			if code, b := postTo(t, f.client, f.url, request("helloworld.Greeter.SayHello", `{}`, 2)); code != http.StatusTooManyRequests {
				t.Fatalf("a call while the stream holds the one slot: got HTTP %d %s, want 429", code, b)
			}
			start := time.Now()
			cancel()
			select {
			case <-e.backend.Cancelled(key):
			case <-time.After(time.Second):
				t.Fatalf("the backend stream was not cancelled within 1s of the client going away")
			}
			t.Logf("the backend saw its stream cancelled %s after the client went away", time.Since(start))
			await.Until(t, time.Second-time.Since(start), "the slot free within 1s of the client going away", func() bool {
				code, _ := postTo(t, f.client, f.url, request("helloworld.Greeter.SayHello", `{}`, 2))
				return code == http.StatusOK
			})
		})
	}
}

// postTo posts body with client and returns the status and the reply.
func postTo(t testing.TB, client *http.Client, url, body string) (int, []byte) {
	t.Helper()
	resp, err := client.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// TestLiveSlowClient: a client that reads nothing holds the backend back
// through each HTTP front: the bridge keeps at most stream_buffer
// messages waiting, the heap stays bounded where the backend would send
// a gigabyte, and after slow_client_timeout the backend stream is
// cancelled; the client that then reads gets the messages in order and,
// last, the error 8 SLOW_CLIENT.
func TestLiveSlowClient(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{StreamBuffer: 8, SlowClientTimeout: 100 * time.Millisecond}})
	for i, f := range liveFronts(t, e.bridge) {
		t.Run(f.name, func(t *testing.T) {
			key := fmt.Sprintf("slow-%d", i)
			var before runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			const n, size = 1_000_000, 1024 // 1 GB if buffered whole
			resp := postLive(t, f.client, f.url, acceptNDJSON, request(serverStream, fmt.Sprintf(`{"count":%d,"payloadSize":%d,"key":%q}`, n, size, key), 1), nil)
			checkLiveHead(t, resp, acceptNDJSON)
			waitFor(t, e.backend.Cancelled(key), "the bridge to cancel the stream")
			var after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&after)
			grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
			t.Logf("heap grew by %d KiB while the client did not read", grown>>10)
			if grown > 32<<20 {
				t.Errorf("heap grew by %d MiB, want at most 32", grown>>20)
			}
			msgs := readLive(t, resp, acceptNDJSON).rest(waitTimeout)
			if len(msgs) < 2 || len(msgs) >= n {
				t.Fatalf("got %d messages, want the stream cut short", len(msgs))
			}
			for i, m := range msgs[:len(msgs)-1] {
				if seq := notificationOf(t, m.msg, "1")["seq"]; fmt.Sprint(seq) != fmt.Sprint(i+1) {
					t.Fatalf("message %d has seq %v", i, seq)
				}
			}
			end, _ := msgs[len(msgs)-1].msg["error"].(map[string]any)
			if end == nil || code(end) != 8 || errReason(end) != "SLOW_CLIENT" {
				t.Fatalf("got the end %.300s, want RESOURCE_EXHAUSTED (8) with reason SLOW_CLIENT", msgs[len(msgs)-1].raw)
			}
			t.Logf("%d messages before the end: %s", len(msgs)-1, end["message"])
		})
	}
}

// TestLiveKeepalive: an idle live stream gets a keepalive (an SSE
// comment, an empty NDJSON line) every stream_keepalive; none with them
// off.
func TestLiveKeepalive(t *testing.T) {
	checkLeaks(t)
	const every = 100 * time.Millisecond
	on := newEnv(t, bridge.Options{Streaming: bridge.Streaming{StreamKeepalive: every}})
	off := newEnv(t, bridge.Options{Streaming: bridge.Streaming{StreamKeepalive: -1}})
	client := newHTTPClient(t)
	body := request(serverStream, `{"count":1,"hold":true}`, 1)
	for _, accept := range []string{acceptSSE, acceptNDJSON} {
		t.Run(accept, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			lr := readLive(t, postLiveCtx(t, ctx, client, on.url, accept, body, nil), accept)
			last := lr.next(waitTimeout).at
			for i := range 3 {
				ev := lr.nextAny(waitTimeout)
				if !ev.keepalive {
					t.Fatalf("got %s, want a keepalive", ev.raw)
				}
				if accept == acceptSSE && ev.raw != ": keepalive" {
					t.Errorf("got the SSE line %q, want the comment \": keepalive\"", ev.raw)
				}
				if gap := ev.at.Sub(last); gap < every*8/10 || gap > 3*every {
					t.Errorf("keepalive %d came %s after the last event, want about %s", i, gap, every)
				}
				last = ev.at
			}
			cancel()

			ctx, cancel = context.WithCancel(t.Context())
			defer cancel()
			lr = readLive(t, postLiveCtx(t, ctx, client, off.url, accept, body, nil), accept)
			lr.next(waitTimeout)
			select {
			case ev := <-lr.events:
				t.Errorf("with keepalives off, got %+v", ev)
			case <-time.After(4 * every):
			}
		})
	}
}

// TestLiveDeadline: a live stream ends with the error 4 of its deadline,
// as its last message, never a cut connection: call_timeout's, or
// stream_timeout's when set; Grpc-Timeout shortens either, and may ask
// for up to the larger of max_call_timeout and stream_timeout.
func TestLiveDeadline(t *testing.T) {
	checkLeaks(t)
	client := newHTTPClient(t)
	body := request(serverStream, `{"count":1,"hold":true}`, 1)
	for _, tc := range []struct {
		name      string
		opts      bridge.Options
		asked     string // Grpc-Timeout
		want, max time.Duration
	}{
		{"call_timeout", bridge.Options{Limits: bridge.Limits{CallTimeout: 300 * time.Millisecond}}, "", 300 * time.Millisecond, 0},
		{"stream_timeout", bridge.Options{Limits: bridge.Limits{CallTimeout: 200 * time.Millisecond}, Streaming: bridge.Streaming{StreamTimeout: 700 * time.Millisecond}}, "", 700 * time.Millisecond, 0},
		{"Grpc-Timeout shortens stream_timeout", bridge.Options{Streaming: bridge.Streaming{StreamTimeout: 5 * time.Second}}, "250m", 250 * time.Millisecond, 0},
		{"Grpc-Timeout up to stream_timeout", bridge.Options{Limits: bridge.Limits{CallTimeout: 100 * time.Millisecond}, Streaming: bridge.Streaming{StreamTimeout: 600 * time.Millisecond}}, "20S", 600 * time.Millisecond, 0},
		{"Grpc-Timeout up to max_call_timeout", bridge.Options{Limits: bridge.Limits{CallTimeout: 100 * time.Millisecond, MaxCallTimeout: 500 * time.Millisecond}, Streaming: bridge.Streaming{StreamTimeout: 200 * time.Millisecond}}, "20S", 500 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.opts)
			var h http.Header
			if tc.asked != "" {
				h = http.Header{"Grpc-Timeout": {tc.asked}}
			}
			start := time.Now()
			resp := postLive(t, client, e.url, acceptSSE, body, h)
			checkLiveHead(t, resp, acceptSSE)
			msgs := readLive(t, resp, acceptSSE).rest(waitTimeout)
			took := time.Since(start)
			if len(msgs) != 2 {
				t.Fatalf("got %d messages, want the notification and the error", len(msgs))
			}
			end, _ := msgs[1].msg["error"].(map[string]any)
			if end == nil || code(end) != 4 {
				t.Fatalf("got the end %s, want DEADLINE_EXCEEDED (4)", msgs[1].raw)
			}
			if took < tc.want || took > tc.want+time.Second {
				t.Errorf("the stream ended after %s, want %s", took, tc.want)
			}
		})
	}
}

// TestLiveUnbounded: max_stream_messages and max_stream_bytes bound the
// collected form only: the same call asked for live gets every message.
func TestLiveUnbounded(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Streaming: bridge.Streaming{MaxStreamMessages: 5, MaxStreamBytes: 200}, MaxResponseBytes: 1000})
	body := request(serverStream, `{"count":50,"payloadSize":40}`, 1)
	if _, b := e.post(t, body); !strings.Contains(string(b), `"code":8`) {
		t.Fatalf("collected: got %s, want error 8", b)
	}
	resp := postLive(t, newHTTPClient(t), e.url, acceptNDJSON, body, nil)
	msgs := readLive(t, resp, acceptNDJSON).rest(waitTimeout)
	if len(msgs) != 51 || msgs[50].raw != `{"jsonrpc":"2.0","id":1,"result":{"messages":50}}` {
		t.Fatalf("got %d messages ending %s, want 50 and the reply", len(msgs), msgs[len(msgs)-1].raw)
	}
}

// TestLiveGuards: a live stream is authenticated, authorised and rate
// limited as any call, and counted in the metrics and the access log,
// whose line is written when the stream ends, with its message count.
func TestLiveGuards(t *testing.T) {
	checkLeaks(t)
	var log syncBuffer
	m := newMetrics(t)
	streamer := bridge.Identity{Name: "streamer", Tokens: []string{hashToken("streamer-token-0123456789")}, Allow: []string{serverStream}}
	e := newEnv(t, bridge.Options{Auth: newAuth(t, streamer), Metrics: m, AccessLog: slog.New(slog.NewJSONHandler(&log, nil)),
		RateLimit: 0.01, RateBurst: 1})
	client := newHTTPClient(t)
	hold := request(serverStream, `{"count":2,"hold":true}`, 1)

	// No credentials: 401, nothing streams.
	if resp := postLive(t, client, e.url, acceptSSE, hold, nil); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("without a token: got HTTP %d, want 401", resp.StatusCode)
	}
	// Not allowed: the refusal of any call, as JSON, which tells nothing
	// of whether the method streams.
	resp := postLive(t, client, e.url, acceptSSE, hold, bearer("reader-token-0123456789"))
	b, _ := io.ReadAll(resp.Body)
	if resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"code":7`) {
		t.Errorf("not allowed: got %q %s, want the JSON refusal 7", resp.Header.Get("Content-Type"), b)
	}

	// Allowed: live, and its log line only once it has ended.
	ctx, cancel := context.WithCancel(t.Context())
	resp = postLiveCtx(t, ctx, client, e.url, acceptSSE, hold, bearer("streamer-token-0123456789"))
	checkLiveHead(t, resp, acceptSSE)
	lr := readLive(t, resp, acceptSSE)
	lr.next(waitTimeout)
	lr.next(waitTimeout)
	if strings.Contains(log.String(), `"identity":"streamer"`) {
		t.Errorf("the access log has the stream's line before it ended: %s", log.String())
	}
	// The rate limit: the streamer's one call of its burst is taken.
	if resp := postLive(t, client, e.url, acceptSSE, hold, bearer("streamer-token-0123456789")); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("past the rate limit: got HTTP %d, want 429", resp.StatusCode)
	}
	cancel()
	var line map[string]any
	await.Until(t, waitTimeout, "the access log line of the stream", func() bool {
		for l := range strings.Lines(log.String()) {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["msg"] == "call" && rec["method"] == serverStream && rec["identity"] == "streamer" {
				line = rec
			}
		}
		return line != nil
	})
	if line["messages"] != 2.0 || line["code"] != 1.0 {
		t.Errorf("access log line %v, want messages 2 and code 1 (the client went away)", line)
	}
	if d, _ := line["duration_ms"].(float64); d < 1 {
		t.Errorf("access log line %v, want the duration of the whole stream", line)
	}
	fams := scrape(t, e)
	if s, ok := sample(fams, "jsonrpc_bridge_calls_total", map[string]string{"method": serverStream, "code": "1"}); !ok || s.GetCounter().GetValue() != 1 {
		t.Errorf("calls_total of the stream: got %v, want 1 with code 1", s)
	}
	if s, ok := sample(fams, "jsonrpc_bridge_calls_total", map[string]string{"method": serverStream, "code": "7"}); !ok || s.GetCounter().GetValue() != 1 {
		t.Errorf("calls_total of the refused call: got %v, want 1 with code 7", s)
	}
}

// FuzzAccept sends a server-streaming call with any Accept header: the
// reply is the collected one, byte for byte, or the live form its
// Content-Type names, which the header names too, with every message
// and the reply; never anything else.
func FuzzAccept(f *testing.F) {
	for _, s := range []string{"", "text/event-stream", "application/json, text/event-stream", "application/x-ndjson;q=0.5, application/jsonl;q=0.6",
		"*/*", "text/event-stream;q=0", "text/event-stream;q=1.000;charset=utf-8", "application/json;q=0.1,application/jsonl;Q=0.2", ";;,,q=",
		"text/event-stream;q=0.", "application/jsonl;q=1.001", "TEXT/EVENT-STREAM ; q = 0.5"} {
		f.Add(s)
	}
	e := newEnv(f, bridge.Options{Logger: slog.New(failOnError{t: f})})
	body := request(serverStream, `{"count":2}`, 1)
	collected := `{"jsonrpc":"2.0","id":1,"result":[{"seq":1},{"seq":2}]}`
	live := map[string]string{
		acceptSSE:    "data: {\"jsonrpc\":\"2.0\",\"method\":\"rpc.stream.message\",\"params\":{\"stream\":1,\"message\":{\"seq\":1}}}\n\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"rpc.stream.message\",\"params\":{\"stream\":1,\"message\":{\"seq\":2}}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"messages\":2}}\n\n",
		acceptNDJSON: "{\"jsonrpc\":\"2.0\",\"method\":\"rpc.stream.message\",\"params\":{\"stream\":1,\"message\":{\"seq\":1}}}\n{\"jsonrpc\":\"2.0\",\"method\":\"rpc.stream.message\",\"params\":{\"stream\":1,\"message\":{\"seq\":2}}}\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"messages\":2}}\n",
	}
	live[acceptJSONL] = live[acceptNDJSON]
	f.Fuzz(func(t *testing.T, accept string) {
		hr := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", strings.NewReader(body))
		hr.Header.Set("Content-Type", "application/json")
		hr.Header["Accept"] = []string{accept}
		w := httptest.NewRecorder()
		e.bridge.ServeHTTP(w, hr)
		ct := w.Header().Get("Content-Type")
		switch {
		case w.Code != http.StatusOK:
			t.Fatalf("Accept %q: HTTP %d %s", accept, w.Code, w.Body)
		case ct == "application/json":
			if w.Body.String() != collected {
				t.Fatalf("Accept %q: got %s, want %s", accept, w.Body, collected)
			}
		case live[ct] == "":
			t.Fatalf("Accept %q: got Content-Type %q", accept, ct)
		case !strings.Contains(strings.ToLower(accept), ct):
			t.Fatalf("Accept %q: got the live form %s, which it does not name", accept, ct)
		case w.Body.String() != live[ct]:
			t.Fatalf("Accept %q: got %q, want %q", accept, w.Body, live[ct])
		}
	})
}

// TestLiveStreamsMatchTheDocument: the OpenRPC document says which
// methods stream over POST / (x-grpc-streaming.httpLive), and the
// messages of real live streams of the demo match its schemas.
func TestLiveStreamsMatchTheDocument(t *testing.T) {
	e := newEnv(t, bridge.Options{})
	s := serveDocument(t, e)
	client := newHTTPClient(t)
	for _, tc := range []struct {
		method, params string
		messages       int
	}{
		{"demo.v1.Notes.WatchNotes", `{"tags":["intro"]}`, 1},
		{"demo.v1.Notes.TagNotes", `[{"id":"n1","tag":"a"},{"id":"n1","tag":"b"}]`, 2},
	} {
		live := "/methods/" + itoa(s.methods[tc.method]) + "/x-grpc-streaming/httpLive"
		resp := postLive(t, client, e.url, acceptSSE, request(tc.method, tc.params, 1), nil)
		msgs := readLive(t, resp, acceptSSE).rest(waitTimeout)
		if len(msgs) != tc.messages+1 {
			t.Fatalf("%s: got %d messages, want %d and the reply", tc.method, len(msgs), tc.messages)
		}
		for _, m := range msgs[:tc.messages] {
			b, _ := json.Marshal(m.msg["params"])
			if err := s.validate(t, live+"/notifications/0/params", b); err != nil {
				t.Errorf("%s: notification params %s do not match the document: %v", tc.method, b, err)
			}
		}
		b, _ := json.Marshal(msgs[tc.messages].msg["result"])
		if err := s.validate(t, live+"/result", b); err != nil {
			t.Errorf("%s: result %s does not match the document: %v", tc.method, b, err)
		}
		if err := s.validate(t, live+"/params", []byte(tc.params)); err != nil {
			t.Errorf("%s: params %s do not match the document: %v", tc.method, tc.params, err)
		}
	}
	_, b := e.do(t, http.MethodGet, "/openrpc.json", "", "")
	var doc struct {
		Methods []struct {
			Name      string
			Streaming map[string]any `json:"x-grpc-streaming"`
		}
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, m := range doc.Methods {
		_, live := m.Streaming["httpLive"]
		if want := m.Streaming != nil && m.Streaming["serverStreaming"] == true; live != want {
			t.Errorf("%s: httpLive %v, want it only where the responses stream", m.Name, live)
		}
	}
}

// TestLiveDrain: when the bridge drains (the first step of its graceful
// shutdown), its live streams end at once with the error 14 DRAINING as
// their last message, and the backend streams are cancelled; a stream
// that opens while it drains ends so too, and unary calls are served.
func TestLiveDrain(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{})
	client := newHTTPClient(t)
	resp := postLive(t, client, e.url, acceptSSE, request(serverStream, `{"count":1,"hold":true,"key":"drained"}`, 1), nil)
	lr := readLive(t, resp, acceptSSE)
	lr.next(waitTimeout)
	e.bridge.Drain()
	waitFor(t, e.backend.Cancelled("drained"), "the drain to cancel the backend stream")
	for _, msgs := range [][]liveEvent{
		lr.rest(waitTimeout),
		readLive(t, postLive(t, client, e.url, acceptNDJSON, request(serverStream, `{"count":1,"hold":true}`, 2), nil), acceptNDJSON).rest(waitTimeout),
	} {
		end, _ := msgs[len(msgs)-1].msg["error"].(map[string]any)
		if end == nil || code(end) != 14 || errReason(end) != "DRAINING" {
			t.Errorf("got the end %s, want UNAVAILABLE (14) with reason DRAINING", msgs[len(msgs)-1].raw)
		}
	}
	if code, b := postTo(t, client, e.url, request("helloworld.Greeter.SayHello", `{}`, 3)); code != http.StatusOK || !strings.Contains(string(b), `"result"`) {
		t.Errorf("a unary call while draining: HTTP %d %s", code, b)
	}
}

// TestLiveKeepsTheConnection: a live stream that ends (past the time the
// lean HTTP/1.1 front starts to watch a running request's connection)
// leaves its HTTP/1.1 connection ready for the next request, on each
// front.
func TestLiveKeepsTheConnection(t *testing.T) {
	checkLeaks(t)
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{CallTimeout: 700 * time.Millisecond}})
	for _, f := range liveFronts(t, e.bridge)[:2] {
		t.Run(f.name, func(t *testing.T) {
			resp := postLive(t, f.client, f.url, acceptNDJSON, request(serverStream, `{"count":1,"hold":true}`, 1), nil)
			if msgs := readLive(t, resp, acceptNDJSON).rest(waitTimeout); len(msgs) != 2 {
				t.Fatalf("got %d messages, want the notification and the deadline's error", len(msgs))
			}
			reused := false
			ctx := httptrace.WithClientTrace(t.Context(), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, f.url, strings.NewReader(request("helloworld.Greeter.SayHello", `{"name":"again"}`, 2)))
			req.Header.Set("Content-Type", "application/json")
			r, err := f.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(r.Body)
			r.Body.Close()
			if !reused || r.StatusCode != http.StatusOK || string(b) != `{"jsonrpc":"2.0","id":2,"result":{"message":"Hello, again!"}}` {
				t.Errorf("the next request (on the same connection: %v): HTTP %d %s", reused, r.StatusCode, b)
			}
		})
	}
}
