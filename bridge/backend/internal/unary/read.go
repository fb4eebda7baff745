package unary

import (
	"encoding/binary"
	"errors"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// A connError is a connection error (RFC 9113 section 5.4.1): the client
// sends GOAWAY with its code and closes the connection.
type connError struct {
	code uint32
	msg  string
}

func (e connError) Error() string { return e.msg }

// errProtocol closes a connection whose backend broke HTTP/2's rules.
var errProtocol = connError{errCodeProtocol, "HTTP/2 protocol error from the backend"}

var errFlowControl = connError{errCodeFlowControl, "the backend overflowed a flow-control window"}

// readLoop reads frames until the connection fails, then fails every call
// still open on it.
func (cn *conn) readLoop() {
	err := cn.read()
	var ce connError
	if errors.As(err, &ce) {
		cn.mu.Lock()
		cn.last = appendGoAway(nil, 0, ce.code) // the backend opens no streams
		cn.mu.Unlock()
	}
	cn.mu.Lock()
	cn.closed = true
	cn.draining.Store(true)
	cn.err = err
	lost := cn.lost
	if lost == nil {
		lost = status.Error(codes.Unavailable, "transport: the connection to the backend was lost")
	}
	open := make([]*Call, 0, len(cn.streams)+len(cn.pending))
	for _, call := range cn.pending {
		// A call that never had a stream cannot have reached the
		// backend: it is tried again, on another connection.
		cn.leftOutLocked(call)
		open = append(open, call)
	}
	for _, call := range cn.streams {
		open = append(open, call)
	}
	for _, call := range open {
		err := lost
		if call.refused {
			err = errUnsent
		}
		cn.endLocked(call, err)
	}
	cn.pending, cn.sending = nil, nil
	cn.releaseReaderLocked()
	cn.mu.Unlock()
	close(cn.done) // the writer closes nc
	cn.client.opts.Logger.Debug("connection to the backend closed", "address", cn.client.ep.address, "error", err)
	cn.client.forget(cn, len(open) > 0)
	for _, call := range open {
		call.complete()
	}
}

func (cn *conn) read() error {
	var hdr [frameHeaderLen]byte
	keepalive := cn.client.opts.KeepaliveTime > 0
	for first := true; ; first = false {
		if _, err := io.ReadFull(cn.br, hdr[:]); err != nil {
			return err
		}
		if keepalive {
			cn.readSome.Store(true)
		}
		h := parseFrameHeader(hdr[:])
		// The client never raises SETTINGS_MAX_FRAME_SIZE, and the server's
		// preface is a SETTINGS frame: anything else is not HTTP/2 (an
		// HTTP/1.1 response, say) and must not be waited for.
		if first && (h.typ != frameSettings || h.flags&flagAck != 0) {
			return errors.New("the backend does not speak HTTP/2")
		}
		if h.length > defaultMaxFrame {
			return connError{errCodeFrameSize, "a frame larger than SETTINGS_MAX_FRAME_SIZE from the backend"}
		}
		p, err := cn.br.Peek(h.length)
		if err != nil {
			return err
		}
		if err := cn.frame(h, p); err != nil {
			return err
		}
		cn.br.Discard(h.length)
	}
}

// frame handles one frame; an error closes the connection.
func (cn *conn) frame(h frameHeader, p []byte) error {
	if cn.hblockID != 0 && h.typ != frameContinuation {
		return errProtocol // a header block must not be interleaved
	}
	switch h.typ {
	case frameData:
		return cn.onData(h, p)
	case frameHeaders:
		q, ok := unpad(h, p)
		if !ok || h.stream == 0 {
			return errProtocol
		}
		if h.flags&flagEndHeaders == 0 {
			cn.hblock = append(cn.hblock[:0], q...)
			cn.hblockID, cn.hblockFlags = h.stream, h.flags
			return nil
		}
		return cn.onHeaders(h.stream, h.flags, q)
	case frameContinuation:
		if h.stream == 0 || h.stream != cn.hblockID {
			return errProtocol
		}
		cn.hblock = append(cn.hblock, p...)
		if len(cn.hblock) > maxHeaderBlock {
			return connError{errCodeEnhanceYourCalm, "a header block too large from the backend"}
		}
		if h.flags&flagEndHeaders == 0 {
			return nil
		}
		id := cn.hblockID
		cn.hblockID = 0
		err := cn.onHeaders(id, cn.hblockFlags, cn.hblock)
		if cap(cn.hblock) > 1<<20 {
			cn.hblock = nil
		}
		return err
	case frameRSTStream:
		if len(p) != 4 || h.stream == 0 {
			return errProtocol
		}
		cn.onReset(h.stream, binary.BigEndian.Uint32(p))
	case frameSettings:
		if h.stream != 0 || len(p)%6 != 0 || h.flags&flagAck != 0 && len(p) != 0 {
			return errProtocol
		}
		if h.flags&flagAck == 0 {
			return cn.onSettings(p)
		}
	case framePing:
		if h.stream != 0 || len(p) != 8 {
			return errProtocol
		}
		if h.flags&flagAck == 0 {
			cn.reply(append(appendFrameHeader(nil, 8, framePing, flagAck, 0), p...))
		}
	case frameGoAway:
		if h.stream != 0 || len(p) < 8 {
			return errProtocol
		}
		return cn.onGoAway(binary.BigEndian.Uint32(p)&maxStreamID, binary.BigEndian.Uint32(p[4:]), p[8:])
	case frameWindowUpdate:
		if len(p) != 4 {
			return errProtocol
		}
		return cn.onWindowUpdate(h.stream, binary.BigEndian.Uint32(p)&maxWindow)
	case framePushPromise:
		return errProtocol // the client's SETTINGS disable push
	}
	return nil // PRIORITY and unknown frame types are ignored
}

// reply queues a frame the backend asked for and wakes the writer; with
// maxReplies of them waiting, it waits for the writer before reading on.
func (cn *conn) reply(frame []byte) {
	cn.mu.Lock()
	cn.ctrl = append(cn.ctrl, frame...)
	cn.replies++
	for cn.replies >= maxReplies && !cn.broken {
		if cn.drained == nil {
			cn.drained = make(chan struct{})
		}
		ch := cn.drained
		cn.mu.Unlock()
		cn.kick()
		<-ch
		cn.mu.Lock()
	}
	cn.mu.Unlock()
	cn.kick()
}

func (cn *conn) onData(h frameHeader, p []byte) error {
	q, ok := unpad(h, p)
	if !ok || h.stream == 0 {
		return errProtocol
	}
	kick := false
	cn.mu.Lock()
	defer cn.mu.Unlock()
	// Padding counts against the windows too.
	if cn.recvUnacked += h.length; cn.recvUnacked >= connWindow/4 {
		kick = true
	}
	if call := cn.streams[h.stream]; call != nil {
		call.recvUnacked += h.length
		switch err := call.addData(q, cn.client.opts.MaxRecvMsgSize); {
		case err != nil:
			call.resetWith(errCodeCancel)
			cn.finishLocked(call, err)
		case h.flags&flagEndStream != 0:
			cn.finishLocked(call, status.Error(codes.Internal, "server closed the stream without sending trailers"))
		case call.recvUnacked >= streamWindow/4:
			cn.ctrl = appendWindowUpdate(cn.ctrl, call.id, uint32(call.recvUnacked))
			call.recvUnacked, kick = 0, true
		}
	}
	if kick {
		cn.kick()
	}
	return nil
}

func (cn *conn) onHeaders(id uint32, flags byte, block []byte) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	call := cn.streams[id]
	end := flags&flagEndStream != 0
	if err := cn.dec.decode(call, end, block); err != nil {
		// The HPACK state is lost: the connection cannot go on.
		return connError{errCodeCompression, "malformed HPACK from the backend"}
	}
	if call == nil {
		return nil
	}
	if !cn.answered.Load() {
		cn.answered.Store(true)
	}
	err := call.headersDone(end)
	if hook := cn.client.opts.OnAnswer; hook != nil && !call.block.informational {
		hook()
	}
	switch {
	case err != nil && !end:
		call.resetWith(errCodeProtocol)
	case err == nil && call.block.informational:
		return nil // 1xx: the response's headers are still to come
	case err == nil && !end:
		return nil
	case call.sent < call.size():
		// The backend ended the stream before the request was all sent:
		// end the client's side too, as grpc-go does, or the backend
		// counts the stream as open.
		call.resetWith(errCodeNo)
	}
	if err == nil {
		err = call.result()
	}
	cn.finishLocked(call, err)
	return nil
}

