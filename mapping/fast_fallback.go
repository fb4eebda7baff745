package mapping

import "sync/atomic"

// reason is why the fast path gave up on one input and left it to the
// general path (protojson and dynamicpb).
type reason uint8

const (
	reasonNone reason = iota
	// reasonType: the message type (or one it contains) has no fast form:
	// Any, FieldMask, extensions, groups, proto2 required fields, or
	// EmitUnpopulated results.
	reasonType
	// reasonSyntax: JSON the fast path does not read (not an object where
	// one is needed, an escaped field name, truncated or invalid JSON).
	reasonSyntax
	// reasonField: an unknown field, a field or oneof given twice (protojson
	// refuses these).
	reasonField
	// reasonValue: a value of the wrong JSON type for its field, or one
	// protojson refuses (invalid base64, a lone surrogate, invalid UTF-8,
	// null inside a list...).
	reasonValue
	// reasonNumber: a number the fast path leaves to protojson: an
	// integer written with a fraction or an exponent, or a number out of
	// its field's range.
	reasonNumber
	// reasonEnum: an enum name the enum does not have, or a number for a
	// closed enum.
	reasonEnum
	// reasonWKT: a Timestamp or Duration string the fast path does not
	// parse (time zone offsets, lower-case letters) or out of range.
	reasonWKT
	// reasonMapKey: a map key given twice, or one that does not parse as
	// its key type.
	reasonMapKey
	// reasonDepth: nesting deeper than maxFastDepth.
	reasonDepth
	// reasonWire: wire bytes the fast path does not render: malformed, a
	// singular message field or a repeated field split in several runs
	// (protobuf merges those), a wire type that does not match the field,
	// groups.
	reasonWire
	// reasonRange: a well-known type protojson refuses to write: a
	// Timestamp or Duration out of range, a Value without a kind or with
	// NaN or an infinity, invalid UTF-8 in a string.
	reasonRange
	numReasons
)

var reasonNames = [numReasons]string{
	reasonNone:   "none",
	reasonType:   "type",
	reasonSyntax: "syntax",
	reasonField:  "field",
	reasonValue:  "value",
	reasonNumber: "number",
	reasonEnum:   "enum",
	reasonWKT:    "well-known-type",
	reasonMapKey: "map-key",
	reasonDepth:  "depth",
	reasonWire:   "wire",
	reasonRange:  "range",
}

func (r reason) String() string { return reasonNames[r] }

// Direction is the way of a conversion: params to a request, or a response
// to a result.
type Direction string

// The two directions of Fallback.
const (
	DirRequest Direction = "request"
	DirResult  Direction = "result"
)

// Fallback is how many conversions of one direction the fast path left to
// the general path for one reason, since the process started.
type Fallback struct {
	Direction Direction
	Reason    string
	Count     uint64
}

var fallbackCounts [2][numReasons]atomic.Uint64

// countFallback records one conversion left to the general path.
func countFallback(dir int, r reason) {
	fallbackCounts[dir][r].Add(1)
}

const (
	dirRequest = 0
	dirResult  = 1
)

// Fallbacks returns the conversions the fast path left to the general path
// (protojson and dynamicpb), by direction and reason, for every reason that
// happened at least once. The reasons are described in
// docs/performance.md ("When the fast path gives up"). The counts are of
// the whole process, all codecs together.
func Fallbacks() []Fallback {
	var out []Fallback
	for d, dir := range []Direction{DirRequest, DirResult} {
		for r := reason(1); r < numReasons; r++ {
			if n := fallbackCounts[d][r].Load(); n > 0 {
				out = append(out, Fallback{Direction: dir, Reason: r.String(), Count: n})
			}
		}
	}
	return out
}
