package wire

import (
	"os"
	"testing"
)

// BenchmarkParse parses JSON-RPC requests whose params are the bench's
// payload shapes (mapping/testdata/payloads): the envelope scan checks
// every byte of a body before anything runs.
func BenchmarkParse(b *testing.B) {
	for _, shape := range []string{"small", "large", "wkt"} {
		params, err := os.ReadFile("../../mapping/testdata/payloads/" + shape + ".json")
		if err != nil {
			b.Fatal(err)
		}
		body := append(append([]byte(`{"jsonrpc":"2.0","id":1,"method":"bench.v1.Bench.Call","params":`), params...), '}')
		b.Run(shape, func(b *testing.B) {
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			var m Message
			for b.Loop() {
				if e := Parse(body, 100, &m); e != nil || m.Single.Invalid != nil {
					b.Fatal("not parsed")
				}
			}
		})
	}
}
