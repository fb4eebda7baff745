package bridge_test

import (
	"bufio"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// docExample is one fenced example of docs/streaming.md: "http" blocks
// are POST / exchanges, "ws" blocks one WebSocket connection, "sse" and
// "ndjson" blocks one call answered live (see runLiveExample).
type docExample struct {
	line  int
	kind  string
	steps []docStep
}

// docStep is one frame sent and the frames that answer it, which may
// arrive in any order.
type docStep struct {
	line  int
	send  string
	wants []string
}

func readDocExamples(t *testing.T, path string) []docExample {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var examples []docExample
	var cur *docExample
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && (line == "```http" || line == "```ws" || line == "```sse" || line == "```ndjson"):
			examples = append(examples, docExample{line: n, kind: line[3:]})
			cur = &examples[len(examples)-1]
		case cur != nil && line == "```":
			cur = nil
		case cur == nil:
		case strings.HasPrefix(line, "--> "):
			cur.steps = append(cur.steps, docStep{line: n, send: line[4:]})
		case strings.HasPrefix(line, "<-- "):
			if len(cur.steps) == 0 {
				t.Fatalf("%s:%d: a reply before any request", path, n)
			}
			s := &cur.steps[len(cur.steps)-1]
			s.wants = append(s.wants, line[4:])
		case strings.TrimSpace(line) == "", strings.HasPrefix(line, "//"):
		default:
			t.Fatalf("%s:%d: cannot read %q", path, n, line)
		}
	}
	return examples
}

// docPattern reads a pattern of the docs; the creation times of notes
// change from run to run and match anything.
func docPattern(t testing.TB, s string) any {
	t.Helper()
	p := pattern(t, s)
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if k == "createdAt" {
					v[k] = "*"
					continue
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(p)
	return p
}

// TestStreamingDocs runs every example exchange of docs/streaming.md
// against a fresh bridge and demo service.
func TestStreamingDocs(t *testing.T) {
	checkLeaks(t)
	const path = "../docs/streaming.md"
	examples := readDocExamples(t, path)
	var kinds = map[string]int{}
	for _, ex := range examples {
		kinds[ex.kind]++
		e := newEnv(t, bridge.Options{})
		switch ex.kind {
		case "http":
			for _, s := range ex.steps {
				code, body := e.post(t, s.send)
				if len(s.wants) != 1 {
					t.Fatalf("%s:%d: an HTTP request takes exactly one reply", path, s.line)
				}
				if code != http.StatusOK {
					t.Fatalf("%s:%d: got HTTP %d %s", path, s.line, code, body)
				}
				if err := match(docPattern(t, s.wants[0]), decode(t, body), "$"); err != nil {
					t.Errorf("%s:%d: got %s\nwant %s\n%v", path, s.line, body, s.wants[0], err)
				}
			}
		case "sse", "ndjson":
			runLiveExample(t, path, e, ex)
		case "ws":
			w := dialWS(t, e)
			for _, s := range ex.steps {
				w.send(s.send)
				// The answers may come in any order: match each to the
				// first pattern it fits.
				left := make([]any, len(s.wants))
				for i, want := range s.wants {
					left[i] = docPattern(t, want)
				}
				for range s.wants {
					got := w.recv()
					found := false
					for i, p := range left {
						if p != nil && match(p, got, "$") == nil {
							left[i], found = nil, true
							break
						}
					}
					if !found {
						t.Fatalf("%s:%d: got %v, which is none of the expected\n%s", path, s.line, got, strings.Join(s.wants, "\n"))
					}
				}
			}
		}
	}
	if kinds["http"] < 3 || kinds["ws"] < 3 || kinds["sse"] < 2 || kinds["ndjson"] < 1 {
		t.Errorf("%s has %d http, %d ws, %d sse and %d ndjson examples, want an example of each kind over each transport and of each live form",
			path, kinds["http"], kinds["ws"], kinds["sse"], kinds["ndjson"])
	}
}

// runLiveExample runs ex, an example of a call answered live: its first
// request is posted asking for the block's form, and the lines after it
// are the stream's messages, in order. A later request is posted on its
// own while the stream runs: the first line after it is its reply, the
// others the stream's next messages. When the last line is the call's
// reply, the stream must end there; otherwise the example ends by
// leaving.
func runLiveExample(t *testing.T, path string, e *env, ex docExample) {
	t.Helper()
	accept := map[string]string{"sse": acceptSSE, "ndjson": acceptNDJSON}[ex.kind]
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	client := newHTTPClient(t)
	resp := postLiveCtx(t, ctx, client, e.url, accept, ex.steps[0].send, nil)
	checkLiveHead(t, resp, accept)
	lr := readLive(t, resp, accept)
	var last any
	for i, s := range ex.steps {
		wants := s.wants
		if i > 0 {
			if len(wants) == 0 {
				t.Fatalf("%s:%d: a request made while the stream runs needs its reply", path, s.line)
			}
			code, body := e.post(t, s.send)
			if err := match(docPattern(t, wants[0]), decode(t, body), "$"); code != http.StatusOK || err != nil {
				t.Errorf("%s:%d: got HTTP %d %s\nwant %s\n%v", path, s.line, code, body, wants[0], err)
			}
			wants = wants[1:]
		}
		for _, want := range wants {
			got := lr.next(waitTimeout)
			last = docPattern(t, want)
			if err := match(last, decode(t, []byte(got.raw)), "$"); err != nil {
				t.Errorf("%s:%d: the stream sent %s\nwant %s\n%v", path, s.line, got.raw, want, err)
			}
		}
	}
	if m, ok := last.(map[string]any); ok && m["method"] == nil {
		if rest := lr.rest(waitTimeout); len(rest) > 0 {
			t.Errorf("%s:%d: the stream sent %d messages after its reply", path, ex.line, len(rest))
		}
	}
}
