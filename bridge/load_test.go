package bridge_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"reflect"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
)

// keyCounter is a backend interceptor that counts the completed calls of
// Count and Echo by their key (CountRequest.key, AllTypes.f_string).
type keyCounter struct {
	mu    sync.Mutex
	seen  map[string]int
	total int
	moved chan struct{} // receives after every call, when someone listens
}

func newKeyCounter() *keyCounter {
	return &keyCounter{seen: make(map[string]int), moved: make(chan struct{}, 1)}
}

func (k *keyCounter) intercept(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	resp, err := next(ctx, req)
	var key string
	switch m := req.(type) {
	case *testv1.CountRequest:
		key = m.GetKey()
	case *testv1.AllTypes:
		key = m.GetFString()
	default:
		return resp, err
	}
	k.mu.Lock()
	k.seen[key]++
	k.total++
	k.mu.Unlock()
	select {
	case k.moved <- struct{}{}:
	default:
	}
	return resp, err
}

// waitTotal waits until n calls completed, or d passed.
func (k *keyCounter) waitTotal(n int, d time.Duration) int {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		k.mu.Lock()
		got := k.total
		k.mu.Unlock()
		if got >= n {
			return got
		}
		select {
		case <-k.moved:
		case <-timer.C:
			return got
		}
	}
}

// loadSize is the shape of one load run.
type loadSize struct {
	httpClients, wsClients int
	httpRequests, wsFrames int // per client
}

// loadPlan tracks what every client sent and must get back.
type loadPlan struct {
	uniq atomic.Int64 // source of unique keys and ids

	mu   sync.Mutex
	keys map[string]bool // every key a call carries: the backend must see each once
}

// expected is what one reply with a given id must be.
type expected struct {
	result any // decoded JSON of the result; nil when an error is expected
	code   int // error code, when result is nil
}

// message is one HTTP body or WebSocket frame and the replies it must get.
type message struct {
	body    []byte
	batch   bool
	replies map[string]expected // by raw id
	nulls   int                 // replies with id null (invalid members)
	members int                 // calls and invalid members
}

func (m *message) wantsReply() bool { return len(m.replies) > 0 || m.nulls > 0 }

// id returns a unique id of a random kind: a string, an integer or an
// integer too large for any fixed-width type.
func (p *loadPlan) id(rng *rand.Rand) string {
	n := p.uniq.Add(1)
	switch rng.IntN(3) {
	case 0:
		return `"id-` + strconv.FormatInt(n, 10) + `"`
	case 1:
		return strconv.FormatInt(n, 10)
	}
	return "98765432109876543210987654321" + fmt.Sprintf("%012d", n)
}

func (p *loadPlan) key(prefix string) string {
	k := prefix + strconv.FormatInt(p.uniq.Add(1), 10)
	p.mu.Lock()
	p.keys[k] = true
	p.mu.Unlock()
	return k
}

// member returns one request (or invalid member) and adds its expected
// reply to m.
func (p *loadPlan) member(rng *rand.Rand, m *message, inBatch bool) string {
	roll := rng.IntN(100)
	switch {
	case inBatch && roll < 8: // an invalid member
		m.nulls++
		return [...]string{`1`, `"x"`, `{}`, `{"jsonrpc":"2.0","id":5}`, `{"jsonrpc":"1.0","method":"x","id":5}`, `[]`}[rng.IntN(6)]
	case inBatch && roll < 12: // an unknown method
		id := p.id(rng)
		m.replies[id] = expected{code: -32601}
		return req("nobody.Knows.This", "", id)
	case roll < 30: // a notification
		return req(countMethod, `{"key":"`+p.key("n")+`"}`, "")
	case roll < 65:
		id := p.id(rng)
		m.replies[id] = expected{result: map[string]any{"count": "1"}}
		return req(countMethod, `{"key":"`+p.key("c")+`"}`, id)
	}
	id := p.id(rng)
	key := p.key("e")
	big := strconv.FormatInt(rng.Int64(), 10)
	m.replies[id] = expected{result: map[string]any{"fString": key, "fInt64": big, "rInt64": []any{"-1", big}}}
	return req(echoMethod, `{"fString":"`+key+`","fInt64":`+big+`,"rInt64":[-1,"`+big+`"]}`, id)
}

