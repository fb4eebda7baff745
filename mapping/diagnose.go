package mapping

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"math"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// This file explains why protojson rejected params. It runs only after
// protojson failed: it walks the JSON guided by the message descriptor,
// following protojson's rules, and reports the first defect with the dotted
// JSON path of its field. When it finds nothing, the protojson error is
// shown with its "proto: " prefix and line positions removed.

// maxDepth bounds nesting as protojson's default recursion limit does.
const maxDepth = protowire.DefaultRecursionLimit

// maxQuoted bounds how much of a client's value a reason repeats.
const maxQuoted = 64

// problem is one defect in params: where it is and why it is one.
type problem struct {
	path   *loc // nil for the params themselves
	reason string
}

// loc is a place in params: a member of parent (key) or an element of it
// (index >= 0). Paths are only rendered when a problem is reported, so deep
// nesting costs one small node per level.
type loc struct {
	parent *loc
	key    string
	index  int
}

// join is the member key of path.
func join(path *loc, key string) *loc { return &loc{parent: path, key: key, index: -1} }

// index is the element i of path.
func index(path *loc, i int) *loc { return &loc{parent: path, index: i} }

// maxSegments bounds how many members and elements a rendered path shows;
// deeper paths keep their first and last maxSegments/2 around "...".
const maxSegments = 16

// String renders the dotted JSON path: a.b[1] for identifier names,
// a["x.y"] for others, "" for the params themselves.
func (l *loc) String() string {
	var segs []*loc
	for n := l; n != nil; n = n.parent {
		segs = append(segs, n)
	}
	slices.Reverse(segs)
	var sb strings.Builder
	for i, n := range segs {
		if len(segs) > maxSegments && i >= maxSegments/2 && i < len(segs)-maxSegments/2 {
			if i == maxSegments/2 {
				sb.WriteString("...")
			}
			continue
		}
		switch {
		case n.index >= 0:
			sb.WriteString("[" + strconv.Itoa(n.index) + "]")
		case !isIdent(n.key):
			sb.WriteString("[" + quote(n.key) + "]")
		case sb.Len() == 0:
			sb.WriteString(n.key)
		default:
			sb.WriteString("." + n.key)
		}
	}
	return sb.String()
}

// invalidParams builds the -32602 error for a defect at path ("" for the
// params themselves).
func invalidParams(path, reason string) *Error {
	msg := "Invalid params: " + reason
	if path != "" {
		msg = "Invalid params: " + path + ": " + reason
	}
	data, _ := json.Marshal(struct {
		Field  string `json:"field,omitempty"`
		Reason string `json:"reason"`
	}{path, reason})
	return &Error{Code: CodeInvalidParams, Message: msg, Data: data}
}

// diagnose turns protojson's failure on params into a client-facing error.
func (c *Codec) diagnose(params []byte, err error) *Error {
	w := &walker{b: params, res: c.res}
	p := w.message(c.in.Descriptor(), nil, 0)
	if p == nil {
		p = w.end()
	}
	if p == nil {
		p = &problem{reason: sanitize(err)}
	}
	return invalidParams(p.path.String(), p.reason)
}

// sanitize strips what protojson's error text has for Go programmers: the
// "proto: " prefix (with its space or no-break space) and "(line N:M)".
func sanitize(err error) string {
	s := err.Error()
	s = strings.ReplaceAll(s, "proto:\u00a0", "")
	s = strings.ReplaceAll(s, "proto: ", "")
	for {
		i := strings.Index(s, "(line ")
		if i < 0 {
			break
		}
		j := strings.IndexByte(s[i:], ')')
		if j < 0 {
			break
		}
		s = s[:i] + s[i+j+1:]
	}
	s = strings.ReplaceAll(s, " :", ":")
	s = strings.TrimLeft(s, ": ")
	if s == "" {
		return "params do not match the request message"
	}
	return s
}

// walker reads JSON at b[i:] and checks it against descriptors.
type walker struct {
	b   []byte
	i   int
	res Resolver
}

