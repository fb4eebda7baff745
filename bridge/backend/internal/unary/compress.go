package unary

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// checkPayload checks a message's compressed flag against the response's
// grpc-encoding, as grpc-go's checkRecvPayload does.
func (call *Call) checkPayload(flag byte) error {
	switch flag {
	case 0:
		return nil
	case 1:
		switch call.encoding {
		case "", "identity":
			return status.Error(codes.Internal, "grpc: compressed flag set with identity or empty encoding")
		case "gzip":
			return nil
		}
		return status.Errorf(codes.Internal, "grpc: Decompressor is not installed for grpc-encoding %q", call.encoding)
	}
	return status.Errorf(codes.Internal, "grpc: received unexpected payload format %d", flag)
}

var gzipReaders sync.Pool // *gzip.Reader

// decompress replaces the gzip response with what it decompresses to, at
// most max bytes.
func (call *Call) decompress(max int) error {
	b, err := inflate(call.Response, max)
	if err == nil {
		call.Response = b
	}
	return err
}

// decompressStream replaces the compressed messages of a Stream call with
// what they decompress to, at most max bytes each.
func (call *Call) decompressStream(max int) error {
	var out []byte
	for b := call.Response; len(b) >= 5; {
		n := int(binary.BigEndian.Uint32(b[1:5]))
		m := b[5 : 5+n]
		if b[0] == 1 {
			var err error
			if m, err = inflate(m, max); err != nil {
				return err
			}
		}
		out = binary.BigEndian.AppendUint32(append(out, 0), uint32(len(m)))
		out = append(out, m...)
		b = b[5+n:]
	}
	call.Response = out
	return nil
}

// inflate returns what the gzip message b decompresses to, at most max
// bytes.
func inflate(b []byte, max int) ([]byte, error) {
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	var err error
	if zr == nil {
		zr, err = gzip.NewReader(bytes.NewReader(b))
	} else {
		err = zr.Reset(bytes.NewReader(b))
	}
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the received message: %v", err)
	}
	defer gzipReaders.Put(zr)
	var out bytes.Buffer
	n, err := out.ReadFrom(io.LimitReader(zr, int64(max)+1))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpc: failed to decompress the received message: %v", err)
	}
	if n > int64(max) {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: received message after decompression larger than max %d", max)
	}
	return out.Bytes(), nil
}
