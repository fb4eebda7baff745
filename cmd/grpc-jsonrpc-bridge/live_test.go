package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLiveCurl follows demo.v1.Notes.WatchNotes with "follow": true with
// curl -N, as docs/streaming.md and the README show, in both live forms,
// against demo (serve's own front, --stream-keepalive from the command
// line): the note that exists arrives at once, before the stream ends; a
// note created afterwards arrives within 50 ms of the call that creates
// it; an idle stream gets keepalives every stream_keepalive; and the
// access log line of the stream, with its message count, is written once
// curl goes away.
func TestLiveCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed")
		}
		t.Skip("curl is not installed (Debian package curl)")
	}
	p := start(t, "demo", "--listen", "127.0.0.1:0", "--stream-keepalive", "300ms", "--log-format", "json")
	var root string
	p.stdout.until(t, "the banner's URL", func(l string) bool {
		_, u, ok := strings.Cut(l, "JSON-RPC 2.0 at ")
		root = u
		return ok
	})
	for i, tc := range []struct {
		accept    string
		keepalive string // the line of a keepalive
		message   func(line string) (string, bool)
	}{
		{"text/event-stream", ": keepalive", func(l string) (string, bool) { return strings.CutPrefix(l, "data: ") }},
		{"application/x-ndjson", "", func(l string) (string, bool) { return l, l != "" }},
	} {
		t.Run(tc.accept, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			tag := []string{"watched-sse", "watched-ndjson"}[i]
			if status, body := do(t, root, `{"jsonrpc":"2.0","id":1,"method":"demo.v1.Notes.CreateNote","params":{"note":{"title":"Before","tags":["`+tag+`"]}}}`); status != 200 {
				t.Fatalf("CreateNote: HTTP %d %s", status, body)
			}
			watch := `{"jsonrpc":"2.0","id":"w","method":"demo.v1.Notes.WatchNotes","params":{"tags":["` + tag + `"],"follow":true}}`
			cmd := exec.CommandContext(ctx, curl, "-N", "-s", "-H", "Accept: "+tc.accept, root, "-d", watch)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cancel()
				cmd.Wait()
			}()
			type line struct {
				at   time.Time
				text string
			}
			lines := make(chan line, 100)
			go func() {
				defer close(lines)
				sc := bufio.NewScanner(out)
				for sc.Scan() {
					select {
					case lines <- line{time.Now(), sc.Text()}:
					case <-ctx.Done():
					}
				}
			}()
			// next returns the next message curl printed, skipping the
			// lines between them, and counts the keepalives.
			keepalives := 0
			next := func() (time.Time, map[string]any) {
				t.Helper()
				timeout := time.After(waitLimit)
				for {
					select {
					case l, ok := <-lines:
						if !ok {
							t.Fatal("curl's output ended, want another message")
						}
						if l.text == tc.keepalive {
							keepalives++
						}
						if s, ok := tc.message(l.text); ok {
							var m map[string]any
							if err := json.Unmarshal([]byte(s), &m); err != nil {
								t.Fatalf("curl printed %q, not a JSON-RPC message", l.text)
							}
							return l.at, m
						}
					case <-timeout:
						t.Fatal("no message from curl within", waitLimit)
					}
				}
			}
			noteOf := func(m map[string]any) map[string]any {
				t.Helper()
				p, _ := m["params"].(map[string]any)
				note, _ := p["message"].(map[string]any)
				if m["method"] != "rpc.stream.message" || p["stream"] != "w" || note == nil {
					t.Fatalf("curl printed %v, want the stream's notification", m)
				}
				return note
			}
			if _, m := next(); noteOf(m)["title"] != "Before" {
				t.Errorf("the first message is %v, want the note that existed", m)
			}
			// On a loaded machine one note may be held up by the scheduler,
			// where a bridge that buffers holds up every one: 3 tries each.
			messages := 1
			for _, title := range []string{"After 1", "After 2"} {
				var took []time.Duration
				for attempt := range 3 {
					title := fmt.Sprintf("%s.%d", title, attempt)
					startAt := time.Now()
					status, body := do(t, root, `{"jsonrpc":"2.0","id":2,"method":"demo.v1.Notes.CreateNote","params":{"note":{"title":"`+title+`","tags":["`+tag+`"]}}}`)
					if status != 200 {
						t.Fatalf("CreateNote: HTTP %d %s", status, body)
					}
					at, m := next()
					messages++
					if noteOf(m)["title"] != title {
						t.Fatalf("got %v, want the note %q", m, title)
					}
					if took = append(took, at.Sub(startAt)); took[len(took)-1] <= 50*time.Millisecond {
						break
					}
				}
				if d := took[len(took)-1]; d > 50*time.Millisecond {
					t.Errorf("the notes %q reached curl %v after the calls that created them, want one within 50ms", title, took)
				} else {
					t.Logf("the note %q reached curl %s after the call that created it", title, d)
				}
			}
			// Idle: keepalives, every 300ms.
			idle := time.Now()
			for keepalives < 2 {
				select {
				case l := <-lines:
					if l.text == tc.keepalive {
						keepalives++
					}
				case <-time.After(waitLimit):
					t.Fatalf("%d keepalives in %s, want 2", keepalives, waitLimit)
				}
			}
			if d := time.Since(idle); d < 500*time.Millisecond || d > 2*time.Second {
				t.Errorf("2 keepalives took %s, want about 600ms (--stream-keepalive 300ms)", d)
			}
			cancel() // curl goes away: the stream ends, and its log line is written
			p.stderr.until(t, "the stream's access log line", func(l string) bool {
				var rec struct {
					Msg, Method string
					Code        int
					Messages    *int
				}
				return json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "call" && rec.Method == "demo.v1.Notes.WatchNotes" &&
					rec.Code == 1 && rec.Messages != nil && *rec.Messages == messages
			})
		})
	}
}

