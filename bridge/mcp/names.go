package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
)

// MaxNameLength is the longest tool name: the strictest common clients
// accept names matching ^[a-zA-Z0-9_-]{1,64}$.
const MaxNameLength = 64

// hashLength is the number of hex digits of the suffix of a shortened
// name; a clash of shortened names takes longHashLength.
const (
	hashLength     = 8
	longHashLength = 16
)

// ToolNames returns the tool name of every method (JSON-RPC names, such
// as "helloworld.Greeter.SayHello"), by method, and the methods left out:
// those whose every candidate name is taken (which takes a clash of
// SHA-256 prefixes). The rule, in docs/mcp.md:
//
//   - the method's name without a leading dot (the ".rpc." of a package
//     named rpc), each "." replaced by "_": helloworld_Greeter_SayHello;
//   - when that is longer than 64 characters, or another method of the
//     same discovery gets the same name (a.b_c.M and a_b.c.M), it is
//     shortened instead: its last characters, up to 55 and starting after
//     an underscore where one allows, then "_" and the first 8 hex digits
//     of the SHA-256 of the method's full name (16 digits, and up to 47
//     characters, if that is taken too).
//
// Names depend only on the methods of the discovery, so they are the
// same across restarts; each names exactly one method.
func ToolNames(methods []string) (names map[string]string, left []string) {
	sorted := slices.Clone(methods)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	plain := make(map[string]int, len(sorted))
	for _, m := range sorted {
		plain[plainName(m)]++
	}
	names = make(map[string]string, len(sorted))
	taken := make(map[string]bool, len(sorted))
	var hashed []string
	for _, m := range sorted {
		if p := plainName(m); len(p) <= MaxNameLength && plain[p] == 1 {
			names[m] = p
			taken[p] = true
		} else {
			hashed = append(hashed, m)
		}
	}
	for _, m := range hashed {
		name := ""
		for _, n := range []int{hashLength, longHashLength} {
			if c := shortName(m, n); !taken[c] {
				name = c
				break
			}
		}
		if name == "" {
			left = append(left, m)
			continue
		}
		names[m] = name
		taken[name] = true
	}
	return names, left
}

// plainName is method with its leading dot dropped and its dots replaced
// by underscores.
func plainName(method string) string {
	return strings.ReplaceAll(strings.TrimPrefix(method, "."), ".", "_")
}

// shortName is the name of method shortened with a hash suffix of digits
// hex digits.
func shortName(method string, digits int) string {
	sum := sha256.Sum256([]byte(method))
	suffix := "_" + hex.EncodeToString(sum[:])[:digits]
	keep := MaxNameLength - len(suffix)
	p := plainName(method)
	if len(p) > keep {
		p = p[len(p)-keep:]
		if i := strings.IndexByte(p, '_'); i >= 0 && i < len(p)-1 {
			p = p[i+1:]
		}
	}
	return p + suffix
}

// ValidName reports whether name matches ^[a-zA-Z0-9_-]{1,64}$.
func ValidName(name string) bool {
	if len(name) == 0 || len(name) > MaxNameLength {
		return false
	}
	for i := range len(name) {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
