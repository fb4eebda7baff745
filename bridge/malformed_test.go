package bridge_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
)

// Codes of the malformed-input corpus.
const (
	cParse    = -32700
	cInvalid  = -32600
	cNotFound = -32601
	cParams   = -32602
	cOK       = 0 // a result
	cAny      = 1 // any well-formed reply: a result or any error
)

// malformed is one hostile HTTP request and what the bridge must answer.
type malformed struct {
	name   string
	method string // HTTP method; empty means POST
	ctype  string // Content-Type; empty means application/json, "-" none
	header http.Header
	body   []byte
	// raw, when set, is written as-is to a TCP connection instead (the
	// request line and headers included), for bodies net/http's client
	// cannot send, such as chunked bodies that never end.
	raw []byte
	// status is the HTTP status; zero means 200.
	status int
	// codes lists, for a 200 reply, the acceptable codes of a single
	// reply (cOK for a result, cAny for anything well-formed), or, with
	// batch set, the code of each reply of the array in order.
	codes []int
	batch bool
	// id, when set, is the exact id the single reply must carry.
	id string
}

const (
	echoMethod  = "test.v1.TestService.Echo"
	countMethod = "test.v1.TestService.Count"
)

func req(method, params, id string) string {
	s := `{"jsonrpc":"2.0","method":"` + method + `"`
	if params != "" {
		s += `,"params":` + params
	}
	if id != "" {
		s += `,"id":` + id
	}
	return s + "}"
}

func echoReq(params string) string { return req(echoMethod, params, "1") }

