package h1

import (
	"errors"
	"io"
	"net/http"
)

// body is the body of a request h1 serves: Content-Length bytes, from the
// buffer first.
type body struct {
	cn     *conn
	n      int64 // bytes left
	closed bool
	broken bool  // reading it failed: the connection is done
	err    error // why
}

func (b *body) Read(p []byte) (int, error) {
	if b.closed {
		return 0, http.ErrBodyReadAfterClose
	}
	if b.err != nil {
		return 0, b.err // as net/http's: once failed, always
	}
	if b.n <= 0 {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > b.n {
		p = p[:b.n]
	}
	cn := b.cn
	var n int
	var err error
	if cn.r < cn.w {
		n = copy(p, cn.buf[cn.r:cn.w])
		cn.r += n
	} else {
		n, err = cn.read(p)
	}
	b.n -= int64(n)
	if b.n == 0 {
		cn.armWatch()
		return n, io.EOF
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.broken, b.err = true, err
	}
	return n, err
}

func (b *body) Close() error {
	b.closed = true
	return nil
}