func (cn *conn) onReset(id uint32, code uint32) {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	call := cn.streams[id]
	if call == nil {
		return
	}
	if code == errCodeRefusedStream {
		call.refused = true
	}
	cn.finishLocked(call, resetStatus(code, call.deadline))
}

func (cn *conn) onSettings(p []byte) error {
	cn.mu.Lock()
	for ; len(p) >= 6; p = p[6:] {
		v := binary.BigEndian.Uint32(p[2:])
		switch binary.BigEndian.Uint16(p) {
		case settingHeaderTableSize:
			cn.enc.SetMaxDynamicTableSizeLimit(v)
		case settingEnablePush:
			if v > 1 {
				cn.mu.Unlock()
				return errProtocol
			}
		case settingMaxConcurrentStreams:
			cn.maxStreams = v
		case settingInitialWindowSize:
			if v > maxWindow {
				cn.mu.Unlock()
				return errFlowControl
			}
			delta := int64(v) - int64(cn.peerWindow)
			for _, call := range cn.streams {
				if int64(call.sendWin)+delta > maxWindow {
					cn.mu.Unlock()
					return errFlowControl
				}
			}
			cn.peerWindow = int32(v)
			for _, call := range cn.streams {
				call.sendWin += int32(delta)
			}
		case settingMaxFrameSize:
			if v < defaultMaxFrame || v > maxFrameLimit {
				cn.mu.Unlock()
				return errProtocol
			}
			cn.maxFrame = int(v)
		case settingMaxHeaderListSize:
			cn.maxHeaders = v
		}
	}
	if !cn.gotSettings {
		cn.gotSettings = true
		close(cn.settings)
	}
	cn.mu.Unlock()
	cn.reply(appendFrameHeader(nil, 0, frameSettings, flagAck, 0))
	return nil
}