// malformedCorpus generates the corpus; maxBody is the bridge's limit.
func malformedCorpus(maxBody int64) []malformed {
	var cs []malformed
	add := func(name string, body string, codes ...int) {
		cs = append(cs, malformed{name: name, body: []byte(body), codes: codes})
	}
	addBatch := func(name string, body string, codes ...int) {
		cs = append(cs, malformed{name: name, body: []byte(body), codes: codes, batch: true})
	}

	// Truncated JSON: every proper prefix of these bodies is invalid.
	whole := []string{
		req("helloworld.Greeter.SayHello", `{"name":"truncated"}`, `"abc"`),
		`[` + req(countMethod, `{"key":"x"}`, "") + `,` + echoReq(`{"fString":"a\u00e9\"b","rInt64":[1,-2,3],"fMessage":{"name":"n"}}`) + `]`,
		echoReq(`{"fDouble":-1.5e-3,"fBool":true,"wktNull":null,"mStringInt64":{"k":"7"},"wktStruct":{"a":[1,{"b":null}]}}`),
		"\xEF\xBB\xBF" + req("helloworld.Greeter.SayHello", "", "123456789"),
	}
	for i, w := range whole {
		step := max(1, len(w)/40)
		for n := 0; n < len(w); n += step {
			add(fmt.Sprintf("truncated/%d/%d", i, n), w[:n], cParse)
		}
		add(fmt.Sprintf("truncated/%d/last", i), w[:len(w)-1], cParse)
		if w[0] == '[' {
			addBatch(fmt.Sprintf("truncated/%d/whole", i), w, cOK)
		} else {
			add(fmt.Sprintf("truncated/%d/whole", i), w, cOK)
		}
	}

	// Deep nesting, 100,000 levels and around the 1,000 limit.
	const deep = 100000
	for _, tc := range []struct{ name, body string }{
		{"arrays-closed", strings.Repeat("[", deep) + strings.Repeat("]", deep)},
		{"arrays-open", strings.Repeat("[", deep)},
		{"objects-open", strings.Repeat(`{"a":`, deep)},
		{"objects-closed", strings.Repeat(`{"a":`, deep) + "1" + strings.Repeat("}", deep)},
		{"params", echoReq(strings.Repeat(`{"wktStruct":`, 1) + strings.Repeat(`{"a":`, deep) + "1" + strings.Repeat("}", deep) + "}")},
		{"id", req(echoMethod, "", strings.Repeat("[", deep)+strings.Repeat("]", deep))},
		{"batch-member", "[" + strings.Repeat("[", deep) + strings.Repeat("]", deep) + "]"},
		{"mixed", strings.Repeat(`[{"a":`, deep/2) + strings.Repeat("}]", deep/2)},
		{"list-value", echoReq(`{"wktList":` + strings.Repeat("[", deep) + strings.Repeat("]", deep) + "}")},
	} {
		add("deep/"+tc.name, tc.body, cParse)
	}
	add("deep/1001", strings.Repeat("[", 1001)+strings.Repeat("]", 1001), cParse)
	addBatch("deep/1000", strings.Repeat("[", 1000)+strings.Repeat("]", 1000), cInvalid)
	add("deep/struct-999", echoReq(`{"wktStruct":`+strings.Repeat(`{"a":`, 990)+"1"+strings.Repeat("}", 990)+"}"), cOK, cParams)

	// Invalid UTF-8, inside and outside strings.
	for i, bad := range []string{"\xff", "\xfe", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\x80", "\xc3", "\xe2\x82", "\xf0\x9f\x98"} {
		add(fmt.Sprintf("utf8/%d/method", i), req("helloworld.Greeter."+bad, "", "1"), cParse)
		add(fmt.Sprintf("utf8/%d/string-param", i), echoReq(`{"fString":"a`+bad+`b"}`), cParse)
		add(fmt.Sprintf("utf8/%d/key", i), echoReq(`{"f`+bad+`":1}`), cParse)
		add(fmt.Sprintf("utf8/%d/id", i), req(echoMethod, "", `"`+bad+`"`), cParse)
		add(fmt.Sprintf("utf8/%d/bare", i), bad+req(echoMethod, "", "1"), cParse)
	}
	add("utf8/escaped-lone-surrogate", echoReq(`{"fString":"\ud800"}`), cOK, cParams)
	add("utf8/escaped-reversed-surrogates", echoReq(`{"fString":"\udc00\ud800"}`), cOK, cParams)
	add("utf8/escaped-pair", echoReq(`{"fString":"\ud83d\ude00"}`), cOK)
	add("utf8/nul-escape", echoReq(`{"fString":"a\u0000b"}`), cOK)
	add("utf8/raw-control", echoReq("{\"fString\":\"a\x01b\"}"), cParse)
	add("utf8/raw-newline", echoReq("{\"fString\":\"a\nb\"}"), cParse)
	add("utf8/bad-escape", echoReq(`{"fString":"\x41"}`), cParse)
	add("utf8/short-unicode-escape", echoReq(`{"fString":"\u12"}`), cParse)
	add("utf8/bytes-not-base64", echoReq(`{"fBytes":"!!!"}`), cParams)
	add("utf16-le", "\xff\xfe{\x00}\x00", cParse)

	// Byte order marks.
	add("bom/valid", "\xEF\xBB\xBF"+req("helloworld.Greeter.SayHello", `{"name":"bom"}`, "1"), cOK)
	addBatch("bom/batch", "\xEF\xBB\xBF["+req("helloworld.Greeter.SayHello", "", "1")+"]", cOK)
	add("bom/then-space", "\xEF\xBB\xBF \n"+req("helloworld.Greeter.SayHello", "", "1"), cOK)
	add("bom/twice", "\xEF\xBB\xBF\xEF\xBB\xBF"+req("helloworld.Greeter.SayHello", "", "1"), cParse)
	add("bom/after-space", " \xEF\xBB\xBF"+req("helloworld.Greeter.SayHello", "", "1"), cParse)
	add("bom/only", "\xEF\xBB\xBF", cParse)
	add("bom/partial", "\xEF\xBB"+req("helloworld.Greeter.SayHello", "", "1"), cParse)
	add("bom/in-string", echoReq("{\"fString\":\"\xEF\xBB\xBFx\"}"), cOK)
	add("bom/utf16-be", "\xFE\xFF"+req("helloworld.Greeter.SayHello", "", "1"), cParse)

	// NaN and Infinity.
	for _, lit := range []string{"NaN", "Infinity", "-Infinity", "+Infinity", "nan", "inf", "-NaN", "+1", "01", ".5", "1.", "1e", "-", "0x10"} {
		add("number/id/"+lit, req(echoMethod, "", lit), cParse)
		add("number/param/"+lit, echoReq(`{"fDouble":`+lit+`}`), cParse)
	}
	add("number/param/string-NaN", echoReq(`{"fDouble":"NaN"}`), cOK)
	add("number/param/string-Infinity", echoReq(`{"fFloat":"-Infinity"}`), cOK)
	add("number/param/int-NaN", echoReq(`{"fInt64":"NaN"}`), cParams)
	add("number/param/1e400", echoReq(`{"fDouble":1e400}`), cParams, cOK)
	add("number/param/float-overflow", echoReq(`{"fFloat":1e39}`), cParams)
	add("number/param/value-1e400", echoReq(`{"wktValue":1e400}`), cParams, cOK)
	add("number/id/1e400", req(echoMethod, "", "1e400"), cOK)
	add("number/id/negative-zero", req(echoMethod, "", "-0"), cOK)

	// Duplicate keys.
	hello := `"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello"`
	for _, tc := range []struct{ name, body string }{
		{"jsonrpc", `{` + hello + `,"jsonrpc":"2.0","id":1}`},
		{"method", `{` + hello + `,"method":"helloworld.Greeter.SayHello","id":1}`},
		{"params", `{` + hello + `,"params":{},"params":{},"id":1}`},
		{"id", `{` + hello + `,"id":1,"id":2}`},
		{"escaped-key", `{` + hello + `,"\u006dethod":"x","id":1}`},
	} {
		add("duplicate/"+tc.name, tc.body, cInvalid)
	}
	add("duplicate/param-field", echoReq(`{"fString":"a","fString":"b"}`), cParams)
	add("duplicate/param-json-and-proto-name", echoReq(`{"fString":"a","f_string":"b"}`), cParams)
	add("duplicate/nested-field", echoReq(`{"fMessage":{"name":"a","name":"b"}}`), cParams)
	add("duplicate/map-key", echoReq(`{"mStringInt64":{"k":1,"k":2}}`), cParams)
	add("duplicate/oneof", echoReq(`{"oMessage":{},"oString":"x"}`), cParams, cOK)
	add("duplicate/struct-key", echoReq(`{"wktStruct":{"a":1,"a":2}}`), cParams, cOK)

	// Numbers of 400 digits, as ids and as field values.
	digits := strings.Repeat("7", 400)
	for _, id := range []string{digits, "-" + digits, digits + ".5", "0." + digits, digits + "e10", "1" + strings.Repeat("0", 399)} {
		cs = append(cs, malformed{name: "bignum/id/" + id[:3], body: []byte(req("helloworld.Greeter.SayHello", "", id)), codes: []int{cOK}, id: id})
	}
	for _, field := range []string{"fInt32", "fInt64", "fUint32", "fUint64", "fSint32", "fSint64", "fFixed32", "fFixed64", "fSfixed32", "fSfixed64", "optInt32"} {
		add("bignum/field/"+field, echoReq(`{"`+field+`":`+digits+`}`), cParams)
		add("bignum/field/"+field+"/string", echoReq(`{"`+field+`":"`+digits+`"}`), cParams)
		add("bignum/field/"+field+"/negative", echoReq(`{"`+field+`":-`+digits+`}`), cParams)
	}
	add("bignum/field/fDouble", echoReq(`{"fDouble":`+digits+`}`), cParams, cOK)
	add("bignum/field/fFloat", echoReq(`{"fFloat":`+digits+`}`), cParams)
	add("bignum/field/rInt64", echoReq(`{"rInt64":[1,`+digits+`]}`), cParams)
	add("bignum/field/map-value", echoReq(`{"mStringInt64":{"k":`+digits+`}}`), cParams)
	add("bignum/field/map-key", echoReq(`{"mInt32Message":{"`+digits+`":{}}}`), cParams)
	add("bignum/field/wkt-int64", echoReq(`{"wktInt64":`+digits+`}`), cParams)
	add("bignum/field/wkt-value", echoReq(`{"wktValue":`+digits+`}`), cParams, cOK)
	add("bignum/field/enum", echoReq(`{"rEnum":[`+digits+`]}`), cParams)
	add("bignum/field/duration", echoReq(`{"wktDuration":"`+digits+`s"}`), cParams)
	add("bignum/field/timestamp", echoReq(`{"wktTimestamp":"`+digits+`-01-01T00:00:00Z"}`), cParams)

	// Strings of 10 MB.
	huge := strings.Repeat("a", 10<<20)
	add("huge/method", req(huge, "", "1"), cNotFound)
	add("huge/string-param", echoReq(`{"fString":"`+huge+`"}`), cAny)
	add("huge/unknown-param", echoReq(`{"`+huge+`":1}`), cParams)
	add("huge/unknown-member", `{"jsonrpc":"2.0","method":"x","`+huge+`":1,"id":1}`, cInvalid)
	add("huge/version", `{"jsonrpc":"`+huge+`","method":"x","id":1}`, cInvalid)
	add("huge/bytes-param", echoReq(`{"fBytes":"`+huge+`"}`), cAny)
	cs = append(cs, malformed{name: "huge/id", body: []byte(req("helloworld.Greeter.SayHello", "", `"`+huge+`"`)), codes: []int{cOK}, id: `"` + huge + `"`})
	add("huge/whitespace", strings.Repeat(" ", 10<<20)+req("helloworld.Greeter.SayHello", "", "1")+strings.Repeat("\n", 1<<20), cOK)
	add("huge/truncated-string", echoReq(`{"fString":"`+huge), cParse)

	// Wrong content types: the bridge reads the body whatever it is
	// labelled; a body that is not JSON is a parse error.
	good := req("helloworld.Greeter.SayHello", `{"name":"ct"}`, "1")
	for _, ct := range []string{"-", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml", "application/json; charset=utf-16", "application/octet-stream", "image/png", "application/json-rpc", "application/json, text/plain"} {
		cs = append(cs, malformed{name: "content-type/" + ct, ctype: ct, body: []byte(good), codes: []int{cOK}})
	}
	cs = append(cs,
		malformed{name: "content-type/form-body", ctype: "application/x-www-form-urlencoded", body: []byte("jsonrpc=2.0&method=x&id=1"), codes: []int{cParse}},
		malformed{name: "content-type/xml-body", ctype: "application/xml", body: []byte(`<?xml version="1.0"?><call/>`), codes: []int{cParse}},
		malformed{name: "content-type/multipart-body", ctype: "multipart/form-data; boundary=x", body: []byte("--x\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n1\r\n--x--\r\n"), codes: []int{cParse}},
		// A gzip body cut short in its header: not gzip at all.
		malformed{name: "content-type/gzip-body", header: http.Header{"Content-Encoding": {"gzip"}}, body: []byte("\x1f\x8b\x08\x00\x00\x00\x00\x00"), status: http.StatusBadRequest, codes: []int{cParse}},
		malformed{name: "content-encoding/not-gzip", header: http.Header{"Content-Encoding": {"gzip"}}, body: []byte(good), status: http.StatusBadRequest, codes: []int{cParse}},
		malformed{name: "content-encoding/br", header: http.Header{"Content-Encoding": {"br"}}, body: []byte(good), status: http.StatusUnsupportedMediaType, codes: []int{cInvalid}},
	)

	// Bodies larger than the limit, with and without a Content-Length.
	over := echoReq(`{"fString":"` + strings.Repeat("b", int(maxBody)) + `"}`)
	cs = append(cs,
		malformed{name: "limit/over-with-length", body: []byte(over), status: http.StatusRequestEntityTooLarge, codes: []int{cInvalid}},
		malformed{name: "limit/over-chunked", raw: chunked(over, true), status: http.StatusRequestEntityTooLarge, codes: []int{cInvalid}},
		malformed{name: "limit/over-by-one", body: []byte(strings.Repeat(" ", int(maxBody)-len(good)+1) + good), status: http.StatusRequestEntityTooLarge, codes: []int{cInvalid}},
		malformed{name: "limit/exactly", body: []byte(strings.Repeat(" ", int(maxBody)-len(good)) + good), codes: []int{cOK}},
		malformed{name: "limit/lying-length", raw: []byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n" + good), status: http.StatusRequestEntityTooLarge, codes: []int{cInvalid}},
	)

	// Chunked bodies that never end, and bodies shorter than their length:
	// the server's ReadTimeout (shorter than body_timeout) ends them, with
	// 408.
	cs = append(cs,
		malformed{name: "endless/chunked", raw: chunked(good, false), status: http.StatusRequestTimeout, codes: []int{cInvalid}},
		malformed{name: "endless/chunked-partial-json", raw: chunked(`{"jsonrpc":"2.0","method":`, false), status: http.StatusRequestTimeout, codes: []int{cInvalid}},
		malformed{name: "endless/chunk-size-only", raw: []byte("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n"), status: http.StatusRequestTimeout, codes: []int{cInvalid}},
		malformed{name: "endless/short-length", raw: []byte("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + good), status: http.StatusRequestTimeout, codes: []int{cInvalid}},
		malformed{name: "endless/bad-chunk-size", raw: []byte("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + good + "\r\n0\r\n\r\n"), status: http.StatusBadRequest, codes: []int{cParse}},
	)

	// Ids of the wrong type.
	for _, id := range []string{`{}`, `{"a":1}`, `[]`, `[1]`, `true`, `false`} {
		add("id/"+id, req("helloworld.Greeter.SayHello", "", id), cInvalid)
	}
	cs = append(cs,
		malformed{name: "id/null", body: []byte(req("helloworld.Greeter.SayHello", "", "null")), codes: []int{cOK}, id: "null"},
		malformed{name: "id/escaped-string", body: []byte(req("helloworld.Greeter.SayHello", "", `"a\"b\u0041"`)), codes: []int{cOK}, id: `"a\"b\u0041"`},
		malformed{name: "id/spaced", body: []byte(`{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id" :  -12.5e+3 }`), codes: []int{cOK}, id: "-12.5e+3"},
	)

	// Envelopes that are not requests.
	for _, tc := range []struct{ name, body string }{
		{"null", "null"}, {"number", "1"}, {"string", `"x"`}, {"true", "true"},
		{"empty-object", "{}"},
		{"no-version", `{"method":"helloworld.Greeter.SayHello","id":1}`},
		{"version-1", `{"jsonrpc":"1.0","method":"helloworld.Greeter.SayHello","id":1}`},
		{"version-number", `{"jsonrpc":2.0,"method":"helloworld.Greeter.SayHello","id":1}`},
		{"no-method", `{"jsonrpc":"2.0","id":1}`},
		{"method-number", `{"jsonrpc":"2.0","method":1,"id":1}`},
		{"method-null", `{"jsonrpc":"2.0","method":null,"id":1}`},
		{"params-string", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":"x","id":1}`},
		{"params-null", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":null,"id":1}`},
		{"unknown-member", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":1,"extra":1}`},
	} {
		add("envelope/"+tc.name, tc.body, cInvalid)
	}
	for _, tc := range []struct{ name, body string }{
		{"empty", ""}, {"space", " \r\n\t"}, {"two-values", good + good}, {"trailing-comma", `[` + good + `,]`},
		{"single-quotes", `{'jsonrpc':'2.0'}`}, {"comment", `/* x */` + good}, {"unquoted-key", `{jsonrpc:"2.0"}`},
		{"trailing-garbage", good + "x"}, {"leading-garbage", "x" + good}, {"nul", "\x00"}, {"nul-after", good + "\x00"},
	} {
		add("syntax/"+tc.name, tc.body, cParse)
	}
	add("params/array", req(echoMethod, `[1,2]`, "1"), cOK)
	add("params/array-wrong-type", req(echoMethod, `["x"]`, "1"), cParams)
	add("params/array-too-long", req(echoMethod, "["+strings.Repeat("1,", 60)+"1]", "1"), cParams)
	add("params/unknown-field", echoReq(`{"nope":1}`), cParams)
	add("params/wrong-type", echoReq(`{"fString":1}`), cParams)
	add("params/bad-enum", echoReq(`{"rEnum":["NOPE"]}`), cParams)
	add("params/bad-timestamp", echoReq(`{"wktTimestamp":"yesterday"}`), cParams)
	add("params/any-unknown-type", echoReq(`{"wktAny":{"@type":"type.googleapis.com/nobody.Knows"}}`), cParams)
	add("method/unknown", req("nobody.Knows.This", "", "1"), cNotFound)
	add("method/reserved", req("rpc.nothing", "", "1"), cNotFound)
	add("method/empty", req("", "", "1"), cNotFound)

	// Batches of every invalid member kind, alone and among valid ones.
	members := []struct{ name, body string }{
		{"number", "1"}, {"string", `"x"`}, {"null", "null"}, {"true", "true"}, {"array", "[]"},
		{"nested-batch", "[" + good + "]"}, {"empty-object", "{}"},
		{"version", `{"jsonrpc":"1.0","method":"helloworld.Greeter.SayHello","id":7}`},
		{"no-method", `{"jsonrpc":"2.0","id":7}`},
		{"method-type", `{"jsonrpc":"2.0","method":[],"id":7}`},
		{"params-type", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","params":1,"id":7}`},
		{"id-object", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":{"a":1}}`},
		{"id-bool", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":true}`},
		{"unknown-member", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":7,"x":1}`},
		{"duplicate-id", `{"jsonrpc":"2.0","method":"helloworld.Greeter.SayHello","id":7,"id":8}`},
	}
	for _, m := range members {
		addBatch("batch/alone/"+m.name, "["+m.body+"]", cInvalid)
		addBatch("batch/mixed/"+m.name, "["+good+","+m.body+","+req(countMethod, `{"key":"batch-notification"}`, "")+","+m.body+"]", cOK, cInvalid, cInvalid)
	}
	all := make([]string, len(members))
	allCodes := make([]int, len(members))
	for i, m := range members {
		all[i], allCodes[i] = m.body, cInvalid
	}
	addBatch("batch/every-kind", "["+strings.Join(all, ",")+"]", allCodes...)
	addBatch("batch/not-found-and-params", "["+req("nobody.Knows", "", "1")+","+req(echoMethod, `["x"]`, "2")+"]", cNotFound, cParams)
	add("batch/empty", "[]", cInvalid)
	add("batch/empty-spaced", "[ \n ]", cInvalid)
	add("batch/too-large", "["+strings.TrimSuffix(strings.Repeat(good+",", 101), ",")+"]", cInvalid)
	cs = append(cs, malformed{name: "batch/only-notifications", body: []byte("[" + req(countMethod, `{"key":"batch-notification"}`, "") + "]"), status: http.StatusNoContent})
	cs = append(cs, malformed{name: "batch/invalid-notification-like", body: []byte(`[{"jsonrpc":"2.0"}]`), codes: []int{cInvalid}, batch: true})

	// Other HTTP methods and bad headers.
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodHead, http.MethodOptions} {
		cs = append(cs, malformed{name: "http-method/" + m, method: m, body: []byte(good), status: http.StatusMethodNotAllowed, codes: []int{cInvalid}})
	}
	for _, h := range []http.Header{
		{"Grpc-Timeout": {"soon"}}, {"Grpc-Timeout": {"123456789S"}}, {"Grpc-Timeout": {"-1S"}}, {"Grpc-Timeout": {"1x"}},
		{"X-Request-Timeout": {"-5s"}}, {"X-Request-Timeout": {"NaN"}}, {"X-Request-Timeout": {"1e400"}}, {"X-Request-Timeout": {"forever"}},
		{"Grpc-Metadata-Key-Bin": {"!!not base64!!"}}, {"Grpc-Metadata-Key": {"caf\u00e9"}},
	} {
		cs = append(cs, malformed{name: "header/" + fmt.Sprint(h), header: h, body: []byte(good), status: http.StatusBadRequest, codes: []int{cInvalid}})
	}
	for _, h := range []http.Header{
		{"Grpc-Timeout": {"99999999H"}}, {"X-Request-Timeout": {"1e-300"}}, {"Traceparent": {"garbage"}},
		{"X-Request-Id": {strings.Repeat("x", 1000)}}, {"Grpc-Metadata-Grpc-Status": {"0"}}, {"Connection": {"Grpc-Metadata-A"}, "Grpc-Metadata-A": {"1"}},
	} {
		cs = append(cs, malformed{name: "header/ok/" + fmt.Sprint(h)[:min(40, len(fmt.Sprint(h)))], header: h, body: []byte(good), codes: []int{cOK, 4}})
	}
	return cs
}

// chunked returns a raw chunked POST of body, ended or never ended.
func chunked(body string, end bool) []byte {
	var b bytes.Buffer
	b.WriteString("POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
	for len(body) > 0 {
		n := min(len(body), 64<<10)
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	if end {
		b.WriteString("0\r\n\r\n")
	}
	return b.Bytes()
}

// leaks are pieces of Go error text and stack traces no reply may carry.
var leaks = []string{"goroutine ", "panic", ".go:", "runtime error", "rpc error:", "proto:", "json:", "http:", "invalid character", "unexpected EOF", "127.0.0.1", "i/o timeout", "syntax error"}

// TestMalformedInput sends the malformed-input corpus over loopback HTTP
// to a bridge in front of a real gRPC backend. Every request gets the
// documented HTTP status and a well-formed JSON-RPC reply (never a 5xx,
// never Go error text), and a normal call works after each.
func TestMalformedInput(t *testing.T) {
	checkLeaks(t)
	const maxBody = 12 << 20
	e := newEnv(t, bridge.Options{Limits: bridge.Limits{MaxBodyBytes: maxBody, CallTimeout: 5 * time.Second}, MaxResponseBytes: 64 << 20, MaxInFlight: 1 << 10}, reconnecting(), ownClient())
	// A second http.Server on the same bridge with a short ReadTimeout,
	// for the bodies that never end.
	slowURL := serveBridge(t, e.bridge, func(hs *http.Server) { hs.ReadTimeout = 300 * time.Millisecond })
	cases := malformedCorpus(maxBody)
	if len(cases) < 300 {
		t.Fatalf("the corpus has %d cases, want at least 300", len(cases))
	}
	t.Logf("malformed-input corpus: %d requests", len(cases))
	normal := 0
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var status int
			var body []byte
			var header http.Header
			if tc.raw != nil {
				url := e.url
				if strings.HasPrefix(tc.name, "endless/") {
					url = slowURL
				}
				status, header, body = sendRaw(t, url, tc.raw)
			} else {
				status, header, body = sendMalformed(t, e, tc)
			}
			checkMalformedReply(t, tc, status, header, body)
			normal++
			key := `{"key":"malformed-normal"}`
			r := e.call(t, req(countMethod, key, strconv.Itoa(normal)))
			if got := r["result"]; fmt.Sprint(got) != fmt.Sprintf("map[count:%d]", normal) {
				t.Fatalf("normal call after %s: got %v, want count %d", tc.name, r, normal)
			}
		})
	}
	if got := e.backend.Calls("malformed-normal"); got != int64(normal) {
		t.Errorf("backend counted %d normal calls, want %d", got, normal)
	}
}

func sendMalformed(t *testing.T, e *env, tc malformed) (int, http.Header, []byte) {
	t.Helper()
	method := tc.method
	if method == "" {
		method = http.MethodPost
	}
	hr, err := http.NewRequest(method, e.url+"/", bytes.NewReader(tc.body))
	if err != nil {
		t.Fatal(err)
	}
	switch tc.ctype {
	case "":
		hr.Header.Set("Content-Type", "application/json")
	case "-":
	default:
		hr.Header["Content-Type"] = []string{tc.ctype}
	}
	for k, v := range tc.header {
		hr.Header[k] = v
	}
	resp, err := e.client.Do(hr)
	if err != nil {
		t.Fatalf("%s: %v", tc.name, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: reading the reply: %v", tc.name, err)
	}
	return resp.StatusCode, resp.Header, b
}

// sendRaw writes raw to a new TCP connection to url and reads one
// response; the request may never end, so the server must answer early.
func sendRaw(t *testing.T, url string, raw []byte) (int, http.Header, []byte) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	go c.Write(raw) // the server may answer, and stop reading, before the end
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the response: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the response body: %v", err)
	}
	return resp.StatusCode, resp.Header, b
}

func checkMalformedReply(t *testing.T, tc malformed, status int, header http.Header, body []byte) {
	t.Helper()
	short := body
	if len(short) > 300 {
		short = short[:300]
	}
	want := tc.status
	if want == 0 {
		want = http.StatusOK
	}
	if status >= 500 || status != want {
		t.Fatalf("HTTP %d %s, want %d", status, short, want)
	}
	if status == http.StatusNoContent || tc.method == http.MethodHead {
		if len(body) != 0 {
			t.Fatalf("HTTP %d with body %s", status, short)
		}
		return
	}
	if ct := header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	v := decode(t, body)
	check := func(r map[string]any, code int) {
		checkEnvelope(t, r)
		if eo, ok := r["error"].(map[string]any); ok {
			text, _ := json.Marshal(eo)
			for _, leak := range leaks {
				if bytes.Contains(text, []byte(leak)) {
					t.Errorf("error %.300s leaks %q", text, leak)
				}
			}
		}
		got := int(errCode(t, r))
		if code == cAny {
			return
		}
		if got != code {
			t.Errorf("reply %.300s: code %d, want %d", mustJSON(r), got, code)
		}
		if (code == cParse || code == cInvalid) && r["id"] != nil {
			t.Errorf("reply %.300s: id %v, want null", mustJSON(r), r["id"])
		}
	}
	if tc.batch {
		arr, ok := v.([]any)
		if !ok {
			t.Fatalf("reply %s is not an array", short)
		}
		if len(arr) != len(tc.codes) {
			t.Fatalf("got %d replies %s, want %d", len(arr), short, len(tc.codes))
		}
		for i, x := range arr {
			r, ok := x.(map[string]any)
			if !ok {
				t.Fatalf("reply %d of %s is not an object", i, short)
			}
			check(r, tc.codes[i])
		}
		return
	}
	r, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("reply %s is not an object", short)
	}
	got := int(errCode(t, r))
	want2 := tc.codes[0]
	for _, c := range tc.codes {
		if c == got || c == cAny {
			want2 = c
		}
	}
	check(r, want2)
	if tc.id != "" {
		if got := rawID(t, body); got != tc.id {
			t.Errorf("id %.80s, want %.80s", got, tc.id)
		}
	}
}

// rawID returns the id of a single reply exactly as the bridge wrote it.
func rawID(t *testing.T, body []byte) string {
	var r struct {
		ID json.RawMessage `json:"id"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("reply %.100s: %v", body, err)
	}
	return string(r.ID)
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}
