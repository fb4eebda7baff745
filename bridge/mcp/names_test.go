package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

func TestToolNames(t *testing.T) {
	long := "com.example.platform.inventory.v1alpha2.WarehouseInventoryService.ListStockLevelsByLocation"
	longer := "com.example.platform.inventory.v1alpha2.WarehouseInventoryService.ListStockLevelsByLocationAndDate"
	sum := func(m string, n int) string {
		s := sha256.Sum256([]byte(m))
		return hex.EncodeToString(s[:])[:n]
	}
	tests := []struct {
		name    string
		methods []string
		want    map[string]string
	}{
		{
			name:    "plain: dots become underscores",
			methods: []string{"helloworld.Greeter.SayHello", "test.v1.TestService.Echo", "my_pkg.v1.Svc.Do"},
			want: map[string]string{
				"helloworld.Greeter.SayHello": "helloworld_Greeter_SayHello",
				"test.v1.TestService.Echo":    "test_v1_TestService_Echo",
				"my_pkg.v1.Svc.Do":            "my_pkg_v1_Svc_Do",
			},
		},
		{
			name:    "a package named rpc loses its leading dot",
			methods: []string{".rpc.ops.Ops.Ping"},
			want:    map[string]string{".rpc.ops.Ops.Ping": "rpc_ops_Ops_Ping"},
		},
		{
			name:    "long names keep their end and take a hash suffix",
			methods: []string{long, longer},
			want: map[string]string{
				long:   "WarehouseInventoryService_ListStockLevelsByLocation_" + sum(long, 8),
				longer: "ListStockLevelsByLocationAndDate_" + sum(longer, 8),
			},
		},
		{
			name:    "names that clash both take a hash suffix",
			methods: []string{"a.b_c.S.M", "a_b.c.S.M", "a.b.S.M"},
			want: map[string]string{
				"a.b_c.S.M": "a_b_c_S_M_" + sum("a.b_c.S.M", 8),
				"a_b.c.S.M": "a_b_c_S_M_" + sum("a_b.c.S.M", 8),
				"a.b.S.M":   "a_b_S_M",
			},
		},
		{
			name:    "exactly 64 characters stay plain",
			methods: []string{strings.Repeat("a", 60) + ".S.M"},
			want:    map[string]string{strings.Repeat("a", 60) + ".S.M": strings.Repeat("a", 60) + "_S_M"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, left := ToolNames(tt.methods)
			if len(left) > 0 {
				t.Errorf("left out: %v", left)
			}
			for m, want := range tt.want {
				if got[m] != want {
					t.Errorf("%s: %q, want %q", m, got[m], want)
				}
				if !ValidName(got[m]) {
					t.Errorf("%s: %q does not match ^[a-zA-Z0-9_-]{1,64}$", m, got[m])
				}
			}
			if len(got) != len(tt.want) {
				t.Errorf("got %d names, want %d", len(got), len(tt.want))
			}
			// The same whatever the order: deterministic across restarts.
			rev := slices.Clone(tt.methods)
			slices.Reverse(rev)
			again, _ := ToolNames(rev)
			for m := range tt.want {
				if again[m] != got[m] {
					t.Errorf("%s: %q in another order, %q before", m, again[m], got[m])
				}
			}
		})
	}
}

// TestToolNamesUnique: many long, alike names still map one to one onto
// valid names.
func TestToolNamesUnique(t *testing.T) {
	var methods []string
	for i := range 2000 {
		pkg := strings.Repeat("x", i%90)
		methods = append(methods, pkg+".v1.Service"+strings.Repeat("_", i%3)+".Method"+string(rune('A'+i%26))+strings.Repeat("z", i/26))
	}
	names, left := ToolNames(methods)
	if len(left) > 0 {
		t.Fatalf("left out: %v", left)
	}
	seen := map[string]string{}
	for m, n := range names {
		if !ValidName(n) {
			t.Errorf("%s: invalid name %q", m, n)
		}
		if other, ok := seen[n]; ok {
			t.Errorf("%q names both %s and %s", n, m, other)
		}
		seen[n] = m
	}
	if len(names) != len(slices.Compact(slices.Sorted(slices.Values(methods)))) {
		t.Errorf("%d names for %d methods", len(names), len(methods))
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"a": true, "A-b_9": true, strings.Repeat("a", 64): true,
		"": false, strings.Repeat("a", 65): false, "a.b": false, "a b": false, "é": false, "a/b": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}
