package redislimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
)

// TestClassify: a failed round trip is named by its kind, for /readyz; a
// store that closed or reset its connections (killed, restarted) is as
// unreachable as one that refuses new ones.
func TestClassify(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want string
	}{
		{"deadline", context.DeadlineExceeded, "timeout"},
		{"read timeout", &net.OpError{Op: "read", Err: timeoutErr{}}, "timeout"},
		{"refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, "unreachable"},
		{"closed by the store", io.EOF, "unreachable"},
		{"closed mid-reply", fmt.Errorf("redis: %w", io.ErrUnexpectedEOF), "unreachable"},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), "unreachable"},
		{"broken pipe", fmt.Errorf("write: %w", syscall.EPIPE), "unreachable"},
		{"wrong password", errors.New("WRONGPASS invalid username-password pair"), "auth"},
		{"no password", errors.New("NOAUTH Authentication required."), "auth"},
		{"script error", errors.New("ERR Error running script"), "error"},
	} {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("%s: classify(%v) = %s, want %s", tt.name, tt.err, got, tt.want)
		}
	}
}

type timeoutErr struct{}

func (timeoutErr) Error() string { return "i/o timeout" }
func (timeoutErr) Timeout() bool { return true }
