package config

import (
	"maps"
	"os"
	goreflect "reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

func TestExampleFileLoads(t *testing.T) {
	got, _, err := load(t, []string{"--config", "example.yaml"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Backends = []Backend{{Name: "default", Address: "localhost:50051", Plaintext: true}}
	if !goreflect.DeepEqual(got, want) {
		t.Errorf("got %+v, want the defaults with one backend localhost:50051", got)
	}

	data, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	var top []string
	for _, name := range names() {
		section, _, _ := strings.Cut(name, ".")
		if name != KeyBackend && !slices.Contains(top, section) {
			top = append(top, section)
		}
	}
	if got, want := slices.Sorted(maps.Keys(m)), slices.Sorted(slices.Values(top)); !slices.Equal(got, want) {
		t.Errorf("example.yaml has keys %v, want every key %v", got, want)
	}
}

// TestDocsListEveryKey keeps docs/configuration.md in step with the code.
func TestDocsListEveryKey(t *testing.T) {
	data, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := pflag.NewFlagSet("docs", pflag.ContinueOnError)
	Register(fs)
	rows := map[string]string{}
	for line := range strings.Lines(string(data)) {
		if cells := strings.Split(line, "|"); len(cells) > 2 {
			rows[strings.Trim(strings.TrimSpace(cells[1]), "`")] = line
		}
	}
	example, err := os.ReadFile("example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "```yaml\n"+string(example)+"```") {
		t.Errorf("docs/configuration.md does not show config/example.yaml as it is")
	}
	for _, want := range []string{"`--config`", "`BRIDGE_CONFIG`"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("docs/configuration.md does not mention %s", want)
		}
	}
	for _, name := range backendKeys() {
		if _, ok := rows["backends[]."+name]; !ok {
			t.Errorf("docs/configuration.md has no table row for backends[].%s", name)
		}
	}
	for _, name := range names() {
		row, ok := rows[name]
		if !ok {
			t.Errorf("docs/configuration.md has no table row for %s", name)
			continue
		}
		if !slices.Contains(flagNames(), name) {
			continue // file only
		}
		def := fs.Lookup(flagName(name)).DefValue
		for _, want := range []string{"`--" + flagName(name) + "`", "`" + envName(name) + "`", "`" + def + "`"} {
			if def == "" && want == "``" {
				continue
			}
			if !strings.Contains(row, want) {
				t.Errorf("docs row for %s lacks %s: %s", name, want, row)
			}
		}
	}
}
