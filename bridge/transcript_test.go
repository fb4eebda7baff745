package bridge_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// step is one exchange of a transcript.
type step struct {
	line   int
	send   string
	status int    // expected HTTP status
	want   string // expected JSON pattern; "" when no body is expected
}

// readTranscript reads a file of "--> request" and "<-- reply" lines.
// A reply is a bare HTTP status ("204"), a JSON pattern (HTTP 200), or a
// status followed by a pattern ("413 {...}"). Lines starting with // are
// comments.
func readTranscript(t *testing.T, path string) []step {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []step
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "--> "):
			steps = append(steps, step{line: n, send: line[4:]})
		case strings.HasPrefix(line, "<-- "):
			if len(steps) == 0 || steps[len(steps)-1].status != 0 {
				t.Fatalf("%s:%d: reply without a request", path, n)
			}
			s := &steps[len(steps)-1]
			rest := line[4:]
			s.status = 200
			if code, body, _ := strings.Cut(rest, " "); len(code) == 3 && code[0] >= '1' && code[0] <= '5' {
				if c, err := strconv.Atoi(code); err == nil {
					s.status, rest = c, body
				}
			}
			s.want = strings.TrimSpace(rest)
		case strings.HasPrefix(line, "//"), strings.TrimSpace(line) == "":
		default:
			t.Fatalf("%s:%d: cannot read %q", path, n, line)
		}
	}
	for _, s := range steps {
		if s.status == 0 {
			t.Fatalf("%s:%d: request without a reply", path, s.line)
		}
	}
	return steps
}

func TestTranscripts(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/transcripts/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no transcripts: %v", err)
	}
	for _, file := range files {
		for _, path := range []struct {
			name string
			path envOption
		}{{"direct", via(direct)}, {"grpc-go", onBufconn()}} {
			t.Run(strings.TrimSuffix(filepath.Base(file), ".txt")+"/"+path.name, func(t *testing.T) {
				t.Parallel()
				e := newEnv(t, bridge.Options{}, path.path)
				for _, s := range readTranscript(t, file) {
					code, body := e.post(t, s.send)
					if code != s.status {
						t.Fatalf("line %d: %s\ngot HTTP %d %s, want %d", s.line, s.send, code, body, s.status)
					}
					if s.want == "" {
						if len(body) != 0 {
							t.Errorf("line %d: got body %s, want none", s.line, body)
						}
						continue
					}
					got := decode(t, body)
					eachReply(t, got, func(r map[string]any) { checkEnvelope(t, r) })
					var want any
					d := json.NewDecoder(strings.NewReader(s.want))
					d.UseNumber()
					if err := d.Decode(&want); err != nil {
						t.Fatalf("line %d: bad pattern: %v", s.line, err)
					}
					if err := match(want, got, "$"); err != nil {
						t.Errorf("line %d: %s\ngot  %s\nwant %s\n%v", s.line, s.send, body, s.want, err)
					}
				}
			})
		}
	}
}

func eachReply(t testing.TB, v any, f func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		f(v)
	case []any:
		for _, m := range v {
			r, ok := m.(map[string]any)
			if !ok {
				t.Fatalf("batch reply member %v is not an object", m)
			}
			f(r)
		}
	}
}

// match compares got with the pattern want: objects must have the
// pattern's members (others allowed, the envelope check limits them),
// arrays the same members in order, and the string "*" matches anything.
func match(want, got any, path string) error {
	if want == "*" {
		return nil
	}
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: got %v, want an object", path, got)
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				return fmt.Errorf("%s: missing member %q", path, k)
			}
			if err := match(wv, gv, path+"."+k); err != nil {
				return err
			}
		}
		return nil
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return fmt.Errorf("%s: got %v, want %d members", path, got, len(w))
		}
		for i := range w {
			if err := match(w[i], g[i], fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		return nil
	}
	if !reflect.DeepEqual(want, got) {
		return fmt.Errorf("%s: got %v, want %v", path, got, want)
	}
	return nil
}
