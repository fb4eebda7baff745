package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"google.golang.org/grpc/codes"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/fleet"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// The ways a client's calls reach the fleet's pods through the bridge:
// unary calls over POST / on each path of unary calls, server streams
// over the WebSocket and answered live over POST / (grpc-go's streams).
var callModes = []struct {
	name   string
	direct string // --direct-calls
	call   func(t *testing.T, url string, ws *websocket.Conn) error
}{
	{"POST / direct", "true", unaryCall},
	{"POST / grpc-go", "false", unaryCall},
	{"WebSocket stream", "true", wsStream},
	{"POST / live stream", "true", liveStream},
}

// unaryCall makes one unary call over POST /; its error is the call's.
func unaryCall(t *testing.T, url string, _ *websocket.Conn) error {
	code, r, _ := rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"), nil)
	if code != 200 || r["error"] != nil {
		return fmt.Errorf("HTTP %d %v", code, r["error"])
	}
	return nil
}

const streamCall = `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.ServerStream","params":{"count":1}}`

// wsStream opens a server stream over ws and reads it to its end.
func wsStream(t *testing.T, _ string, ws *websocket.Conn) error {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, []byte(streamCall)); err != nil {
		t.Fatal(err)
	}
	for {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Method string
			Error  any
			Params struct{ Error any }
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		switch {
		case m.Error != nil:
			return fmt.Errorf("%v", m.Error)
		case m.Method == "rpc.stream.end" && m.Params.Error != nil:
			return fmt.Errorf("%v", m.Params.Error)
		case m.Method == "rpc.stream.end":
			return nil
		}
	}
}

// liveStream makes a server-streaming call over POST / answered live
// (NDJSON) and reads it to its reply.
func liveStream(t *testing.T, url string, _ *websocket.Conn) error {
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(streamCall))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	var last string
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			last = l
		}
	}
	if !strings.Contains(last, `"result":{"messages":1}`) {
		return fmt.Errorf("reply %s", last)
	}
	return nil
}