// end reports data after the params object.
func (w *walker) end() *problem {
	w.i = jsonscan.SkipSpace(w.b, w.i)
	if w.i < len(w.b) {
		return &problem{reason: "invalid JSON: unexpected data after the params object"}
	}
	return nil
}

// peek skips whitespace and returns the next byte, 0 at the end.
func (w *walker) peek() byte {
	w.i = jsonscan.SkipSpace(w.b, w.i)
	if w.i < len(w.b) {
		return w.b[w.i]
	}
	return 0
}

// kind names the JSON value at the read position for "got ..." reasons.
func (w *walker) kind() string {
	w.i = jsonscan.SkipSpace(w.b, w.i)
	return jsonKind(w.b, w.i)
}

// jsonKind names the JSON value starting at b[i].
func jsonKind(b []byte, i int) string {
	if i >= len(b) {
		return "nothing"
	}
	switch c := b[i]; {
	case c == '"':
		return "string"
	case c == '{':
		return "object"
	case c == '[':
		return "array"
	case c == 't' || c == 'f':
		return "boolean"
	case c == 'n':
		return "null"
	case c == '-' || ('0' <= c && c <= '9'):
		return "number"
	default:
		return "invalid JSON"
	}
}

// message checks a value of message type md at path.
func (w *walker) message(md protoreflect.MessageDescriptor, path *loc, depth int) *problem {
	if depth > maxDepth {
		return &problem{path, "nesting too deep"}
	}
	if isWellKnown(md.FullName()) {
		return w.wellKnown(md, path, depth)
	}
	return w.fields(md, path, depth, false)
}

// fields checks a JSON object holding the fields of md. With skipType, an
// "@type" member is allowed (a message embedded in an Any).
func (w *walker) fields(md protoreflect.MessageDescriptor, path *loc, depth int, skipType bool) *problem {
	if w.peek() != '{' {
		return &problem{path, "want an object (" + string(md.FullName()) + "), got " + w.kind()}
	}
	seen := map[protoreflect.FieldNumber]string{}
	oneofs := map[int]string{}
	return w.object(path, depth, func(key string) *problem {
		fpath := join(path, key)
		if skipType && key == "@type" {
			return w.skip(fpath, depth)
		}
		fd := w.lookup(md, key)
		if fd == nil {
			return &problem{fpath, "unknown field of " + string(md.FullName())}
		}
		if prev, ok := seen[fd.Number()]; ok {
			if prev == key {
				return &problem{fpath, "duplicate field"}
			}
			return &problem{fpath, "duplicate field, already set as " + quote(prev)}
		}
		seen[fd.Number()] = key
		if w.peek() == 'n' && !isValueMessage(fd) && !isNullEnum(fd) {
			return w.skip(fpath, depth) // null leaves the field unset
		}
		switch {
		case fd.IsList():
			return w.list(fd, fpath, depth)
		case fd.IsMap():
			return w.mapField(fd, fpath, depth)
		}
		if od := fd.ContainingOneof(); od != nil {
			if prev, ok := oneofs[od.Index()]; ok {
				return &problem{fpath, "oneof " + string(od.Name()) + " is already set by " + quote(prev)}
			}
			oneofs[od.Index()] = key
		}
		return w.singular(fd, fpath, depth)
	})
}

// lookup finds the field of md that key names: its JSON name, its proto
// name, or "[full.name]" of an extension, as protojson does.
func (w *walker) lookup(md protoreflect.MessageDescriptor, key string) protoreflect.FieldDescriptor {
	if strings.HasPrefix(key, "[") && strings.HasSuffix(key, "]") {
		xt, err := w.res.FindExtensionByName(protoreflect.FullName(key[1 : len(key)-1]))
		if err != nil {
			return nil
		}
		fd := xt.TypeDescriptor()
		if fd.ContainingMessage().FullName() != md.FullName() || !md.ExtensionRanges().Has(fd.Number()) {
			return nil
		}
		return fd
	}
	if fd := md.Fields().ByJSONName(key); fd != nil {
		return fd
	}
	return md.Fields().ByTextName(key)
}

