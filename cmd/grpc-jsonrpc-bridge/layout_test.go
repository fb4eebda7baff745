package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeLayout holds README's layout section to the tree: every
// package folder of the module is a row of it (proto/'s, which its row
// names, and testdata aside), and every row names a folder that exists.
func TestReadmeLayout(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	start := strings.Index(text, "\n## Layout\n")
	if start < 0 {
		t.Fatal("README has no Layout section")
	}
	section := text[start+1:]
	if end := strings.Index(section[3:], "\n## "); end >= 0 {
		section = section[:end+3]
	}
	rows := map[string]bool{}
	cell := regexp.MustCompile("`([a-z0-9/_-]+?)/?`")
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line[1:], "|", 2)[0]
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			rows[m[1]] = true
		}
	}
	root := "../.."
	for row := range rows {
		if st, err := os.Stat(filepath.Join(root, row)); err != nil || !st.IsDir() {
			t.Errorf("README's layout names %s, which is not a folder", row)
		}
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel != "." && strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "node_modules", strings.HasPrefix(rel, "proto"):
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if dir := filepath.ToSlash(filepath.Dir(rel)); !rows[dir] {
			t.Errorf("package folder %s has no row in README's layout", dir)
			rows[dir] = true // said once
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
