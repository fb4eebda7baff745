package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// lockedBuffer is a bytes.Buffer safe for the flusher and the test.
type lockedBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes++
	return l.b.Write(p)
}

func (l *lockedBuffer) snapshot() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String(), l.writes
}

func TestFlushWriter(t *testing.T) {
	t.Run("lines arrive within the interval, in order, in few writes", func(t *testing.T) {
		var out lockedBuffer
		f := newFlushWriter(&out, 10*time.Millisecond)
		defer f.Close()
		var want strings.Builder
		for i := range 100 {
			line := fmt.Sprintf("line %d\n", i)
			want.WriteString(line)
			f.Write([]byte(line))
		}
		await.Until(t, 5*time.Second, "the 100 lines in order", func() bool {
			got, _ := out.snapshot()
			return got == want.String()
		})
		if _, writes := out.snapshot(); writes >= 100 {
			t.Errorf("got %d writes for 100 lines, want them batched", writes)
		}
	})
	t.Run("a full buffer is written at once", func(t *testing.T) {
		var out lockedBuffer
		f := newFlushWriter(&out, time.Hour)
		defer f.Close()
		f.Write(bytes.Repeat([]byte("x"), accessBufferBytes))
		if got, _ := out.snapshot(); len(got) != accessBufferBytes {
			t.Errorf("got %d bytes written, want %d", len(got), accessBufferBytes)
		}
	})
	t.Run("Close writes what is left and is safe twice", func(t *testing.T) {
		var out lockedBuffer
		f := newFlushWriter(&out, time.Hour)
		f.Write([]byte("last\n"))
		f.Close()
		f.Close()
		if got, _ := out.snapshot(); got != "last\n" {
			t.Errorf("got %q, want %q", got, "last\n")
		}
	})
	t.Run("concurrent writers keep whole lines", func(t *testing.T) {
		var out lockedBuffer
		f := newFlushWriter(&out, time.Millisecond)
		var wg sync.WaitGroup
		for w := range 8 {
			wg.Go(func() {
				for i := range 200 {
					f.Write(fmt.Appendf(nil, "w%d-%d\n", w, i))
				}
			})
		}
		wg.Wait()
		f.Close()
		got, _ := out.snapshot()
		lines := strings.Split(strings.TrimSuffix(got, "\n"), "\n")
		if len(lines) != 1600 {
			t.Fatalf("got %d lines, want 1600", len(lines))
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "w") || !strings.Contains(l, "-") {
				t.Fatalf("got a broken line %q", l)
			}
		}
	})
}
