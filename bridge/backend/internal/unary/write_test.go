package unary

import (
	"context"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestWriteTimeout: a backend that grants large windows and then stops
// reading must not hold a call (nor the connection) past WriteTimeout.
func TestWriteTimeout(t *testing.T) {
	t.Parallel()
	lis, target := listen(t, "tcp")
	stuck := make(chan net.Conn, 1)
	go func() {
		nc, err := lis.Accept()
		if err != nil {
			return
		}
		stuck <- nc
		var b []byte
		b = appendFrameHeader(b, 6, frameSettings, 0, 0)
		b = binary.BigEndian.AppendUint16(b, settingInitialWindowSize)
		b = binary.BigEndian.AppendUint32(b, maxWindow)
		b = appendWindowUpdate(b, 0, maxWindow-defaultWindow)
		nc.Write(b) // and never read
	}()
	t.Cleanup(func() {
		select {
		case nc := <-stuck:
			nc.Close()
		default:
		}
	})
	c := newClient(t, target, Options{WriteTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	start := time.Now()
	call := &Call{Method: "/test.Svc/Big", Request: make([]byte, 64<<20)} // more than the socket buffers hold
	err := c.Invoke(ctx, call)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("got %v, want Unavailable", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the call took %s, want it ended by the write timeout", took)
	}
}
