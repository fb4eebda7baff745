package config

import (
	"slices"
	"strings"
)

// UnknownEnv returns a warning for each variable of environ (as
// os.Environ gives it, NAME=value) that looks like a misspelt setting: its
// name begins with BRIDGE_, is no setting's variable, and is near one
// ("BRIDGE_LISEN is no setting: did you mean BRIDGE_LISTEN?"). A variable
// near none is left alone: other programs may have BRIDGE_ variables of
// their own. The warnings are sorted.
func UnknownEnv(environ []string) []string {
	known := []string{envName(FileFlag)}
	for _, k := range keys() {
		if !k.fileOnly {
			known = append(known, envName(k.name))
		}
	}
	// Names are compared without the prefix, which every one shares.
	bare := make([]string, len(known))
	for i, n := range known {
		bare[i] = strings.TrimPrefix(n, envPrefix+"_")
	}
	var out []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix+"_") || slices.Contains(known, name) {
			continue
		}
		if near := Suggest(strings.TrimPrefix(name, envPrefix+"_"), bare); len(near) > 0 {
			out = append(out, name+" is no setting: "+DidYouMean(near, func(s string) string { return envPrefix + "_" + s }))
		}
	}
	slices.Sort(out)
	return out
}
