package binary

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStart(t *testing.T) {
	p := Start(t, []string{"sh", "-c", `echo one; echo '{"msg":"listening","addr":"127.0.0.1:1"}' >&2; echo three; exec sleep 60`}, Options{Name: "sh"})
	if got := p.Line(t, "a line with t", func(l string) bool { return strings.Contains(l, "t") }); got != `{"msg":"listening","addr":"127.0.0.1:1"}` {
		t.Fatalf("Line = %q", got)
	}
	if got := p.Line(t, "three", func(l string) bool { return l == "three" }); got != "three" {
		t.Fatalf("Line = %q", got)
	}
	if out := p.Output(); !strings.Contains(out, "one\n") || !strings.Contains(out, "three\n") {
		t.Fatalf("Output = %q", out)
	}
	if !p.Stop(syscall.SIGTERM, 10*time.Second) {
		t.Fatal("sleep did not exit on SIGTERM")
	}
	if p.State() == nil || p.State().Success() {
		t.Fatalf("State = %v, want killed by SIGTERM", p.State())
	}

	q := Start(t, []string{"sh", "-c", `echo 'time=x level=INFO msg=listening addr=127.0.0.1:2'; exit 3`}, Options{})
	if got := q.Listening(t); got != "127.0.0.1:2" {
		t.Fatalf("Listening = %q", got)
	}
	if code := q.Wait(t, 10*time.Second); code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
}
