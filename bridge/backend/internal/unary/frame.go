package unary

import "encoding/binary"

// HTTP/2 frame types and flags (RFC 9113 section 6).
const (
	frameData         = 0x0
	frameHeaders      = 0x1
	framePriority     = 0x2
	frameRSTStream    = 0x3
	frameSettings     = 0x4
	framePushPromise  = 0x5
	framePing         = 0x6
	frameGoAway       = 0x7
	frameWindowUpdate = 0x8
	frameContinuation = 0x9

	flagEndStream  = 0x1
	flagAck        = 0x1
	flagEndHeaders = 0x4
	flagPadded     = 0x8
	flagPriority   = 0x20
)

// SETTINGS parameters.
const (
	settingHeaderTableSize      = 0x1
	settingEnablePush           = 0x2
	settingMaxConcurrentStreams = 0x3
	settingInitialWindowSize    = 0x4
	settingMaxFrameSize         = 0x5
	settingMaxHeaderListSize    = 0x6
)

// HTTP/2 error codes.
const (
	errCodeNo              = 0x0
	errCodeProtocol        = 0x1
	errCodeInternal        = 0x2
	errCodeFlowControl     = 0x3
	errCodeFrameSize       = 0x6
	errCodeRefusedStream   = 0x7
	errCodeCancel          = 0x8
	errCodeCompression     = 0x9
	errCodeEnhanceYourCalm = 0xb
	errCodeInadequateSec   = 0xc
	errCodeHTTP11Required  = 0xd
)

const (
	clientPreface   = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
	frameHeaderLen  = 9
	defaultMaxFrame = 16384
	maxFrameLimit   = 1<<24 - 1
	defaultWindow   = 65535
	maxWindow       = 1<<31 - 1
	maxStreamID     = 1<<31 - 1

	// streamWindow and connWindow are the receive windows the client
	// grants: large, so that responses of ordinary size never wait for a
	// WINDOW_UPDATE.
	streamWindow = 4 << 20
	connWindow   = 16 << 20
	// maxHeaderBlock bounds one header block (HEADERS and CONTINUATIONs),
	// as grpc-go's default header list size does.
	maxHeaderBlock = 16 << 20
)

func appendFrameHeader(b []byte, length int, typ, flags byte, stream uint32) []byte {
	return append(b, byte(length>>16), byte(length>>8), byte(length), typ, flags,
		byte(stream>>24)&0x7f, byte(stream>>16), byte(stream>>8), byte(stream))
}

func appendWindowUpdate(b []byte, stream uint32, inc uint32) []byte {
	b = appendFrameHeader(b, 4, frameWindowUpdate, 0, stream)
	return binary.BigEndian.AppendUint32(b, inc&maxWindow)
}

func appendRSTStream(b []byte, stream uint32, code uint32) []byte {
	b = appendFrameHeader(b, 4, frameRSTStream, 0, stream)
	return binary.BigEndian.AppendUint32(b, code)
}

func appendGoAway(b []byte, last uint32, code uint32) []byte {
	b = appendFrameHeader(b, 8, frameGoAway, 0, 0)
	b = binary.BigEndian.AppendUint32(b, last&maxStreamID)
	return binary.BigEndian.AppendUint32(b, code)
}

// appendSettings appends the client's SETTINGS: no server push, and its
// stream receive window.
func appendSettings(b []byte) []byte {
	b = appendFrameHeader(b, 12, frameSettings, 0, 0)
	b = binary.BigEndian.AppendUint16(b, settingEnablePush)
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, settingInitialWindowSize)
	return binary.BigEndian.AppendUint32(b, streamWindow)
}

// frameHeader is a parsed frame header.
type frameHeader struct {
	length int
	typ    byte
	flags  byte
	stream uint32
}

func parseFrameHeader(b []byte) frameHeader {
	return frameHeader{
		length: int(b[0])<<16 | int(b[1])<<8 | int(b[2]),
		typ:    b[3],
		flags:  b[4],
		stream: binary.BigEndian.Uint32(b[5:9]) & maxStreamID,
	}
}

// unpad strips the padding (and for HEADERS, the priority fields) of a
// frame's payload; ok is false when the padding is longer than the frame.
func unpad(h frameHeader, p []byte) ([]byte, bool) {
	if h.flags&flagPadded != 0 {
		if len(p) < 1 {
			return nil, false
		}
		n := int(p[0])
		p = p[1:]
		if n > len(p) {
			return nil, false
		}
		p = p[:len(p)-n]
	}
	if h.typ == frameHeaders && h.flags&flagPriority != 0 {
		if len(p) < 5 {
			return nil, false
		}
		p = p[5:]
	}
	return p, true
}