// next returns a random single call or batch.
func (p *loadPlan) next(rng *rand.Rand) *message {
	m := &message{replies: make(map[string]expected)}
	if rng.IntN(2) == 0 {
		m.body = []byte(p.member(rng, m, false))
		m.members = 1
		return m
	}
	m.batch = true
	n := 1 + rng.IntN(10)
	m.members = n
	var b bytes.Buffer
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(p.member(rng, m, true))
	}
	b.WriteByte(']')
	if len(m.replies) == 0 {
		// Invalid members alone could not be told apart over WebSocket:
		// keep them only with a member that has an id.
		id := p.id(rng)
		m.replies[id] = expected{result: map[string]any{"count": "1"}}
		m.members++
		b.Truncate(b.Len() - 1)
		b.WriteString("," + req(countMethod, `{"key":"`+p.key("c")+`"}`, id) + "]")
	}
	m.body = b.Bytes()
	return m
}

// reply is one decoded reply object.
type reply struct {
	ID     json.RawMessage `json:"id"`
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Code int `json:"code"`
	} `json:"error"`
}

// checkReplies matches body, the reply to m, against what m expects.
func checkReplies(t *testing.T, m *message, body []byte) {
	t.Helper()
	var rs []reply
	if m.batch {
		if err := json.Unmarshal(body, &rs); err != nil {
			t.Errorf("batch reply %.200s: %v", body, err)
			return
		}
	} else {
		var r reply
		if err := json.Unmarshal(body, &r); err != nil {
			t.Errorf("reply %.200s: %v", body, err)
			return
		}
		rs = []reply{r}
	}
	nulls := 0
	seen := make(map[string]bool)
	for _, r := range rs {
		id := string(r.ID)
		if id == "null" {
			nulls++
			if r.Error == nil || r.Error.Code != -32600 {
				t.Errorf("reply %.200s: a null id without -32600", body)
			}
			continue
		}
		want, ok := m.replies[id]
		switch {
		case !ok:
			t.Errorf("reply with id %s that was not sent in %.200s", id, m.body)
			continue
		case seen[id]:
			t.Errorf("two replies with id %s", id)
			continue
		}
		seen[id] = true
		if want.result == nil {
			if r.Error == nil || r.Error.Code != want.code {
				t.Errorf("reply %s: got %.200s, want error %d", id, body, want.code)
			}
			continue
		}
		var got any
		if err := json.Unmarshal(r.Result, &got); err != nil || !reflect.DeepEqual(got, want.result) {
			t.Errorf("reply %s: got result %s, want %v", id, r.Result, want.result)
		}
	}
	if len(seen) != len(m.replies) || nulls != m.nulls {
		t.Errorf("got %d replies with ids and %d with null, want %d and %d: %.300s", len(seen), nulls, len(m.replies), m.nulls, body)
	}
}

// loadScale multiplies the requests of every client of TestLoad, for
// longer runs on demand: go test -run TestLoad -load-scale 20 ./bridge
var loadScale = flag.Int("load-scale", 1, "multiply the requests of each TestLoad client")

// TestLoad runs many HTTP and WebSocket clients at once over loopback and
// accounts for every reply: each request with an id gets exactly one reply
// with its id and its result, each notification none, and the backend
// completes each call exactly once.
func TestLoad(t *testing.T) {
	size := loadSize{httpClients: 160, wsClients: 80, httpRequests: 12, wsFrames: 15}
	if testing.Short() {
		size.httpRequests, size.wsFrames = 4, 5
	}
	size.httpRequests *= *loadScale
	size.wsFrames *= *loadScale
	runLoad(t, size)
}