// singular checks the value of a field that is neither a list nor a map.
func (w *walker) singular(fd protoreflect.FieldDescriptor, path *loc, depth int) *problem {
	if fd.Message() != nil {
		return w.message(fd.Message(), path, depth+1)
	}
	return w.scalar(fd, path)
}

// list checks the JSON array of a repeated field.
func (w *walker) list(fd protoreflect.FieldDescriptor, path *loc, depth int) *problem {
	if w.peek() != '[' {
		return &problem{path, "want an array of " + want(fd) + ", got " + w.kind()}
	}
	return w.array(path, depth, func(i int) *problem {
		return w.singular(fd, index(path, i), depth)
	})
}

// mapField checks the JSON object of a map field.
func (w *walker) mapField(fd protoreflect.FieldDescriptor, path *loc, depth int) *problem {
	if w.peek() != '{' {
		return &problem{path, "want an object (map), got " + w.kind()}
	}
	kd, vd := fd.MapKey(), fd.MapValue()
	seen := map[string]bool{}
	return w.object(path, depth, func(key string) *problem {
		kpath := join(path, key)
		canon, ok := mapKey(kd, key)
		if !ok {
			return &problem{kpath, "invalid map key " + quote(key) + ", want " + kd.Kind().String()}
		}
		if seen[canon] {
			return &problem{kpath, "duplicate map key"}
		}
		seen[canon] = true
		return w.singular(vd, kpath, depth)
	})
}

// mapKey parses a map key as protojson does and returns its canonical text.
func mapKey(kd protoreflect.FieldDescriptor, key string) (string, bool) {
	switch kd.Kind() {
	case protoreflect.StringKind:
		return key, true
	case protoreflect.BoolKind:
		return key, key == "true" || key == "false"
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind,
		protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		n, err := strconv.ParseInt(key, 10, bitSize(kd.Kind()))
		return strconv.FormatInt(n, 10), err == nil
	default:
		n, err := strconv.ParseUint(key, 10, bitSize(kd.Kind()))
		return strconv.FormatUint(n, 10), err == nil
	}
}

// isWellKnown reports whether protojson has a special JSON form for name.
func isWellKnown(name protoreflect.FullName) bool {
	switch name {
	case "google.protobuf.Any", "google.protobuf.Timestamp", "google.protobuf.Duration",
		"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue",
		"google.protobuf.FieldMask", "google.protobuf.Empty":
		return true
	}
	return isWrapper(name)
}

func isWrapper(name protoreflect.FullName) bool {
	switch name {
	case "google.protobuf.BoolValue", "google.protobuf.Int32Value", "google.protobuf.Int64Value",
		"google.protobuf.UInt32Value", "google.protobuf.UInt64Value", "google.protobuf.FloatValue",
		"google.protobuf.DoubleValue", "google.protobuf.StringValue", "google.protobuf.BytesValue":
		return true
	}
	return false
}

func isValueMessage(fd protoreflect.FieldDescriptor) bool {
	return fd.Message() != nil && fd.Message().FullName() == "google.protobuf.Value"
}

func isNullEnum(fd protoreflect.FieldDescriptor) bool {
	return fd.Enum() != nil && fd.Enum().FullName() == "google.protobuf.NullValue"
}

