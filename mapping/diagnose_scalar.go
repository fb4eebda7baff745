package mapping

import (
	"encoding/base64"
	"errors"
	"math"
	"math/big"
	"strconv"
	"strings"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// scalar checks the value of a scalar or enum field.
func (w *walker) scalar(fd protoreflect.FieldDescriptor, path *loc) *problem {
	c := w.peek()
	switch k := fd.Kind(); k {
	case protoreflect.BoolKind:
		if c == 't' || c == 'f' {
			return w.literal(path)
		}
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind,
		protoreflect.FloatKind, protoreflect.DoubleKind:
		if c == '"' || c == '-' || ('0' <= c && c <= '9') {
			return w.number(fd, path)
		}
	case protoreflect.StringKind:
		if c == '"' {
			return w.text(path)
		}
	case protoreflect.BytesKind:
		if c == '"' {
			s, reason := w.str()
			if reason == "" && !validBase64(s) {
				reason = "invalid base64"
			}
			return w.fail(path, reason)
		}
	case protoreflect.EnumKind:
		return w.enum(fd, path)
	}
	return &problem{path, "want " + want(fd) + ", got " + w.kind()}
}

// number checks a JSON number, or a string holding one, for a numeric field.
func (w *walker) number(fd protoreflect.FieldDescriptor, path *loc) *problem {
	k := fd.Kind()
	float := k == protoreflect.FloatKind || k == protoreflect.DoubleKind
	var raw string
	if w.peek() == '"' {
		s, reason := w.str()
		if reason != "" {
			return &problem{path, reason}
		}
		if float && (s == "NaN" || s == "Infinity" || s == "-Infinity") {
			return nil
		}
		if end, err := jsonscan.Number([]byte(s), 0); err != nil || end != len(s) {
			return &problem{path, "want " + want(fd) + ", got the string " + quote(s)}
		}
		raw = s
	} else {
		end, err := jsonscan.Number(w.b, w.i)
		if err != nil {
			return &problem{path, "invalid JSON: malformed number"}
		}
		raw = string(w.b[w.i:end])
		w.i = end
	}
	if float {
		return w.fail(path, floatReason(raw, bitSize(k), k.String()))
	}
	unsigned := k == protoreflect.Uint32Kind || k == protoreflect.Fixed32Kind ||
		k == protoreflect.Uint64Kind || k == protoreflect.Fixed64Kind
	return w.fail(path, intReason(raw, bitSize(k), unsigned, k.String()))
}

// enum checks an enum value: a value name or an int32 number.
func (w *walker) enum(fd protoreflect.FieldDescriptor, path *loc) *problem {
	switch c := w.peek(); {
	case c == '"':
		s, reason := w.str()
		if reason == "" && fd.Enum().Values().ByName(protoreflect.Name(s)) == nil {
			reason = "unknown value " + quote(s) + " of enum " + string(fd.Enum().FullName())
		}
		return w.fail(path, reason)
	case c == '-' || ('0' <= c && c <= '9'):
		return w.number(fakeInt32{fd}, path)
	case c == 'n' && isNullEnum(fd):
		return w.literal(path)
	}
	return &problem{path, "want " + want(fd) + ", got " + w.kind()}
}

// fakeInt32 lets an enum number be checked as an int32.
type fakeInt32 struct{ protoreflect.FieldDescriptor }

func (fakeInt32) Kind() protoreflect.Kind { return protoreflect.Int32Kind }

// fail turns a non-empty reason into a problem at path.
func (w *walker) fail(path *loc, reason string) *problem {
	if reason == "" {
		return nil
	}
	return &problem{path, reason}
}

// want describes the JSON a field takes.
func want(fd protoreflect.FieldDescriptor) string {
	switch k := fd.Kind(); k {
	case protoreflect.BoolKind:
		return "true or false"
	case protoreflect.StringKind:
		return "a string"
	case protoreflect.BytesKind:
		return "a base64 string"
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return "a number (" + k.String() + ")"
	case protoreflect.EnumKind:
		return "a value name of enum " + string(fd.Enum().FullName()) + " or its number"
	case protoreflect.MessageKind, protoreflect.GroupKind:
		return "an object (" + string(fd.Message().FullName()) + ")"
	default:
		return "an integer (" + k.String() + ")"
	}
}

func bitSize(k protoreflect.Kind) int {
	switch k {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.FloatKind:
		return 32
	}
	return 64
}

// intReason says why the JSON number raw does not fit the integer type
// typ, or returns "".
func intReason(raw string, bits int, unsigned bool, typ string) string {
	shown := shorten(raw)
	mant, exp, hasExp := strings.Cut(strings.ToLower(raw), "e")
	if hasExp {
		e, err := strconv.Atoi(exp)
		if err != nil || e > 400 || e < -400 {
			if strings.Trim(mant, "-0.") == "" {
				return "" // zero
			}
			if err == nil && e < 0 {
				return "value " + shown + " is not an integer"
			}
			return "value " + shown + " is out of range for " + typ
		}
	}
	r, ok := new(big.Rat).SetString(raw)
	if !ok {
		return "value " + shown + " is not a number"
	}
	if !r.IsInt() {
		return "value " + shown + " is not an integer"
	}
	n := r.Num()
	lo, hi := big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)
	switch {
	case unsigned && bits == 32:
		lo, hi = big.NewInt(0), big.NewInt(math.MaxUint32)
	case unsigned:
		lo, hi = big.NewInt(0), new(big.Int).SetUint64(math.MaxUint64)
	case bits == 32:
		lo, hi = big.NewInt(math.MinInt32), big.NewInt(math.MaxInt32)
	}
	if n.Cmp(lo) < 0 || n.Cmp(hi) > 0 {
		return "value " + shown + " is out of range for " + typ
	}
	return ""
}

// floatReason says why raw does not fit a float or double, or returns "".
func floatReason(raw string, bits int, typ string) string {
	if _, err := strconv.ParseFloat(raw, bits); err != nil {
		if errors.Is(err, strconv.ErrRange) {
			return "value " + shorten(raw) + " is out of range for " + typ
		}
		return "value " + shorten(raw) + " is not a number"
	}
	return ""
}

// validBase64 accepts what protojson accepts: standard or URL alphabet,
// with or without padding.
func validBase64(s string) bool {
	enc := base64.StdEncoding
	if strings.ContainsAny(s, "-_") {
		enc = base64.URLEncoding
	}
	if len(s)%4 != 0 {
		enc = enc.WithPadding(base64.NoPadding)
	}
	_, err := enc.DecodeString(s)
	return err == nil
}
