package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestErrorsDocListsEveryHTTPStatus: docs/errors.md promises every HTTP
// status the bridge answers; its table has a row for each status the
// bridge's packages write (the explorer's 301 and 304 too), for 403,
// which the WebSocket library answers to a refused Origin, and for its
// 101.
func TestErrorsDocListsEveryHTTPStatus(t *testing.T) {
	doc, err := os.ReadFile("../../docs/errors.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "## HTTP statuses")
	if !ok {
		t.Fatal("docs/errors.md has no HTTP statuses section")
	}
	rows := map[int]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| (\d{3}) \|`).FindAllStringSubmatch(table, -1) {
		n, _ := strconv.Atoi(m[1])
		rows[n] = true
	}
	// The name of every status constant, as net/http spells it.
	codes := map[string]int{}
	for n := 100; n < 600; n++ {
		if text := http.StatusText(n); text != "" {
			codes["Status"+strings.NewReplacer(" ", "", "-", "", "'", "").Replace(text)] = n
		}
	}
	want := map[int]string{
		http.StatusForbidden:          "coder/websocket's Origin check",
		http.StatusSwitchingProtocols: "coder/websocket's upgrade",
	}
	// Every package of the bridge's HTTP face (the explorer, WebSocket,
	// MCP, ... too), but not bridge/backend, which reads the statuses of
	// the backend's replies.
	var files []string
	err = filepath.WalkDir("../../bridge", func(path string, d os.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "backend" || d.Name() == "testdata" || d.Name() == "node_modules"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go"):
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok || !strings.HasPrefix(sel.Sel.Name, "Status") || sel.Sel.Name == "StatusText" {
				return true
			}
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "http" {
				code, ok := codes[sel.Sel.Name]
				if !ok {
					t.Errorf("%s: cannot tell the number of http.%s", file, sel.Sel.Name)
				}
				want[code] = strings.TrimPrefix(file, "../../")
			}
			return true
		})
	}
	for _, code := range slices.Sorted(maps.Keys(want)) {
		if !rows[code] {
			t.Errorf("docs/errors.md has no row for HTTP %d (answered in %s)", code, want[code])
		}
	}
}
