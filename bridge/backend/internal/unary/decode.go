package unary

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// maxHeaderList bounds the decoded size of a response header list (names
// and values plus 32 bytes a field, as RFC 9113 counts it): grpc-go's
// default.
const maxHeaderList = 16 << 20

// blockState is what one response header block said.
type blockState struct {
	initial       bool // the first block of the response, or trailers-only
	trailers      bool // metadata goes to Trailer
	informational bool // a 1xx response
	tooLarge      bool
	grpcContent   bool
	contentType   string
	httpStatus    string
	hasCode       bool
	code          codes.Code
	message       string
	details       []string
	statusErr     error // a malformed grpc-status
	fieldErr      error // a malformed metadata value
	encoding      string
	// RFC 9113 section 8.2's rules (see checkField).
	sawRegular bool
	pseudos    int    // the pseudo-headers seen, as bits
	invalid    string // the first malformed field's reason
	pseudoErr  string // the first unknown or repeated pseudo-header's
}

func (bs *blockState) malformed(name string, err error) {
	if bs.fieldErr == nil {
		bs.fieldErr = status.Errorf(codes.Internal, "transport: malformed %s: %v", name, err)
	}
}

// headerDecoder decodes the backend's header blocks into the state of
// their calls: the reader goroutine's own.
type headerDecoder struct {
	dec  *hpack.Decoder
	call *Call // the call whose header block is being decoded
	size int   // the decoded size of the header list so far
}

func (d *headerDecoder) init() {
	d.dec = hpack.NewDecoder(4096, d.emit)
	d.dec.SetMaxStringLength(maxHeaderBlock)
}

// decode decodes a header block of call's stream into call.block, the
// headers or trailers of its response by end (END_STREAM). With call nil
// (a stream that has ended) the block is decoded for the HPACK state
// alone. An error means the HPACK state is lost.
func (d *headerDecoder) decode(call *Call, end bool, block []byte) error {
	if call != nil {
		call.block = blockState{trailers: call.gotHeaders || end, initial: !call.gotHeaders}
	}
	d.call, d.size = call, 0
	d.dec.SetEmitEnabled(call != nil) // a block of a call that ended is decoded for the HPACK state alone
	_, err := d.dec.Write(block)
	if err == nil {
		err = d.dec.Close()
	}
	d.call = nil
	return err
}

// emit takes one decoded header field of the block being read.
func (d *headerDecoder) emit(f hpack.HeaderField) {
	call := d.call
	if call == nil {
		return
	}
	bs := &call.block
	if !bs.checkField(f) {
		d.dec.SetEmitEnabled(false) // malformed: the rest is decoded for the HPACK state alone
		return
	}
	if d.size += int(f.Size()); d.size > maxHeaderList {
		bs.tooLarge = true
		d.dec.SetEmitEnabled(false) // the block is still decoded, for the HPACK state
		return
	}
	switch f.Name {
	case ":status":
		bs.httpStatus = f.Value
		if len(f.Value) == 3 && f.Value[0] == '1' && bs.initial {
			bs.informational = true
		}
	case "content-type":
		bs.contentType = f.Value
		bs.grpcContent = f.Value == "application/grpc" || strings.HasPrefix(f.Value, "application/grpc+") ||
			strings.HasPrefix(f.Value, "application/grpc;")
	case "grpc-status":
		code, err := strconv.ParseInt(f.Value, 10, 32)
		if err != nil {
			if bs.statusErr == nil {
				bs.statusErr = status.Errorf(codes.Unknown, "transport: malformed grpc-status: %v", err)
			}
			return
		}
		bs.hasCode, bs.code = true, codes.Code(uint32(code))
	case "grpc-message":
		bs.message = decodeMessage(f.Value)
	case "grpc-status-details-bin":
		b, err := decodeBinary(f.Value)
		if err != nil {
			bs.malformed(f.Name, err)
			return
		}
		bs.details = append(bs.details, string(b))
	case "grpc-encoding":
		bs.encoding = f.Value
	case "grpc-accept-encoding", "grpc-message-type", "grpc-timeout", "te", "user-agent":
	default:
		if f.IsPseudo() || bs.informational {
			return
		}
		v := f.Value
		if strings.HasSuffix(f.Name, "-bin") {
			b, err := decodeBinary(v)
			if err != nil {
				bs.malformed(f.Name, err)
				return
			}
			v = string(b)
		}
		if !call.Capture {
			return
		}
		md := &call.Header
		if bs.trailers {
			md = &call.Trailer
		}
		if *md == nil {
			*md = metadata.MD{}
		}
		(*md)[f.Name] = append((*md)[f.Name], v)
	}
}

// headersDone checks a header block once decoded, as grpc-go's
// operateHeaders does, and returns the status that ends the call if it
// must.
func (call *Call) headersDone(end bool) error {
	bs := &call.block
	if why := bs.malformedBlock(); why != "" {
		// A malformed response (RFC 9113 section 8.1.1): grpc-go's
		// reader fails the call with the Framer's reason.
		return status.Error(codes.Internal, why)
	}
	switch {
	case bs.tooLarge:
		return status.Error(codes.Internal, "peer header list size exceeded limit")
	case !bs.initial && !end:
		return status.Error(codes.Internal, "a HEADERS frame cannot appear in the middle of a stream")
	case bs.statusErr != nil:
		return bs.statusErr
	}
	if bs.initial && !bs.grpcContent {
		// Not gRPC: the HTTP status says what happened.
		contentErr := "malformed header: missing HTTP content-type"
		if bs.contentType != "" {
			contentErr = fmt.Sprintf("transport: received unexpected content-type %q", bs.contentType)
		}
		if bs.httpStatus == "" {
			return status.Error(codes.Internal, "malformed header: missing HTTP status; "+contentErr)
		}
		code, err := strconv.Atoi(bs.httpStatus)
		if err != nil {
			return status.Errorf(codes.Internal, "transport: malformed http-status: %v", err)
		}
		if code >= 100 && code < 200 {
			if end {
				return status.Errorf(codes.Internal, "protocol error: informational header with status code %d must not have END_STREAM set", code)
			}
			return nil
		}
		return httpStatusError(code, contentErr)
	}
	bs.informational = false
	if bs.fieldErr != nil {
		return bs.fieldErr
	}
	if bs.initial {
		call.gotHeaders = true
		call.encoding = bs.encoding
	}
	return nil
}

// decodeMessage undoes grpc-message's percent-encoding; a malformed escape
// is kept as it is.
func decodeMessage(v string) string {
	if !strings.Contains(v, "%") {
		return v
	}
	b := make([]byte, 0, len(v))
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			if n, err := strconv.ParseUint(v[i+1:i+3], 16, 8); err == nil {
				b = append(b, byte(n))
				i += 2
				continue
			}
		}
		b = append(b, v[i])
	}
	return string(b)
}

// decodeBinary reads a -bin value: base64, padded or not.
func decodeBinary(v string) ([]byte, error) {
	return base64.RawStdEncoding.DecodeString(strings.TrimRight(v, "="))
}
