package mapping

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// The diagnose files explain why protojson rejected params. They run only
// after protojson failed: they walk the JSON guided by the message
// descriptor, following protojson's rules, and report the first defect
// with the dotted JSON path of its field. When they find nothing, the
// protojson error is shown with its "proto: " prefix and line positions
// removed. This one has the problem and its path, the walker and its JSON
// reading (through jsonscan); diagnose_message.go the messages, fields,
// lists, maps and well-known types; diagnose_scalar.go the scalars,
// numbers and enums, and the reasons they give.

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