// TestLiveCurlREADME runs the README's curl -N example against demo, as
// printed there, and the command it says to run beside it: the note that
// command creates reaches the first curl at once (TestLiveCurl holds it
// to 50 ms; here the bound takes in the start of a shell and a curl).
func TestLiveCurlREADME(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed")
		}
		t.Skip("curl is not installed (Debian package curl)")
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	if i := strings.Index(section, "\n## Streaming\n"); i >= 0 {
		section = section[i:]
	}
	if i := strings.Index(section[1:], "\n## "); i >= 0 {
		section = section[:i+1]
	}
	var commands []string
	for _, block := range strings.Split(section, "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		commands = append(commands, strings.TrimSpace(block))
	}
	if len(commands) != 2 || !strings.HasPrefix(commands[0], "curl -N ") {
		t.Fatalf("the README's Streaming section has the commands %q, want curl -N and the call beside it", commands)
	}
	p := start(t, "demo", "--listen", "127.0.0.1:0", "--stream-keepalive", "100ms")
	var root string
	p.stdout.until(t, "the banner's URL", func(l string) bool {
		_, u, ok := strings.Cut(l, "JSON-RPC 2.0 at ")
		root = u
		return ok
	})
	sh := func(ctx context.Context, command string) *exec.Cmd {
		c := exec.CommandContext(ctx, "sh", "-c", "exec "+strings.ReplaceAll(command, "http://127.0.0.1:8080/", root))
		c.WaitDelay = time.Second
		return c
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	follow := sh(ctx, commands[0])
	out, err := follow.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 10)
	read := make(chan struct{})
	go func() {
		defer close(read)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
			}
		}
	}()
	defer func() {
		cancel()
		<-read
		follow.Wait()
	}()
	// The stream is open once its first keepalive, an empty line, comes.
	select {
	case l := <-lines:
		if l != "" {
			t.Fatalf("the README's curl -N printed %q, want a keepalive first", l)
		}
	case <-time.After(waitLimit):
		t.Fatal("the README's curl -N printed nothing")
	}
	begin := time.Now()
	created, err := sh(t.Context(), commands[1]).Output()
	if err != nil || !strings.Contains(string(created), `"title":"Call Bob"`) {
		t.Fatalf("the README's second command: %v %s", err, created)
	}
	select {
	case l := <-lines:
		if !strings.Contains(l, `"method":"rpc.stream.message"`) || !strings.Contains(l, `"title":"Call Bob"`) {
			t.Fatalf("the README's curl -N printed %q, want the new note's notification", l)
		}
		if d := time.Since(begin); d > time.Second {
			t.Errorf("the note reached curl -N %s after the command that created it started, want it at once", d)
		} else {
			t.Logf("the note reached curl -N %s after the command that created it started", d)
		}
	case <-time.After(waitLimit):
		t.Fatal("the README's curl -N printed nothing")
	}
}

// TestLiveShutdown: a bridge told to stop ends the streams it answers
// live at once, with the error 14 DRAINING as their last message, and
// exits well before shutdown_timeout, cleanly, rather than waiting for
// them and then cutting them.
func TestLiveShutdown(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed")
		}
		t.Skip("curl is not installed (Debian package curl)")
	}
	p := start(t, "demo", "--listen", "127.0.0.1:0", "--shutdown-timeout", "20s")
	var root string
	p.stdout.until(t, "the banner's URL", func(l string) bool {
		_, u, ok := strings.Cut(l, "JSON-RPC 2.0 at ")
		root = u
		return ok
	})
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, "-N", "-s", "-H", "Accept: application/x-ndjson", root,
		"-d", `{"jsonrpc":"2.0","id":1,"method":"demo.v1.Notes.WatchNotes","params":{"follow":true}}`)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || !strings.Contains(sc.Text(), `"method":"rpc.stream.message"`) {
		t.Fatalf("curl printed %q, want the first note", sc.Text())
	}
	start := time.Now()
	if code := p.stop(t); code != exitOK {
		t.Errorf("exit code %d, want 0", code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the bridge took %s to stop with a live stream open, want it at once", d)
	}
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("curl: %v", err)
	}
	var end struct {
		ID    int
		Error struct {
			Code int
			Data struct{ Details []struct{ Reason string } }
		}
	}
	if json.Unmarshal([]byte(last), &end) != nil || end.ID != 1 || end.Error.Code != 14 || len(end.Error.Data.Details) != 1 || end.Error.Data.Details[0].Reason != "DRAINING" {
		t.Errorf("curl's last line is %q, want the reply with the error 14 DRAINING", last)
	}
}
