package observe_test

import (
	"bytes"
	"context"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/observe"
)

// lines writes r with slog's handler and with NewLineHandler, text or
// JSON, and returns both outputs.
func lines(t testing.TB, json bool, r slog.Record) (std, line string) {
	t.Helper()
	var a, b bytes.Buffer
	var h slog.Handler
	if json {
		h = slog.NewJSONHandler(&a, nil)
	} else {
		h = slog.NewTextHandler(&a, nil)
	}
	if err := h.Handle(context.Background(), r.Clone()); err != nil {
		t.Fatal(err)
	}
	if err := observe.NewLineHandler(&b, json, nil).Handle(context.Background(), r.Clone()); err != nil {
		t.Fatal(err)
	}
	return a.String(), b.String()
}

var lineStrings = []string{"", "plain", "a b", "a=b", `q"uote`, `back\slash`, "tab\there", "new\nline", "\x00\x1f\x7f",
	"café", "漢字", "\u00a0nbsp", "\u2028\u2029", "\xff\xfe", "\ufffd", "emoji 🚀", "<html>&amp;", "zero\u200bwidth",
	"bench.v1.EchoService.Echo", "ZNAF3G5LSMP2UKCHRHXG7G7Y7K"}

var lineFloats = []float64{0, math.Copysign(0, -1), 1, 6.095, 0.001, 1e-7, 1.5e-7, 123456789, 1e20, 1e21, 1.5e300, -2.5e-10, math.MaxFloat64, math.SmallestNonzeroFloat64, math.NaN(), math.Inf(1)}

// TestLineHandlerMatchesSlog holds NewLineHandler to slog's own output,
// byte for byte, for the access log's records and odd values.
func TestLineHandlerMatchesSlog(t *testing.T) {
	when := []time.Time{time.Now(), time.Date(2026, 12, 1, 14, 11, 5, 0, time.UTC), time.Date(2026, 1, 2, 3, 4, 5, 999999999, time.FixedZone("x", 5*3600+1800)), {}, time.Date(12000, 1, 1, 0, 0, 0, 0, time.UTC)}
	for _, json := range []bool{false, true} {
		for _, tm := range when {
			for _, s := range lineStrings {
				for _, f := range lineFloats {
					r := slog.NewRecord(tm, slog.LevelInfo, s, 0)
					r.AddAttrs(slog.String("method", s), slog.Int("code", -3), slog.Float64("duration_ms", f),
						slog.String(s, "key"), slog.Uint64("u", math.MaxUint64), slog.Bool("notification", true))
					if std, line := lines(t, json, r); std != line {
						t.Fatalf("json %v: slog wrote\n%q\nNewLineHandler wrote\n%q", json, std, line)
					}
				}
			}
		}
		// What it hands to slog's handler: other kinds, groups, empty keys.
		r := slog.NewRecord(time.Now(), slog.LevelWarn, "m", 0)
		r.AddAttrs(slog.Duration("d", time.Second), slog.Time("t", time.Now()), slog.Any("e", []int{1}), slog.Group("g", slog.Int("a", 1)), slog.Attr{})
		if std, line := lines(t, json, r); std != line {
			t.Fatalf("json %v: slog wrote\n%q\nNewLineHandler wrote\n%q", json, std, line)
		}
	}
}

// FuzzLineHandler holds NewLineHandler to slog's output for any strings
// and numbers.
func FuzzLineHandler(f *testing.F) {
	for _, s := range lineStrings {
		f.Add(s, s, int64(0), 6.095, false)
	}
	f.Fuzz(func(t *testing.T, msg, s string, n int64, fl float64, json bool) {
		r := slog.NewRecord(time.Unix(0, n), slog.Level(n%16), msg, 0)
		r.AddAttrs(slog.String(s, s), slog.Int64("n", n), slog.Float64("f", fl), slog.Bool("b", n%2 == 0))
		if std, line := lines(t, json, r); std != line {
			t.Fatalf("json %v: slog wrote\n%q\nNewLineHandler wrote\n%q", json, std, line)
		}
	})
}

func BenchmarkLineHandler(b *testing.B) {
	for _, h := range []struct {
		name string
		h    slog.Handler
	}{{"slog", slog.NewTextHandler(discard{}, nil)}, {"line", observe.NewLineHandler(discard{}, false, nil)}} {
		b.Run(h.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := slog.NewRecord(time.Now(), slog.LevelInfo, "call", 0)
				r.AddAttrs(slog.String("method", "bench.v1.EchoService.Echo"), slog.Int("code", 0), slog.Float64("duration_ms", 6.095),
					slog.String("identity", "anonymous"), slog.String("request_id", "ZNAF3G5LSMP2UKCHRHXG7G7Y7K"), slog.Bool("notification", false))
				h.h.Handle(context.Background(), r)
			}
		})
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
