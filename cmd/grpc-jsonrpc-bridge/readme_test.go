package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// readmeCommand is a `list` or `describe` command of the README's console
// blocks, run from the repository's root, with an optional `| jq -c .FIELD`.
var readmeCommand = regexp.MustCompile(`^\$ go run \./cmd/grpc-jsonrpc-bridge ((?:list|describe) [^|]*?)(?: \| jq -c \.(\w+))?$`)

// TestReadmeCommands: the list and describe commands the README shows
// print what it shows after them, up to a line "..." where it leaves the
// rest out.
func TestReadmeCommands(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	type example struct {
		line, args, field string
		shown             []string
		elided            bool
	}
	var examples []*example
	var cur *example
	inConsole := false
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSuffix(line, "\n")
		switch {
		case strings.HasPrefix(line, "```"):
			inConsole = line == "```console"
			cur = nil
		case !inConsole:
		case strings.HasPrefix(line, "$ "):
			cur = nil
			if m := readmeCommand.FindStringSubmatch(line); m != nil {
				cur = &example{line: line, args: m[1], field: m[2]}
				examples = append(examples, cur)
			}
		case cur == nil || cur.elided:
		case line == "...":
			cur.elided = true
		default:
			cur.shown = append(cur.shown, line)
		}
	}
	if len(examples) < 3 {
		t.Fatalf("found %d list and describe examples in the README, want at least 3", len(examples))
	}
	t.Chdir("../..")
	for _, ex := range examples {
		t.Run(ex.args, func(t *testing.T) {
			code, stdout, stderr := runSync(t, strings.Fields(ex.args)...)
			if code != exitOK {
				t.Fatalf("%s: exit code %d; stderr:\n%s", ex.line, code, stderr)
			}
			if ex.field != "" {
				var v map[string]json.RawMessage
				if err := json.Unmarshal([]byte(stdout), &v); err != nil {
					t.Fatalf("%s: not a JSON object: %v", ex.line, err)
				}
				var c bytes.Buffer
				if err := json.Compact(&c, v[ex.field]); err != nil {
					t.Fatalf("%s: .%s: %v", ex.line, ex.field, err)
				}
				stdout = c.String() + "\n"
			}
			want := strings.Join(ex.shown, "\n") + "\n"
			if ex.elided && !strings.HasPrefix(stdout, want) || !ex.elided && stdout != want {
				t.Errorf("%s\nprints\n%s\nwhere the README shows\n%s", ex.line, stdout, want)
			}
		})
	}
}