// onGoAway stops new calls on the connection; calls the backend will not
// process (ids above last, and those still waiting for a stream) end as
// refused, to be retried elsewhere. A GOAWAY with an error code is the
// backend's last word: the calls it left open end too, and the
// connection is closed. GOAWAY(ENHANCE_YOUR_CALM, "too_many_pings")
// makes new connections ping half as often.
func (cn *conn) onGoAway(last, code uint32, debug []byte) error {
	cn.mu.Lock()
	if code == errCodeNo && last > 0 && last < cn.nextID {
		cn.answered.Store(true) // the backend took calls: not a storm
	}
	cn.mu.Unlock()
	cn.draining.Store(true)
	if code == errCodeEnhanceYourCalm && string(debug) == "too_many_pings" && cn.kaTime > 0 {
		cn.client.calmDown(cn)
	}
	cn.client.retire(cn)
	cn.mu.Lock()
	refused := status.Error(codes.Unavailable, "transport: received GOAWAY from the backend")
	for id, call := range cn.streams {
		if id > last {
			cn.leftOutLocked(call)
			cn.finishLocked(call, refused)
		}
	}
	for len(cn.pending) > 0 {
		call := cn.pending[0]
		cn.leftOutLocked(call)
		cn.finishLocked(call, refused)
	}
	cn.mu.Unlock()
	if code != errCodeNo {
		cn.shut(status.Error(codes.Unavailable, "transport: the backend closed the connection with GOAWAY "+rstCodeName(code)))
		return nil
	}
	cn.kick() // the writer closes the connection once it is idle
	return nil
}

func (cn *conn) onWindowUpdate(id uint32, inc uint32) error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if id == 0 {
		if inc == 0 {
			return errProtocol
		}
		if cn.sendWindow+int64(inc) > maxWindow {
			return errFlowControl
		}
		cn.sendWindow += int64(inc)
	} else if call := cn.streams[id]; call != nil {
		switch {
		case inc == 0:
			call.resetWith(errCodeProtocol)
			cn.finishLocked(call, status.Error(codes.Internal, MsgZeroWindowUpdate))
			return nil
		case int64(call.sendWin)+int64(inc) > maxWindow:
			// RFC 9113 6.9.1: a stream error of FLOW_CONTROL_ERROR, whose
			// code grpc-go's mapping of RST_STREAM codes makes 8.
			call.resetWith(errCodeFlowControl)
			cn.finishLocked(call, status.Error(codes.ResourceExhausted, MsgWindowOverflow))
			return nil
		}
		call.sendWin += int32(inc)
	}
	if len(cn.sending) > 0 {
		cn.kick()
	}
	return nil
}
