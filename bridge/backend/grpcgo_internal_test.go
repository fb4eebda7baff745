package backend

import (
	"bytes"
	"testing"
)

// TestRawCodecCopies: what rawCodec gives grpc-go to send is not the
// call's request buffer, which the next call reuses (see
// TestGRPCGoEarlyReplyRequestBuffer); for small and pooled sizes.
func TestRawCodecCopies(t *testing.T) {
	for _, n := range []int{0, 10, 1 << 10, 1<<10 + 1, 1 << 20} {
		c := &Call{Request: bytes.Repeat([]byte{1}, n)}
		out, err := rawCodec{}.Marshal(&rawCall{c: c})
		if err != nil {
			t.Fatal(err)
		}
		for i := range c.Request {
			c.Request[i] = 2
		}
		if got := out.Materialize(); !bytes.Equal(got, bytes.Repeat([]byte{1}, n)) {
			t.Errorf("%d bytes: the marshalled request changed with the call's buffer", n)
		}
		out.Free()
	}
}