// TestOutlierDetection: the bridge in front of 4 pods spreads every kind
// of call, unary ones on both paths and streams over the WebSocket and
// POST /, by the same policy (round_robin: 10 calls each of 40); when a
// pod answers UNAVAILABLE to everything the same detector ejects it,
// with a Warn line naming the address, the failures and the reason,
// /readyz showing it ejected until a time, and the metrics counting it;
// it comes back after outlier_ejection_time, logged at Info. (Each step
// reads a record that stays: the counter, the log, so that a loaded
// machine that takes longer than the ejection between two requests
// cannot make it miss the ejection.)
func TestOutlierDetection(t *testing.T) {
	for _, mode := range callModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel() // each its own fleet and bridge
			f := fleet.Start(t, 4)
			p, addr := startBridge(t, "--backend", f.Target(), "--balance", "round_robin", "--direct-calls="+mode.direct,
				"--outlier-ejection-time", "2s", "--outlier-max-ejection-time", "2s", "--outlier-codes", "unavailable,8")
			url := "http://" + addr
			await.Until(t, 10*time.Second, "4 ready addresses", func() bool {
				return strings.Count(get(t, url+"/readyz"), `"state":"ready","in_flight"`) == 4
			})
			var ws *websocket.Conn
			if mode.name == "WebSocket stream" {
				c, _, err := websocket.Dial(t.Context(), "ws://"+addr+"/ws", nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { c.CloseNow() })
				ws = c
			}
			before := make([]int64, 4)
			for i := range before {
				before[i] = f.Pod(fleet.IP(i)).Calls()
			}
			for range 40 {
				if err := mode.call(t, url, ws); err != nil {
					t.Fatal(err)
				}
			}
			for i := range before {
				if n := f.Pod(fleet.IP(i)).Calls() - before[i]; n != 10 {
					t.Errorf("%s took %d of 40 calls, want 10", fleet.IP(i), n)
				}
			}

			bad := f.Pod(fleet.IP(3))
			bad.SetFail(codes.Unavailable)
			failedAt := time.Now()
			ejections := regexp.MustCompile(`jsonrpc_bridge_backend_ejections_total\{address="` + regexp.QuoteMeta(bad.Addr) + `",backend="default"\} (\d+)`)
			ejected := func() string {
				if m := ejections.FindStringSubmatch(get(t, url+"/metrics")); m != nil {
					return m[1]
				}
				return ""
			}
			failed := 0
			for i := 0; ejected() == "0"; i++ {
				if i == 100 {
					t.Fatalf("not ejected after 100 calls: %s", get(t, url+"/readyz"))
				}
				if err := mode.call(t, url, ws); err != nil {
					failed++
				}
			}
			if failed != 5 {
				t.Errorf("%d calls failed before the ejection, want 5 (outlier_consecutive_failures)", failed)
			}
			warn := p.stderr.until(t, "the ejection logged", func(l string) bool {
				return strings.Contains(l, `"msg":"backend address ejected: out of the rotation"`)
			})
			line := warn[len(warn)-1]
			for _, want := range []string{`"level":"WARN"`, `"address":"` + bad.Addr + `"`, `"failures":5`, `"reason":"status Unavailable from the address"`, `"backend":"default"`} {
				if !strings.Contains(line, want) {
					t.Errorf("the ejection's line %s has no %s", line, want)
				}
			}
			var ready struct {
				Details struct {
					Backends []struct {
						Addresses []struct {
							Address, State string
							EjectedUntil   *time.Time `json:"ejected_until"`
						}
					}
				}
			}
			if err := json.Unmarshal([]byte(get(t, url+"/readyz")), &ready); err != nil {
				t.Fatal(err)
			}
			for _, a := range ready.Details.Backends[0].Addresses {
				if a.Address == bad.Addr && (a.State != "ejected" || a.EjectedUntil == nil || a.EjectedUntil.Before(failedAt) || a.EjectedUntil.After(time.Now().Add(2*time.Second))) {
					t.Errorf("/readyz shows %+v, want it ejected until 2 s at most from now", a)
				}
			}
			metrics := get(t, url+"/metrics")
			if want := `jsonrpc_bridge_backend_addresses{backend="default",state="ejected"} 1`; !strings.Contains(metrics, want) {
				t.Errorf("/metrics has no %s", want)
			}
			if n := ejected(); n != "1" {
				t.Errorf("/metrics counts %s ejections of %s, want 1", n, bad.Addr)
			}

			bad.SetFail(codes.OK)
			info := p.stderr.until(t, "the return logged", func(l string) bool { return strings.Contains(l, `"msg":"backend address back in the rotation"`) })
			if line := info[len(info)-1]; !strings.Contains(line, `"level":"INFO"`) || !strings.Contains(line, `"address":"`+bad.Addr+`"`) {
				t.Errorf("the return's line %s", line)
			}
			await.Until(t, 5*time.Second, "the address ready again", func() bool {
				return strings.Contains(get(t, url+"/readyz"), `"address":"`+bad.Addr+`","state":"ready"`)
			})
			n := bad.Calls()
			for range 8 {
				if err := mode.call(t, url, ws); err != nil {
					t.Fatal(err)
				}
			}
			if got := bad.Calls() - n; got != 2 {
				t.Errorf("the healed address took %d of 8 calls, want 2", got)
			}
			if !strings.Contains(get(t, url+"/metrics"), `jsonrpc_bridge_backend_addresses{backend="default",state="ejected"} 0`) {
				t.Error("/metrics still counts an ejected address")
			}
		})
	}
}

// TestInFlightStreams: /readyz's in_flight counts the streams open on an
// address, as its calls.
func TestInFlightStreams(t *testing.T) {
	f := fleet.Start(t, 1)
	_, addr := startBridge(t, "--backend", f.Target())
	ws, _, err := websocket.Dial(t.Context(), "ws://"+addr+"/ws", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	for i := range 3 {
		msg := `{"jsonrpc":"2.0","id":` + strconv.Itoa(i) + `,"method":"test.v1.TestService.BidiStream"}`
		if err := ws.Write(t.Context(), websocket.MessageText, []byte(msg)); err != nil {
			t.Fatal(err)
		}
	}
	await.Until(t, 5*time.Second, "3 streams in flight", func() bool {
		return strings.Contains(get(t, "http://"+addr+"/readyz"), `"in_flight":3`)
	})
	ws.Close(websocket.StatusNormalClosure, "")
	await.Until(t, 5*time.Second, "no stream in flight", func() bool {
		return strings.Contains(get(t, "http://"+addr+"/readyz"), `"in_flight":0`)
	})
}
