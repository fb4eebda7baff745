package mapping

import "testing"

const benchParams = `{"fString": "hello", "fInt32": 42, "fInt64": "9000000000", "fBool": true, "fMessage": {"name": "n"}}`

func BenchmarkRequest(b *testing.B) {
	bk := loadBackend(b)
	c := NewCodec(bk.method(b, "test.v1.TestService.Echo"), NewResolver(bk.types), Options{})
	params := []byte(benchParams)
	b.ReportAllocs()
	for b.Loop() {
		if _, jerr := c.Request(params); jerr != nil {
			b.Fatal(jerr)
		}
	}
}

func BenchmarkAppendResult(b *testing.B) {
	bk := loadBackend(b)
	c := NewCodec(bk.method(b, "test.v1.TestService.Echo"), NewResolver(bk.types), Options{})
	m, jerr := c.Request([]byte(benchParams))
	if jerr != nil {
		b.Fatal(jerr)
	}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = c.AppendResult(buf[:0], m); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRequestInvalid(b *testing.B) {
	c := NewCodec(generatedEcho(), NewResolver(nil), Options{})
	params := []byte(`{"fString": "hello", "fMessage": {"name": 1}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, jerr := c.Request(params); jerr == nil {
			b.Fatal("got no error")
		}
	}
}
