package bridge_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDocWalks holds doc.go's map to the tree: its list of the package's
// files names every non-test file of package bridge, and nothing else;
// each walk (a "# One ..." section) names, in its first column, files or
// packages that exist, and none twice.
func TestDocWalks(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, f := range must(filepath.Glob("*.go")) {
		if !strings.HasSuffix(f, "_test.go") && f != "doc.go" {
			files = append(files, f)
		}
	}
	// A line of a table: "//\t" then a name, then two or more spaces.
	row := regexp.MustCompile(`^//\t([a-z0-9_./]+)\s{2,}`)
	sections := map[string][]string{}
	section := "files"
	for _, line := range strings.Split(string(src), "\n") {
		if h, ok := strings.CutPrefix(line, "// # "); ok {
			section = h
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil {
			sections[section] = append(sections[section], m[1])
		}
	}
	var listed []string
	for _, f := range sections["files"] {
		if strings.HasSuffix(f, ".go") { // the package table above it names packages
			listed = append(listed, f)
		}
	}
	slices.Sort(listed)
	if !slices.Equal(listed, files) {
		t.Errorf("doc.go's list of files = %v\nthe package's files  = %v", listed, files)
	}
	walks := 0
	for name, stops := range sections {
		if !strings.HasPrefix(name, "One ") || len(stops) == 0 {
			continue
		}
		walks++
		seen := map[string]bool{}
		for _, stop := range stops {
			if seen[stop] {
				t.Errorf("walk %q names %s twice", name, stop)
			}
			seen[stop] = true
			if _, err := os.Stat(stop); err != nil {
				t.Errorf("walk %q names %s, which is not a file or package of bridge/", name, stop)
			}
		}
	}
	if walks < 4 { // unary, live, WebSocket, MCP (the batch is told in prose)
		t.Errorf("doc.go walks %d flows, want 4 at least", walks)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
