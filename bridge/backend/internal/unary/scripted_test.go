package unary

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// scriptPeer is an HTTP/2 server whose conversation a test scripts frame
// by frame: script runs once for each connection it accepts, and the
// connection closes when script returns.
type scriptPeer struct {
	conns atomic.Int32  // connections accepted so far
	pings atomic.Int32  // the client's PINGs (not acks) read by next, on all connections
	stop  chan struct{} // closed when the test ends
}

// rawConn is one connection of a scriptPeer.
type rawConn struct {
	t    testing.TB
	peer *scriptPeer
	n    int32 // the connection's number, from 1
	nc   net.Conn
	fr   *http2.Framer
	stop <-chan struct{}
	// ackPings makes next answer the client's PINGs, as a server does.
	ackPings bool
	wmu      sync.Mutex // serializes writes
}

// serveScript runs a scriptPeer on a new listener and returns its target.
// The test's cleanup closes the connections and waits for the scripts.
func serveScript(t testing.TB, script func(rc *rawConn)) (string, *scriptPeer) {
	t.Helper()
	p := &scriptPeer{stop: make(chan struct{})}
	lis, target := listen(t, "tcp")
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after acceptLoop's cleanup has closed the connections
	acceptLoop(t, lis, func(nc net.Conn) {
		n := p.conns.Add(1)
		fr := http2.NewFramer(nc, nc)
		fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
		fr.SetMaxReadFrameSize(defaultMaxFrame) // the client must keep to it
		fr.AllowIllegalWrites = true
		rc := &rawConn{t: t, peer: p, n: n, nc: nc, fr: fr, stop: p.stop, ackPings: true}
		wg.Go(func() {
			defer nc.Close()
			script(rc)
		})
	})
	t.Cleanup(func() { close(p.stop) })
	return target, p
}

// handshake sends the server's SETTINGS and reads the client's preface.
func (rc *rawConn) handshake(settings ...http2.Setting) bool {
	rc.write(func(fr *http2.Framer) { fr.WriteSettings(settings...) })
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(rc.nc, preface); err != nil {
		return false
	}
	if string(preface) != http2.ClientPreface {
		rc.t.Errorf("connection %d began with %q, not the client preface", rc.n, preface)
		return false
	}
	return true
}

// write runs f with the framer, holding the write lock.
func (rc *rawConn) write(f func(fr *http2.Framer)) {
	rc.wmu.Lock()
	defer rc.wmu.Unlock()
	f(rc.fr)
}

// next reads the next frame, acknowledging SETTINGS (and PINGs, with
// ackPings) as it goes; the frame is returned all the same. A DataFrame's
// Data is valid until the next call only.
func (rc *rawConn) next() (http2.Frame, error) {
	f, err := rc.fr.ReadFrame()
	if err != nil {
		return nil, err
	}
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			rc.write(func(fr *http2.Framer) { fr.WriteSettingsAck() })
		}
	case *http2.PingFrame:
		if f.IsAck() {
			break
		}
		rc.peer.pings.Add(1)
		if rc.ackPings {
			rc.write(func(fr *http2.Framer) { fr.WritePing(true, f.Data) })
		}
	}
	return f, nil
}

// discard reads and drops frames until the connection ends.
func (rc *rawConn) discard() {
	for {
		if _, err := rc.next(); err != nil {
			return
		}
	}
}

// hpackBlock encodes fields, name and value alternately, with a fresh
// encoder: the block refers to no entry of the client's dynamic table.
func hpackBlock(fields ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for i := 0; i < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return buf.Bytes()
}

// writeBlock writes a header block as HEADERS and CONTINUATION frames of
// at most 16 KiB.
func writeBlock(fr *http2.Framer, id uint32, block []byte, endStream bool) {
	n := min(len(block), defaultMaxFrame)
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndStream: endStream, EndHeaders: n == len(block), BlockFragment: block[:n]})
	for block = block[n:]; len(block) > 0; block = block[n:] {
		n = min(len(block), defaultMaxFrame)
		fr.WriteContinuation(id, n == len(block), block[:n])
	}
}

// headers writes a header block of fields on stream id.
func (rc *rawConn) headers(id uint32, endStream bool, fields ...string) {
	rc.write(func(fr *http2.Framer) { writeBlock(fr, id, hpackBlock(fields...), endStream) })
}

// ok answers stream id with msg and status OK, in the ordinary three frames.
func (rc *rawConn) ok(id uint32, msg []byte) {
	rc.write(func(fr *http2.Framer) {
		writeBlock(fr, id, hpackBlock(":status", "200", "content-type", "application/grpc"), false)
		for b := grpcBody(string(msg)); len(b) > 0; {
			n := min(len(b), defaultMaxFrame)
			fr.WriteData(id, false, b[:n])
			b = b[n:]
		}
		writeBlock(fr, id, hpackBlock("grpc-status", "0"), true)
	})
}

// rawRequest is a request a rawConn has read.
type rawRequest struct {
	id     uint32
	path   string
	header []hpack.HeaderField
	body   []byte // the message, without its 5-byte prefix
	at     time.Time
}

// requests reads frames and calls f with each request once its stream
// has ended, granting back the flow-control windows of the DATA it reads,
// as a server does; it returns when the connection ends or f returns
// false.
func (rc *rawConn) requests(f func(r *rawRequest) bool) {
	open := map[uint32]*rawRequest{}
	for {
		fr, err := rc.next()
		if err != nil {
			return
		}
		switch fr := fr.(type) {
		case *http2.MetaHeadersFrame:
			r := &rawRequest{id: fr.StreamID, header: fr.Fields}
			for _, hf := range fr.Fields {
				if hf.Name == ":path" {
					r.path = hf.Value
				}
			}
			open[fr.StreamID] = r
		case *http2.DataFrame:
			r := open[fr.StreamID]
			if n := fr.Length; n > 0 {
				rc.write(func(w *http2.Framer) {
					w.WriteWindowUpdate(0, n)
					if !fr.StreamEnded() && r != nil {
						w.WriteWindowUpdate(fr.StreamID, n)
					}
				})
			}
			if r == nil {
				continue
			}
			r.body = append(r.body, fr.Data()...)
			if fr.StreamEnded() {
				delete(open, fr.StreamID)
				if len(r.body) >= 5 && int(binary.BigEndian.Uint32(r.body[1:])) == len(r.body)-5 {
					r.body = r.body[5:]
				} else {
					rc.t.Errorf("stream %d: a malformed message of %d bytes", r.id, len(r.body))
				}
				r.at = time.Now()
				if !f(r) {
					return
				}
			}
		case *http2.RSTStreamFrame:
			delete(open, fr.StreamID)
		}
	}
}

// echo answers every request with its own message.
func (rc *rawConn) echo() {
	rc.requests(func(r *rawRequest) bool {
		rc.ok(r.id, r.body)
		return true
	})
}

// field is the value of the header field name in fields, "" if none.
func field(fields []hpack.HeaderField, name string) string {
	for _, f := range fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}