// wellKnown checks a value of a well-known type. Wrappers are checked as
// their scalar, Any by its embedded type, the rest by protojson itself on
// the value alone.
func (w *walker) wellKnown(md protoreflect.MessageDescriptor, path *loc, depth int) *problem {
	name := md.FullName()
	switch {
	case name == "google.protobuf.Any":
		return w.any(path, depth)
	case isWrapper(name):
		return w.scalar(md.Fields().ByName("value"), path)
	case name == "google.protobuf.Struct" && w.peek() != '{':
		return &problem{path, "want an object (google.protobuf.Struct), got " + w.kind()}
	case name == "google.protobuf.ListValue" && w.peek() != '[':
		return &problem{path, "want an array (google.protobuf.ListValue), got " + w.kind()}
	}
	start := jsonscan.SkipSpace(w.b, w.i)
	if p := w.skip(path, depth); p != nil {
		return p
	}
	err := protojson.UnmarshalOptions{Resolver: w.res}.Unmarshal(w.b[start:w.i], dynamicpb.NewMessage(md))
	if err == nil {
		return nil
	}
	switch name {
	case "google.protobuf.Timestamp":
		return &problem{path, `want an RFC 3339 timestamp string such as "2006-01-02T15:04:05Z", got ` + w.excerpt(start)}
	case "google.protobuf.Duration":
		return &problem{path, `want a duration string in seconds such as "1.5s", got ` + w.excerpt(start)}
	case "google.protobuf.FieldMask":
		return &problem{path, `want a field mask string of comma-separated lowerCamelCase paths such as "name,note.tags", got ` + w.excerpt(start)}
	}
	return &problem{path, sanitize(err)}
}

// excerpt repeats the JSON value that starts at b[start] and ends at the
// read position, shortened.
func (w *walker) excerpt(start int) string {
	s := string(w.b[start:w.i])
	if len(s) > maxQuoted {
		return strings.ToValidUTF8(s[:maxQuoted], "") + "..."
	}
	return s
}

// any checks a google.protobuf.Any: "@type" must name a type the resolver
// knows; the other members are that type's fields, or "value" for a
// well-known type.
func (w *walker) any(path *loc, depth int) *problem {
	if w.peek() != '{' {
		return &problem{path, "want an object (google.protobuf.Any), got " + w.kind()}
	}
	start := w.i
	var url string
	found, members := false, 0
	if p := w.object(path, depth, func(key string) *problem {
		members++
		if key != "@type" {
			return w.skip(join(path, key), depth)
		}
		if found {
			return &problem{join(path, key), "duplicate field"}
		}
		found = true
		if w.peek() != '"' {
			return &problem{join(path, key), "want a type URL string, got " + w.kind()}
		}
		var reason string
		url, reason = w.str()
		if reason != "" {
			return &problem{join(path, key), reason}
		}
		return nil
	}); p != nil || members == 0 {
		return p
	}
	if !found {
		return &problem{path, `missing "@type" of google.protobuf.Any`}
	}
	mt, err := w.res.FindMessageByURL(url)
	if err != nil {
		return &problem{join(path, "@type"), "unknown type " + quote(url)}
	}
	md := mt.Descriptor()
	w.i = start
	if !isWellKnown(md.FullName()) {
		return w.fields(md, path, depth+1, true)
	}
	hasValue := false
	if p := w.object(path, depth, func(key string) *problem {
		switch key {
		case "@type":
			return w.skip(join(path, key), depth)
		case "value":
			hasValue = true
			return w.message(md, join(path, key), depth+1)
		}
		return &problem{join(path, key), "unknown field of google.protobuf.Any holding " + string(md.FullName()) + `, want only "@type" and "value"`}
	}); p != nil {
		return p
	}
	if !hasValue && md.FullName() != "google.protobuf.Empty" {
		return &problem{path, `missing "value" of google.protobuf.Any holding ` + string(md.FullName())}
	}
	return nil
}

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

// text checks a JSON string value.
func (w *walker) text(path *loc) *problem {
	_, reason := w.str()
	return w.fail(path, reason)
}

// literal checks true, false or null at the read position.
func (w *walker) literal(path *loc) *problem {
	end, err := jsonscan.Literal(w.b, w.i)
	if err != nil {
		return &problem{path, "invalid JSON: unknown literal"}
	}
	w.i = end
	return nil
}

// str reads the JSON string at the read position (which is '"') and
// returns its value, or a reason it is malformed.
func (w *walker) str() (string, string) {
	end, escaped, err := jsonscan.StrictString(w.b, w.i)
	if err != nil {
		return "", stringDefect(w.b, end, err)
	}
	s := w.b[w.i:end]
	w.i = end
	if escaped {
		return jsonscan.Unquote(s), ""
	}
	return string(s[1 : len(s)-1]), ""
}

