package config

import (
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestSuggest(t *testing.T) {
	keys := []string{"listen", "backend", "backends", "call_timeout", "max_call_timeout", "tls", "tracing"}
	tests := []struct {
		name string
		want []string
	}{
		{"lisen", []string{"listen"}},
		{"LISTEN", []string{"listen"}},
		{"lsiten", []string{"listen"}}, // a swap is one edit
		{"call-timeout", []string{"call_timeout"}},
		{"backedn", []string{"backend"}},
		{"backend_addr", []string{"backend"}}, // begins with a key
		{"tsl", []string{"tls"}},
		{"trace", nil},
		{"ca", nil}, // no key begins with ca_
		{"t", nil},  // one letter is too little to suggest from
		{"zzz", nil},
		{"", nil},
	}
	for _, tt := range tests {
		if got := Suggest(tt.name, keys); !slices.Equal(got, tt.want) {
			t.Errorf("Suggest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
	// A prefix of several keys suggests at most three.
	if got := Suggest("tls-cert", []string{"tls-cert-file", "tls-cert-chain", "tls-cert-store", "tls-cert-other"}); len(got) != 3 || got[0] != "tls-cert-file" {
		t.Errorf("got %q, want the first three keys beginning with tls-cert", got)
	}
	// Two letters are enough for a prefix at a word boundary (ca: for ca_file).
	if got := Suggest("ca", []string{"ca_file", "server_name", "cert_file", "key_file"}); !slices.Equal(got, []string{"ca_file"}) {
		t.Errorf(`Suggest("ca") = %q, want ["ca_file"]`, got)
	}
	if got := DidYouMean([]string{"a", "b", "c"}, strconv.Quote); got != `did you mean "a", "b" or "c"?` {
		t.Errorf("got %q", got)
	}
}

// TestUnknownKeySuggests: an unknown key of the file is answered with the
// nearest keys, not the list of every key, and still names key and file.
func TestUnknownKeySuggests(t *testing.T) {
	tests := []struct {
		name, file, wantKey, want string
	}{
		{name: "typo", file: "lisen: :8080\n", wantKey: "lisen", want: `did you mean "listen"?`},
		{name: "flag spelling", file: "call-timeout: 5s\n", wantKey: "call-timeout", want: `did you mean "call_timeout"?`},
		{name: "section typo", file: "tsl:\n  cert_file: x\n", wantKey: "tsl", want: `did you mean "tls"?`},
		{name: "nested typo", file: "tracing:\n  exporer: otlp\n", wantKey: "tracing.exporer", want: `did you mean "tracing.exporter"?`},
		{name: "nested prefix", file: "tls:\n  cert: x\n", wantKey: "tls.cert", want: `did you mean "tls.cert_file"?`},
		{name: "dotted key at the top", file: "tls.cert_file: x\n", wantKey: "tls.cert_file", want: `in the tls section`},
		{name: "config in the file", file: "config: other.yaml\n", wantKey: "config", want: "names the file"},
		{name: "nothing near", file: "zzzzzz: 1\n", wantKey: "zzzzzz", want: "no setting has this name"},
		{name: "nothing near in a section", file: "metadata:\n  zzzzzz: 1\n", wantKey: "metadata.zzzzzz", want: "metadata.request_headers, metadata.response_headers"},
		{name: "short backend tls key", file: "backends:\n  - address: a:1\n    tls:\n      ca: x\n", wantKey: "backends[0].tls.ca", want: `did you mean "ca_file"?`},
		{name: "backend key", file: "backends:\n  - {address: a:1, plaintext: true, inclde: [x]}\n", wantKey: "backends[0].inclde", want: `did you mean "include"?`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := load(t, []string{"--config", "$FILE"}, nil, tt.file)
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tt.wantKey || !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("got %v, want an unknown key error for %s", err, tt.wantKey)
			}
			msg := err.Error()
			for _, want := range []string{path + ": ", `"` + tt.wantKey + `"`, tt.want} {
				if !strings.Contains(msg, want) {
					t.Errorf("got %q, want it to contain %q", msg, want)
				}
			}
			// A backend's keys are listed (18 of them), not every setting.
			if strings.Contains(msg, "max_stream_bytes") || len(msg) > len(path)+450 {
				t.Errorf("got %q, want no list of every key", msg)
			}
		})
	}
}
