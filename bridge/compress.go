package bridge

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/klauspost/compress/gzhttp"
	"github.com/klauspost/compress/gzip"
)

// compressMinSize is the smallest reply worth compressing: below it gzip's
// header and the work cost more than the bytes they save.
const compressMinSize = 1024

// gzipReplies wraps h so that its replies of compressMinSize bytes or more
// are gzip-compressed for clients whose Accept-Encoding asks for it
// (klauspost/compress's gzhttp, which also sets Vary: Accept-Encoding).
func gzipReplies(h http.Handler) http.Handler {
	wrap, err := gzhttp.NewWrapper(gzhttp.MinSize(compressMinSize), gzhttp.EnableZstd(false),
		gzhttp.ContentTypes([]string{"application/json"}))
	if err != nil {
		panic(err) // the options are constants
	}
	return wrap(h)
}

// acceptsGzip reports whether r's Accept-Encoding names gzip; a cheap
// look before the compressing writer is set up.
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header["Accept-Encoding"] {
		if strings.Contains(v, "gzip") {
			return true
		}
	}
	return false
}

// errDecodedTooLarge ends the reading of a compressed body whose
// decompressed size is over MaxBodyBytes.
var errDecodedTooLarge = errors.New("the decompressed body is larger than max_body_bytes")

// errBadEncoding ends the reading of a body that is not valid gzip.
var errBadEncoding = errors.New("the request body is not valid gzip")

// bodyReader is the reader of r's body, bounded to limit bytes as sent
// (http.MaxBytesReader) and, when the body is gzip-compressed
// (Content-Encoding: gzip), to limit bytes decompressed too, so that a
// small compressed body cannot grow into a large one. ok is false for a
// Content-Encoding other than gzip and identity.
func bodyReader(w http.ResponseWriter, r *http.Request, limit int64) (io.Reader, func(), bool) {
	body := http.MaxBytesReader(w, r.Body, limit)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return body, func() {}, true
	case "gzip", "x-gzip":
		gz := &gzipBody{src: errReader{r: body}, left: limit}
		return gz, gz.close, true
	}
	return nil, nil, false
}

// gzipBody decompresses a request body, at most left bytes of it.
type gzipBody struct {
	src  errReader
	zr   *gzip.Reader
	left int64
}

// errReader remembers the error of the compressed bytes' reading (a body
// over MaxBodyBytes as sent, a deadline, a client gone), which the gzip
// reader may return wrapped or not at all.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

func (g *gzipBody) Read(p []byte) (int, error) {
	if g.zr == nil {
		zr, err := gzip.NewReader(&g.src)
		if err != nil {
			return 0, g.fail()
		}
		g.zr = zr
	}
	if int64(len(p)) > g.left+1 {
		p = p[:g.left+1] // one byte more than allowed tells a body at the limit from one over it
	}
	n, err := g.zr.Read(p)
	if g.left -= int64(n); g.left < 0 {
		return n, errDecodedTooLarge
	}
	if err != nil && err != io.EOF {
		err = g.fail()
	}
	return n, err
}

// fail is the error of a failed decompression: the compressed bytes'
// own, or else that they are not gzip.
func (g *gzipBody) fail() error {
	if g.src.err != nil {
		return g.src.err
	}
	return errBadEncoding
}

func (g *gzipBody) close() {
	if g.zr != nil {
		g.zr.Close()
	}
}
