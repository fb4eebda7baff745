package bridge_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
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

var _ = time.Second
