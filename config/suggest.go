package config

import (
	"slices"
	"strings"
)

// maxSuggestions bounds the names Suggest returns.
const maxSuggestions = 3

// Suggest returns the names among candidates nearest to name, for "did you
// mean" messages: those within a small edit distance (insertions,
// deletions, substitutions and swaps of two neighbours, ignoring case;
// about one edit per three letters), or, failing those, those that begin
// with name or that name begins with, at a word boundary ("tls.cert" for
// "tls.cert_file", "ca" for "ca_file", "listen" for "listen_tls"; a name
// of two letters at least). Only the nearest are
// returned, at most three, in the order of candidates; none when nothing
// is near.
func Suggest(name string, candidates []string) []string {
	name = strings.ToLower(name)
	limit := max(1, len(name)/3)
	best, out := limit+1, []string(nil)
	for _, c := range candidates {
		d := distance(name, strings.ToLower(c))
		switch {
		case d > limit || d > best:
			continue
		case d < best:
			best, out = d, nil
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	if out == nil {
		for _, c := range candidates {
			if lc := strings.ToLower(c); len(name) >= 2 && (boundaryPrefix(name, lc) || boundaryPrefix(lc, name)) && !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	if len(out) > maxSuggestions {
		out = out[:maxSuggestions]
	}
	return out
}

// boundaryPrefix reports whether long begins with short followed by a
// separator (_ - . [).
func boundaryPrefix(short, long string) bool {
	rest, ok := strings.CutPrefix(long, short)
	return ok && rest != "" && strings.ContainsRune("_-.[", rune(rest[0]))
}

// distance is the optimal string alignment distance of a and b: the
// fewest insertions, deletions, substitutions and swaps of adjacent
// bytes that turn a into b.
func distance(a, b string) int {
	// d[i][j] is the distance of a[:i] and b[:j]; three rows suffice.
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// DidYouMean phrases suggestions as the end of an error message, each
// quoted with quote: `did you mean "listen"?`, `did you mean "a" or "b"?`;
// "" when there are none.
func DidYouMean(suggestions []string, quote func(string) string) string {
	if len(suggestions) == 0 {
		return ""
	}
	q := make([]string, len(suggestions))
	for i, s := range suggestions {
		q[i] = quote(s)
	}
	if len(q) == 1 {
		return "did you mean " + q[0] + "?"
	}
	return "did you mean " + strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1] + "?"
}
