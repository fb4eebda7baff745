package unary

import (
	"fmt"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2/hpack"
)

// Pseudo-header fields a response header block may not repeat, as bits.
const (
	pseudoStatus = 1 << iota
	pseudoMethod
	pseudoPath
	pseudoScheme
	pseudoAuthority
	pseudoProtocol
	requestPseudos = pseudoMethod | pseudoPath | pseudoScheme | pseudoAuthority | pseudoProtocol
)

// checkField holds a header field to RFC 9113 section 8.2 as
// x/net/http2's Framer (readMetaFrame, checkPseudos) does for grpc-go:
// the first field that is malformed (a value with a control character, a
// name that is not a lower-case token, a pseudo-header after a regular
// field) makes the block malformed, and the fields after it are not
// looked at; pseudo-headers must be known, not repeated, and not mix a
// request's with a response's. It reports whether f may be taken.
func (bs *blockState) checkField(f hpack.HeaderField) bool {
	switch {
	case !httpguts.ValidHeaderFieldValue(f.Value):
		bs.invalid = fmt.Sprintf("invalid header field value for %q", f.Name)
	case f.IsPseudo():
		if bs.sawRegular {
			bs.invalid = "pseudo header field after regular"
			break
		}
		var bit int
		switch f.Name {
		case ":status":
			bit = pseudoStatus
		case ":method":
			bit = pseudoMethod
		case ":path":
			bit = pseudoPath
		case ":scheme":
			bit = pseudoScheme
		case ":authority":
			bit = pseudoAuthority
		case ":protocol":
			bit = pseudoProtocol
		default:
			bs.setPseudoErr(fmt.Sprintf("invalid pseudo-header %q", f.Name))
			return true
		}
		if bs.pseudos&bit != 0 {
			bs.setPseudoErr(fmt.Sprintf("duplicate pseudo-header %q", f.Name))
		}
		bs.pseudos |= bit
		return true
	default:
		bs.sawRegular = true
		if !validFieldName(f.Name) {
			bs.invalid = fmt.Sprintf("invalid header field name %q", f.Name)
		}
	}
	return bs.invalid == ""
}

func (bs *blockState) setPseudoErr(msg string) {
	if bs.pseudoErr == "" {
		bs.pseudoErr = msg
	}
}

// malformedBlock is why the block is malformed, or "".
func (bs *blockState) malformedBlock() string {
	switch {
	case bs.invalid != "":
		return bs.invalid
	case bs.pseudoErr != "":
		return bs.pseudoErr
	case bs.pseudos&pseudoStatus != 0 && bs.pseudos&requestPseudos != 0:
		return "mix of request and response pseudo headers"
	}
	return ""
}

// validFieldName reports whether name is a token without upper-case
// letters (x/net/http2's validWireHeaderFieldName).
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if b := name[i]; !httpguts.IsTokenRune(rune(b)) || 'A' <= b && b <= 'Z' {
			return false
		}
	}
	return true
}
