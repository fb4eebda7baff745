package mapping

import (
	"encoding/json"
	"strconv"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping/jsonscan"
)

// Params by position, for unary methods: element i of the params array is
// the value of the i-th field of the request message in declaration order
// (the order of the .proto file, which is the order the OpenRPC document
// lists the params; each member of a oneof is a field of its own). Missing
// trailing elements and null elements leave their fields unset, so [] is
// the empty message. An element is read exactly as the value of its field
// by name would be.
//
// The general path rewrites the array as the params object of the same
// fields and hands it to protojson; an error is then reported with the
// position of the field it is in. The fast path (appendPositional) writes
// wire bytes straight from the array.

// requestPositional turns by-position params into the request message.
func (c *Codec) requestPositional(params []byte) (proto.Message, *Error) {
	obj, e := c.positionalObject(params)
	if e != nil {
		return nil, e
	}
	m := c.in.New().Interface()
	if err := c.unmarshal.Unmarshal(obj, m); err != nil {
		return nil, c.diagnosePositional(obj, err)
	}
	return m, nil
}

// positionalObject rewrites the params array as the equivalent params
// object, keyed by JSON name, leaving out null elements. It refuses more
// elements than the message has fields and two members of one oneof.
func (c *Codec) positionalObject(params []byte) ([]byte, *Error) {
	md := c.in.Descriptor()
	fields := md.Fields()
	w := &walker{b: params, res: c.res}
	if w.peek() != '[' {
		return nil, invalidParams("", "params by position must be an array, got "+w.kind())
	}
	obj := make([]byte, 0, len(params)+8*fields.Len()+2)
	obj = append(obj, '{')
	var setBy map[int]int // oneof index -> position of the member set
	var e *Error
	p := w.array(nil, 0, func(i int) *problem {
		if i >= fields.Len() {
			e = positionError(i, "", tooMany(md))
			return &problem{}
		}
		fd := fields.Get(i)
		start := jsonscan.SkipSpace(w.b, w.i)
		if p := w.skip(join(nil, fd.JSONName()), 0); p != nil {
			return p
		}
		val := w.b[start:w.i]
		if string(val) == "null" {
			return nil
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() {
			if prev, ok := setBy[od.Index()]; ok {
				e = positionError(i, fd.JSONName(), "oneof "+string(od.Name())+" is already set by position "+
					strconv.Itoa(prev)+" ("+fields.Get(prev).JSONName()+"); give at most one of its members")
				return &problem{}
			}
			if setBy == nil {
				setBy = map[int]int{}
			}
			setBy[od.Index()] = i
		}
		if len(obj) > 1 {
			obj = append(obj, ',')
		}
		obj = appendJSONName(obj, fd)
		obj = append(obj, val...)
		return nil
	})
	if e != nil {
		return nil, e
	}
	if p == nil {
		p = w.end()
	}
	if p != nil {
		return nil, c.positionProblem(p)
	}
	return append(obj, '}'), nil
}

// diagnosePositional explains protojson's failure on the params object
// that positionalObject made, naming the position of the field at fault.
func (c *Codec) diagnosePositional(obj []byte, err error) *Error {
	w := &walker{b: obj, res: c.res}
	p := w.message(c.in.Descriptor(), nil, 0)
	if p == nil {
		return invalidParams("", sanitize(err))
	}
	return c.positionProblem(p)
}

// positionProblem turns a problem found under a top-level field into the
// error that names the field's position.
func (c *Codec) positionProblem(p *problem) *Error {
	root := p.path
	for root != nil && root.parent != nil {
		root = root.parent
	}
	if root == nil || root.index >= 0 {
		return invalidParams(p.path.String(), p.reason)
	}
	fd := c.in.Descriptor().Fields().ByJSONName(root.key)
	if fd == nil {
		return invalidParams(p.path.String(), p.reason)
	}
	return positionError(fd.Index(), p.path.String(), p.reason)
}

// tooMany is the reason for an element past the last field of md.
func tooMany(md protoreflect.MessageDescriptor) string {
	n := md.Fields().Len()
	fields := " fields"
	if n == 1 {
		fields = " field"
	}
	return "too many params by position: " + string(md.FullName()) + " has " + strconv.Itoa(n) + fields
}

// positionError is the -32602 error for a defect at position i of
// by-position params, in the field at path ("" when the position has no
// field). Its data is {"position": i, "field": path, "reason": reason}.
func positionError(i int, path, reason string) *Error {
	where := "position " + strconv.Itoa(i)
	if path != "" {
		where += " (" + path + ")"
	}
	data, _ := json.Marshal(struct {
		Position int    `json:"position"`
		Field    string `json:"field,omitempty"`
		Reason   string `json:"reason"`
	}{i, path, reason})
	return &Error{Code: CodeInvalidParams, Message: "Invalid params: " + where + ": " + reason, Data: data}
}

// appendJSONName appends `"<JSON name of fd>":`.
func appendJSONName(dst []byte, fd protoreflect.FieldDescriptor) []byte {
	b, _ := json.Marshal(fd.JSONName())
	dst = append(dst, b...)
	return append(dst, ':')
}

// appendPositional appends the wire form of the params array b to dst, for
// the plan of a unary method's request message. It gives up (ok == false,
// with the reason) wherever the general path would refuse b or where the
// fast path gives up on the value of a field by name.
func (pl *plan) appendPositional(dst, b []byte) ([]byte, bool, reason) {
	d := getDecoder(b)
	defer putDecoder(d)
	if d.peek() != '[' {
		return dst, d.fail(reasonSyntax), d.why
	}
	d.i++
	var oneofs bitset
	if d.peek() == ']' {
		d.i++
	} else {
		for i := 0; ; i++ {
			if i >= len(pl.fields) {
				return dst, d.fail(reasonField), d.why
			}
			f := &pl.fields[i]
			if d.peek() == 'n' {
				if !d.literal("null") {
					return dst, d.fail(reasonSyntax), d.why
				}
			} else {
				if f.oneof >= 0 && oneofs.testAndSet(f.oneof) {
					return dst, d.fail(reasonField), d.why
				}
				var ok bool
				if dst, ok = d.fieldValue(f, dst, 0); !ok {
					return dst, false, d.why
				}
			}
			c := d.peek()
			if c == ']' {
				d.i++
				break
			}
			if c != ',' {
				return dst, d.fail(reasonSyntax), d.why
			}
			d.i++
		}
	}
	d.space()
	if d.i != len(d.b) {
		return dst, d.fail(reasonSyntax), d.why
	}
	return dst, true, reasonNone
}