// stringDefect words the defect jsonscan.StrictString found at b[at].
func stringDefect(b []byte, at int, err error) string {
	switch {
	case errors.Is(err, jsonscan.ErrBadUTF8):
		return "invalid UTF-8 in string"
	case errors.Is(err, jsonscan.ErrSurrogate):
		return "invalid UTF-16 surrogate escape in string"
	case at >= len(b) || b[at] == '\\' && at+1 >= len(b):
		return "invalid JSON: unterminated string"
	case b[at] == '\\' && b[at+1] == 'u':
		return "invalid JSON: bad \\u escape in string"
	case b[at] == '\\':
		return "invalid JSON: bad escape in string"
	}
	return "invalid JSON: control character in string"
}

// object walks the JSON object at the read position, calling member with
// each key while the read position is at the key's value.
func (w *walker) object(path *loc, depth int, member func(key string) *problem) *problem {
	if depth > maxDepth {
		return &problem{path, "nesting too deep"}
	}
	w.i++ // '{'
	if w.peek() == '}' {
		w.i++
		return nil
	}
	for {
		if w.peek() != '"' {
			return &problem{path, "invalid JSON: want a quoted member name, got " + w.kind()}
		}
		key, reason := w.str()
		if reason != "" {
			return &problem{path, reason + " (member name)"}
		}
		if w.peek() != ':' {
			return &problem{join(path, key), "invalid JSON: want ':' after the member name"}
		}
		w.i++
		if p := member(key); p != nil {
			return p
		}
		switch w.peek() {
		case ',':
			w.i++
		case '}':
			w.i++
			return nil
		default:
			return &problem{join(path, key), "invalid JSON: want ',' or '}' after the value"}
		}
	}
}

// array walks the JSON array at the read position, calling elem with each
// index while the read position is at that element.
func (w *walker) array(path *loc, depth int, elem func(i int) *problem) *problem {
	if depth > maxDepth {
		return &problem{path, "nesting too deep"}
	}
	w.i++ // '['
	if w.peek() == ']' {
		w.i++
		return nil
	}
	for i := 0; ; i++ {
		if p := elem(i); p != nil {
			return p
		}
		switch w.peek() {
		case ',':
			w.i++
		case ']':
			w.i++
			return nil
		default:
			return &problem{index(path, i), "invalid JSON: want ',' or ']' after the element"}
		}
	}
}

// skip checks that a well-formed JSON value is at the read position and
// moves past it.
func (w *walker) skip(path *loc, depth int) *problem {
	switch c := w.peek(); {
	case c == '{':
		return w.object(path, depth+1, func(key string) *problem { return w.skip(join(path, key), depth+1) })
	case c == '[':
		return w.array(path, depth+1, func(i int) *problem { return w.skip(index(path, i), depth+1) })
	case c == '"':
		return w.text(path)
	case c == 't' || c == 'f' || c == 'n':
		return w.literal(path)
	case c == '-' || ('0' <= c && c <= '9'):
		end, err := jsonscan.Number(w.b, w.i)
		if err != nil {
			return &problem{path, "invalid JSON: malformed number"}
		}
		w.i = end
		return nil
	case c == 0:
		return &problem{path, "invalid JSON: unexpected end of params"}
	}
	return &problem{path, "invalid JSON: unexpected character " + strconv.QuoteRune(rune(w.b[w.i]))}
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && !('a' <= c && c <= 'z') && !('A' <= c && c <= 'Z') && !(i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// quote quotes a client's text for a reason, shortened.
func quote(s string) string {
	if len(s) > maxQuoted {
		return strconv.Quote(strings.ToValidUTF8(s[:maxQuoted], "")) + "..."
	}
	return strconv.Quote(s)
}

func shorten(s string) string {
	if len(s) > maxQuoted {
		return s[:maxQuoted] + "..."
	}
	return s
}
