package wire

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// TestSkipValueMatchesScanValue: on accepted JSON, SkipValue finds the end
// ScanValue finds.
func TestSkipValueMatchesScanValue(t *testing.T) {
	for _, v := range []string{
		`"a"`, `"a\"b\\"`, `"\\"`, `12`, `-1.5e+3`, `true`, `null`, `{}`, `[]`,
		`{"a":[1,"]}",{"b":"\\\""}],"c":null}`, `[[["x"]],{}]`, `{"k":"}"}`,
	} {
		for _, tail := range []string{"", ",1", "}", "]", " ", "\n"} {
			b := []byte(v + tail)
			want, err := ScanValue(b, 0, 0)
			if err != nil {
				t.Fatalf("%s: %v", v, err)
			}
			if got := SkipValue(b, 0); got != want {
				t.Errorf("SkipValue(%q) = %d, want %d", b, got, want)
			}
		}
	}
}

func FuzzSkipValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x\"y"]}`, `"s"`, `1.5`, `[true,null]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		want, err := ScanValue(b, 0, 0)
		if err != nil || want != len(b) {
			return // only whole values reach SkipValue: the body check refuses the rest
		}
		if got := SkipValue(b, 0); got != want {
			t.Fatalf("SkipValue(%q) = %d, want %d", b, got, want)
		}
	})
}

// FuzzScanValue holds the envelope scan to encoding/json on valid UTF-8
// input shorter than the nesting bound: ScanValue accepts a whole input
// exactly when json.Valid does.
func FuzzScanValue(f *testing.F) {
	for _, s := range []string{`{"a":[1,"x\"y"]}`, `"s"`, `1.5`, `[true,null]`, `"\ud83d\ude80 ünïcode"`, `{"a":"b\u0000"}`, "\"a\x01\"", `01`, `[1,]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || len(b) >= 2*maxDepth || !utf8.Valid(b) {
			return
		}
		end, err := ScanValue(b, 0, 0)
		got := err == nil && SkipSpace(b, end) == len(b)
		if want := json.Valid(b); got != want && !isSpace(b[0]) {
			t.Fatalf("ScanValue(%q): whole %v, json.Valid %v (err %v, end %d)", b, got, want, err, end)
		}
	})
}
