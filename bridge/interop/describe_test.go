package interop_test

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNodeDescribeProto: `describe --format proto` against the grpc-js
// server, whose @grpc/reflection 1.0.4 sends one file per package without
// its dependencies, relative type names, map entries named after their
// field and proto3 optional lost (grpcurl, on jhump's grpcreflect, fails
// on such files: grpcurl issue 459), prints the definitions as the
// descriptor set has them, but for the comments, which the server does
// not send.
func TestNodeDescribeProto(t *testing.T) {
	t.Parallel()
	require(t, nodeKind)
	be := startBackend(t, nodeKind, backendOptions{})
	protoset := filepath.Join(root, "proto", "testpb", "test.protoset")
	tests := []struct {
		name      string
		commented bool // the descriptor set has comments for it
	}{
		{name: "test.v1.TestService.Echo", commented: true}, // AllTypes: maps, oneof, optional, well-known types
		{name: "test.v1.TestService", commented: true},
		{name: "test.v1.StreamItem", commented: true},
		{name: "test.v1.Color"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describeProto(t, tt.name, "--backend", be.addr)
			want := describeProto(t, tt.name, "--protoset", protoset)
			if tt.commented != strings.Contains(want, "//") {
				t.Fatalf("the descriptor set's %s has comments: %t, want %t:\n%s", tt.name, !tt.commented, tt.commented, want)
			}
			if strings.Contains(got, "//") {
				t.Errorf("got comments the server does not send:\n%s", got)
			}
			if want = withoutComments(want); got != want {
				t.Errorf("by reflection of the grpc-js server:\n%s\nwant the descriptor set's, without comments:\n%s", got, want)
			}
		})
	}
}

// describeProto is what the bridge's `describe NAME --format proto`
// prints with the source flags args.
func describeProto(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBinary(t), append([]string{"describe", name, "--format", "proto"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("describe %s --format proto %s: %v; stderr:\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// withoutComments is text without its comment lines.
func withoutComments(text string) string {
	var b strings.Builder
	for line := range strings.Lines(text) {
		if !strings.HasPrefix(strings.TrimSpace(line), "//") {
			b.WriteString(line)
		}
	}
	return b.String()
}
