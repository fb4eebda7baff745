package unary

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// quotaPeer is an h2peer that serves quota calls per connection as nginx
// does after keepalive_requests with http2_max_concurrent_streams 4: at
// the quota-th request's HEADERS it sends GOAWAY(NO_ERROR) with that
// stream as the last, answers the streams up to it, and ignores those the
// client opened after it. seen counts the requests the backend served,
// by message.
func quotaPeer(t *testing.T, quota int) (string, *h2peer, *sync.Map) {
	var seen sync.Map // message -> *atomic.Int32
	var mu sync.Mutex
	count := map[int32]int{}      // connection -> requests
	ignored := map[int32]uint32{} // connection -> the GOAWAY's last stream
	p := &h2peer{
		settings: []http2.Setting{{ID: http2.SettingMaxConcurrentStreams, Val: 4}},
		// nginx's answers come from upstream: with a quota below the
		// stream limit, its GOAWAY comes before any of them.
		lateAnswers: true,
		onHeaders: func(s *h2stream, _ *http2.MetaHeadersFrame) {
			mu.Lock()
			defer mu.Unlock()
			if _, ok := ignored[s.conn]; ok {
				return
			}
			if count[s.conn]++; count[s.conn] == quota {
				ignored[s.conn] = s.id
				s.fr.WriteGoAway(s.id, http2.ErrCodeNo, nil)
			}
		},
		respond: func(s *h2stream) {
			mu.Lock()
			last, ok := ignored[s.conn]
			if ok && s.id > last {
				mu.Unlock()
				return // above the GOAWAY's last stream: never seen
			}
			mu.Unlock()
			v, _ := seen.LoadOrStore(string(s.body), new(atomic.Int32))
			v.(*atomic.Int32).Add(1)
			s.ok(s.body)
		},
	}
	return serveH2(t, p), p, &seen
}

// TestProxyConnectionQuota: behind a proxy that drains each connection
// after a few calls (nginx's keepalive_requests), with more calls queued
// than one connection serves, every call succeeds and reaches the backend
// exactly once, whether made alone by many callers or in one Group: a
// call the draining connection left out (never sent, or above the
// GOAWAY's last stream) is tried again each time, not once, and a
// connection whose GOAWAY came before it answered, covering calls it
// took, is no failure to connect (no backoff).
func TestProxyConnectionQuota(t *testing.T) {
	t.Parallel()
	// 2: below the stream limit, nginx's GOAWAY comes before any answer.
	for _, quota := range []int{10, 2} {
		t.Run("quota "+strconv.Itoa(quota), func(t *testing.T) {
			t.Parallel()
			testConnectionQuota(t, quota)
		})
	}
}

func testConnectionQuota(t *testing.T, quota int) {
	check := func(t *testing.T, seen *sync.Map, calls []*Call) {
		t.Helper()
		failed := 0
		for i, call := range calls {
			if call.Err != nil || string(call.Response) != string(call.Request) {
				if failed++; failed <= 3 {
					t.Errorf("call %d: %q, %v", i, call.Response, call.Err)
				}
			}
			if v, _ := seen.Load(string(call.Request)); v == nil || v.(*atomic.Int32).Load() != 1 {
				t.Errorf("call %d did not reach the backend exactly once", i)
			}
		}
		if failed > 3 {
			t.Errorf("%d of %d calls failed", failed, len(calls))
		}
	}
	t.Run("group", func(t *testing.T) {
		target, p, seen := quotaPeer(t, quota)
		c := newClient(t, target, Options{})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		for round := range 3 {
			var g Group
			calls := make([]*Call, 100)
			for i := range calls {
				calls[i] = &Call{Method: "/t.S/M", Request: []byte("g" + strconv.Itoa(round) + "-" + strconv.Itoa(i))}
				g.Start(ctx, c, calls[i])
			}
			g.Wait(ctx)
			check(t, seen, calls)
		}
		if n := int(p.conns.Load()); n < 300/quota {
			t.Errorf("%d connections for 300 calls at %d a connection", n, quota)
		}
	})
	t.Run("callers", func(t *testing.T) {
		target, _, seen := quotaPeer(t, quota)
		c := newClient(t, target, Options{})
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		calls := make([]*Call, 32*20)
		var wg sync.WaitGroup
		for w := range 32 {
			wg.Go(func() {
				for i := w * 20; i < (w+1)*20; i++ {
					calls[i] = &Call{Method: "/t.S/M", Request: []byte("c" + strconv.Itoa(i))}
					c.Invoke(ctx, calls[i])
				}
			})
		}
		wg.Wait()
		check(t, seen, calls)
	})
}
