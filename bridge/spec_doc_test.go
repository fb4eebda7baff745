package bridge_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSpecComplianceNamesRealTests: every test docs/spec-compliance.md
// cites exists: a Test, Fuzz or Benchmark function of the module, or a
// transcript of TestTranscripts.
func TestSpecComplianceNamesRealTests(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "spec-compliance.md"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join("..", "*", "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join("..", "cmd", "*", "*_test.go"))
	sub, _ := filepath.Glob(filepath.Join("*", "*_test.go")) // bridge's own packages
	more = append(more, sub...)
	var src strings.Builder
	for _, f := range append(files, more...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(b)
	}
	cited := regexp.MustCompile("`((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]+)(?:/([A-Za-z0-9_*]+))?`").FindAllStringSubmatch(string(doc), -1)
	if len(cited) < 20 {
		t.Fatalf("found %d test names in docs/spec-compliance.md, want the table's", len(cited))
	}
	for _, c := range cited {
		name, sub := c[1], c[2]
		if name == "TestTranscripts" && sub == "NAME" {
			continue // the placeholder of the page's introduction
		}
		if name == "TestTranscripts" && sub != "" {
			matches, _ := filepath.Glob(filepath.Join("testdata", "transcripts", sub+".txt"))
			if len(matches) == 0 {
				t.Errorf("docs/spec-compliance.md cites %s, but there is no testdata/transcripts/%s.txt", c[0], sub)
			}
			continue
		}
		if !strings.Contains(src.String(), "func "+name+"(") {
			t.Errorf("docs/spec-compliance.md cites %s, which no test file defines", c[0])
		}
	}
}
