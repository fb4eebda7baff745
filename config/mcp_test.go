package config

import "testing"

// TestLoadMCP: mcp is on by default and turned off by flag, variable or
// file, the flag first.
func TestLoadMCP(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		file string
		want bool
	}{
		{name: "default", want: true},
		{name: "flag", args: []string{"--mcp=false"}, want: false},
		{name: "env", env: map[string]string{"BRIDGE_MCP": "false"}, want: false},
		{name: "file", args: []string{"--config", "$FILE"}, file: "mcp: false\n", want: false},
		{name: "flag over env", args: []string{"--mcp"}, env: map[string]string{"BRIDGE_MCP": "false"}, want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := load(t, tt.args, tt.env, tt.file)
			if err != nil {
				t.Fatal(err)
			}
			if s.MCP != tt.want {
				t.Errorf("MCP = %v, want %v", s.MCP, tt.want)
			}
		})
	}
}
