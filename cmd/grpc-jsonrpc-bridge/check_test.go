package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestCheck: serve --check makes serve's start-up checks, those of the
// files it names included, and exits 0 or 2 without listening on the
// listen address or dialing a backend.
func TestCheck(t *testing.T) {
	dir := t.TempDir()
	c := newCA(t, dir, "ca")
	ids := filepath.Join(dir, "identities.yaml")
	write := func(path, data string) string {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write(ids, "identities:\n  - name: team\n    tokens: [\"sha256:"+strings.Repeat("ab", 32)+"\"]\n    allow: [\"*\"]\n")
	badDigest := write(filepath.Join(dir, "bad-digest.yaml"), "identities:\n  - name: team\n    tokens: [\"sha256:abc\"]\n    allow: [\"*\"]\n")
	badProtoset := write(filepath.Join(dir, "bad.protoset"), "not a descriptor set")

	// The listen address is taken, and the backend counts the
	// connections it accepts: the check must use neither.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { taken.Close() })
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { backend.Close() })
	var dialed atomic.Int32
	go func() {
		for {
			conn, err := backend.Accept()
			if err != nil {
				return
			}
			dialed.Add(1)
			conn.Close()
		}
	}()

	valid := writeConfig(t, "backends:\n  - name: users\n    address: "+backend.Addr().String()+"\n    tls:\n      ca_file: "+c.file+"\n"+
		"auth:\n  file: "+ids+"\nlisten: "+taken.Addr().String()+"\n")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{name: "valid", args: []string{"--config", valid}, wantCode: exitOK,
			wantStdout: "configuration valid: listen " + taken.Addr().String() + ", backends users\n"},
		{name: "no backend", args: nil, wantCode: exitUsage, wantStderr: "no backend"},
		{name: "unknown key", args: []string{"--config", writeConfig(t, "backend: a:1\nlisen: :8080\n")}, wantCode: exitUsage,
			wantStderr: `unknown key "lisen": did you mean "listen"?`},
		{name: "bad value", args: []string{"--backend", "a:1", "--max-batch-size", "0"}, wantCode: exitUsage,
			wantStderr: `invalid value "max_batch_size": must be at least 1, got 0`},
		// Only the identities' own checks, which serve makes past the
		// loader, find this one.
		{name: "bad token digest", args: []string{"--backend", "a:1", "--auth-file", badDigest}, wantCode: exitUsage,
			wantStderr: `invalid value "auth.file"`},
		{name: "bad protoset", args: []string{"--backend", "a:1", "--protoset", badProtoset}, wantCode: exitUsage,
			wantStderr: "bad.protoset"},
		{name: "missing CA file", args: []string{"--config", writeConfig(t, "backends:\n  - name: b\n    address: b:1\n    tls:\n      ca_file: "+filepath.Join(dir, "none.pem")+"\n")},
			wantCode: exitUsage, wantStderr: `invalid value "backends[0].tls.ca_file": cannot read`},
		{name: "with print-config", args: []string{"--backend", "a:1", "--print-config"}, wantCode: exitUsage,
			wantStderr: "none of the others can be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runSync(t, append([]string{"serve", "--check"}, tt.args...)...)
			if code != tt.wantCode {
				t.Fatalf("got exit code %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.wantCode, stdout, stderr)
			}
			if tt.wantStdout != "" && stdout != tt.wantStdout {
				t.Errorf("got stdout %q, want %q", stdout, tt.wantStdout)
			}
			if tt.wantCode != exitOK && stdout != "" {
				t.Errorf("got stdout %q, want none", stdout)
			}
			if !strings.Contains(stderr, tt.wantStderr) {
				t.Errorf("stderr lacks %q:\n%s", tt.wantStderr, stderr)
			}
		})
	}
	if n := dialed.Load(); n != 0 {
		t.Errorf("the backend accepted %d connections, want none", n)
	}
}