func runLoad(t *testing.T, size loadSize) {
	checkLeaks(t)
	kc := newKeyCounter()
	e := newEnv(t, bridge.Options{MaxInFlight: 4096, Limits: bridge.Limits{CallTimeout: 20 * time.Second}, Streaming: bridge.Streaming{WSPingInterval: -1}}, withServer(grpc.ChainUnaryInterceptor(kc.intercept)), reconnecting())
	url := e.url
	client := newHTTPClient(t)
	plan := &loadPlan{keys: make(map[string]bool)}

	stopPeak := make(chan struct{})
	var peak uint64
	var sampler sync.WaitGroup
	sampler.Go(func() { peak = peakHeap(stopPeak) })

	var sent, calls atomic.Int64
	count := func(m *message) {
		sent.Add(1)
		calls.Add(int64(m.members))
	}
	start := time.Now()
	var wg sync.WaitGroup
	for c := range size.httpClients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 1))
			for range size.httpRequests {
				m := plan.next(rng)
				count(m)
				if !loadPost(t, client, url, m) {
					return
				}
			}
		})
	}
	conns := make([]*websocket.Conn, size.wsClients)
	for c := range size.wsClients {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		ws, _, err := websocket.Dial(ctx, url+"/ws", nil)
		cancel()
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		ws.SetReadLimit(1 << 22)
		conns[c] = ws
		t.Cleanup(func() { ws.CloseNow() })
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 2))
			msgs := make([]*message, size.wsFrames)
			for i := range msgs {
				msgs[i] = plan.next(rng)
				count(msgs[i])
			}
			loadWS(t, ws, msgs)
		})
	}
	wg.Wait()
	elapsed := time.Since(start)

	// Notifications over WebSocket may still be running: wait for the
	// backend to complete every call before closing the connections.
	want := len(plan.keys)
	got := kc.waitTotal(want, 20*time.Second)
	for _, ws := range conns {
		ws.Close(websocket.StatusNormalClosure, "")
	}
	close(stopPeak)
	sampler.Wait()
	if got != want {
		t.Errorf("the backend completed %d calls, want %d", got, want)
	}
	kc.mu.Lock()
	for k, n := range kc.seen {
		if n != 1 || !plan.keys[k] {
			t.Errorf("the backend saw key %q %d times, want %d", k, n, map[bool]int{true: 1}[plan.keys[k]])
		}
	}
	kc.mu.Unlock()
	t.Logf("load: %d HTTP + %d WebSocket clients, %d messages (%d members, %d backend calls) in %v: %.0f messages/s, %.0f members/s; peak heap in use %.1f MiB",
		size.httpClients, size.wsClients, sent.Load(), calls.Load(), got, elapsed.Round(time.Millisecond),
		float64(sent.Load())/elapsed.Seconds(), float64(calls.Load())/elapsed.Seconds(), float64(peak)/(1<<20))
}

// loadPost sends m over HTTP and checks the reply; false stops the client.
func loadPost(t *testing.T, client *http.Client, url string, m *message) bool {
	resp, err := client.Post(url+"/", "application/json", bytes.NewReader(m.body))
	if err != nil {
		t.Errorf("POST: %v", err)
		return false
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Errorf("reading a reply: %v", err)
		return false
	}
	switch {
	case !m.wantsReply():
		if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
			t.Errorf("notifications %.200s: HTTP %d %.200s, want 204", m.body, resp.StatusCode, body)
		}
	case resp.StatusCode != http.StatusOK:
		t.Errorf("%.200s: HTTP %d %.200s, want 200", m.body, resp.StatusCode, body)
	default:
		checkReplies(t, m, body)
	}
	return true
}

// loadWS sends every message on ws and reads until each that wants a
// reply got its own, in any order.
func loadWS(t *testing.T, ws *websocket.Conn, msgs []*message) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	byID := make(map[string]*message) // every id, to the message that carries it
	waiting := 0
	for _, m := range msgs {
		for id := range m.replies {
			byID[id] = m
		}
		if m.wantsReply() {
			waiting++
		}
	}
	var writer sync.WaitGroup
	defer writer.Wait()
	writer.Go(func() {
		for _, m := range msgs {
			if err := ws.Write(ctx, websocket.MessageText, m.body); err != nil {
				t.Errorf("write: %v", err)
				cancel()
				return
			}
		}
	})
	done := make(map[*message]bool)
	for waiting > 0 {
		_, data, err := ws.Read(ctx)
		if err != nil {
			t.Errorf("read with %d replies missing: %v", waiting, err)
			return
		}
		m := wsOwner(data, byID)
		switch {
		case m == nil:
			t.Errorf("a reply %.200s to nothing that was sent", data)
			continue
		case done[m]:
			t.Errorf("a second reply %.200s to %.200s", data, m.body)
			continue
		}
		done[m] = true
		waiting--
		checkReplies(t, m, data)
	}
}

// wsOwner finds the message a WebSocket reply answers by its first id.
func wsOwner(data []byte, byID map[string]*message) *message {
	var rs []reply
	if len(data) > 0 && data[0] == '[' {
		if json.Unmarshal(data, &rs) != nil {
			return nil
		}
	} else {
		var r reply
		if json.Unmarshal(data, &r) != nil {
			return nil
		}
		rs = []reply{r}
	}
	for _, r := range rs {
		if m := byID[string(r.ID)]; m != nil {
			return m
		}
	}
	return nil
}

// peakHeap samples the heap in use until stop is closed and returns the
// largest value seen.
func peakHeap(stop <-chan struct{}) uint64 {
	var ms runtime.MemStats
	var peak uint64
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		runtime.ReadMemStats(&ms)
		peak = max(peak, ms.HeapInuse)
		select {
		case <-stop:
			return peak
		case <-tick.C:
		}
	}
}
