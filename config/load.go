package config

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"
)

// Register adds to flags one kebab-case flag per setting, with its default
// and help text, plus --config.
func Register(flags *pflag.FlagSet) { RegisterExcept(flags) }

// RegisterExcept is Register without the flags of the given keys, such as
// KeyBackend. Load still reads those keys from the environment and file.
func RegisterExcept(flags *pflag.FlagSet, except ...string) {
	mustBeKeys(except)
	register(flags, func(name string) bool { return !slices.Contains(except, name) })
}

// RegisterOnly is Register with the flags of the given keys only (and
// --config), for commands that use a few settings. Load still reads the
// other keys from the environment and file.
func RegisterOnly(flags *pflag.FlagSet, only ...string) {
	mustBeKeys(only)
	register(flags, func(name string) bool { return slices.Contains(only, name) })
}

// mustBeKeys panics unless every name is a key with a flag: a misspelt
// name would register nothing, silently.
func mustBeKeys(list []string) {
	for _, name := range list {
		if !slices.Contains(flagNames(), name) {
			panic(fmt.Sprintf("config: %q is no key with a flag", name))
		}
	}
}

// IsFlag reports whether --name is the flag of a setting, on some command.
func IsFlag(name string) bool {
	for _, k := range flagNames() {
		if flagName(k) == name {
			return true
		}
	}
	return false
}

// register adds the flags of the keys keep accepts, and --config.
func register(flags *pflag.FlagSet, keep func(name string) bool) {
	def := Defaults()
	for _, k := range keys() {
		if k.fileOnly || !keep(k.name) {
			continue
		}
		name, usage := flagName(k.name), fmt.Sprintf("%s (env %s)", k.usage, envName(k.name))
		// Each flag is made alone, then added with its one-letter form.
		fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
		switch p := k.field(&def).(type) {
		case *string:
			fs.String(name, *p, usage)
		case *int:
			fs.Int(name, *p, usage)
		case *int64:
			fs.Int64(name, *p, usage)
		case *float64:
			fs.Float64(name, *p, usage)
		case *bool:
			fs.Bool(name, *p, usage)
		case *time.Duration:
			fs.Duration(name, *p, usage)
		case *[]string:
			fs.StringSlice(name, *p, usage+"; comma-separated")
		case *map[string]string:
			fs.StringToString(name, *p, usage+"; comma-separated")
		default:
			panic(fmt.Sprintf("config: setting %s has unsupported type %T", k.name, p))
		}
		f := fs.Lookup(name)
		f.Shorthand = k.short
		flags.AddFlag(f)
	}
	flags.String(FileFlag, "", fmt.Sprintf("YAML configuration file (env %s)", envName(FileFlag)))
}

// Load reads the settings from flags (already parsed; a key without a flag
// is fine), then BRIDGE_* variables, then the YAML file named by --config
// or BRIDGE_CONFIG, then Defaults, and validates them. Every error names
// the key, and the file when the value came from it; all of them are the
// user's to fix. e checks what only the bridge's packages know (see
// Engine); each check adds the problems that only its caller can judge
// (such as which header names may be forwarded), named like the others.
func Load(flags *pflag.FlagSet, e Engine, checks ...func(Settings) []error) (Settings, error) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_", ".", "_"))
	for _, name := range append(flagNames(), FileFlag) {
		if err := bind(v, flags, name); err != nil {
			return Settings{}, err
		}
	}
	s := Defaults()
	var errs []error
	file := v.GetString(FileFlag)
	if file != "" {
		backends, err := readFile(v, file)
		if err != nil {
			return Settings{}, err
		}
		s.Backends, errs = parseBackends(file, backends)
	}
	fromFile := func(name string) bool {
		section, _, nested := strings.Cut(name, ".")
		inFile := v.InConfig(name) || nested && v.InConfig(section)
		if file == "" || !inFile || os.Getenv(envName(name)) != "" {
			return false
		}
		f := flags.Lookup(flagName(name))
		return f == nil || !f.Changed
	}
	for _, k := range keys() {
		if k.fileOnly {
			continue
		}
		p := k.field(&s)
		if err := v.UnmarshalKey(k.name, p, viper.DecodeHook(strictHook)); err != nil {
			errs = append(errs, &KeyError{Key: k.name, Err: ErrInvalidValue,
				Reason: fmt.Sprintf("want %s, got %q", describe(p), fmt.Sprint(v.Get(k.name)))})
		}
	}
	errs = append(errs, loadJWTProviders(v, &s)...)
	s.normalize()
	// A key that failed to decode kept its default, so Validate reports
	// only the other problems.
	if err := s.Validate(e); err != nil {
		errs = append(errs, err.(interface{ Unwrap() []error }).Unwrap()...)
	}
	for _, check := range checks {
		errs = append(errs, check(s)...)
	}
	for _, err := range errs {
		var ke *KeyError
		if errors.As(err, &ke) && ke.File == "" && (strings.HasPrefix(ke.Key, KeyBackends) || fromFile(ke.Key)) {
			ke.File = file
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Settings{}, err
	}
	return s, nil
}

func names() []string {
	var out []string
	for _, k := range keys() {
		out = append(out, k.name)
	}
	return out
}

// flagNames are the keys with a flag and an environment variable.
func flagNames() []string {
	var out []string
	for _, k := range keys() {
		if !k.fileOnly {
			out = append(out, k.name)
		}
	}
	return out
}

// bind makes name answer to its BRIDGE_* variable and, if registered, its flag.
func bind(v *viper.Viper, flags *pflag.FlagSet, name string) error {
	if err := v.BindEnv(name); err != nil {
		return fmt.Errorf("config: binding %s: %w", envName(name), err)
	}
	if f := flags.Lookup(flagName(name)); f != nil {
		if err := v.BindPFlag(name, f); err != nil {
			return fmt.Errorf("config: binding --%s: %w", f.Name, err)
		}
	}
	return nil
}

// readFile loads the YAML file at path into v, refusing keys that name no
// setting, and returns the raw value of backends, which v does not decode.
func readFile(v *viper.Viper, path string) (any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	if err := errors.Join(checkKeys(path, m, "")...); err != nil {
		return nil, err
	}
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	for k, val := range m {
		if strings.ToLower(k) == KeyBackends {
			return val, nil
		}
	}
	return nil, nil
}

// checkKeys refuses the keys of m, the section prefix of a file (""
// for the top level, "tls." for the tls section), that name no setting.
func checkKeys(file string, m map[string]any, prefix string) []error {
	var here, sections []string // the keys and sections at this level
	for _, name := range names() {
		if rest, ok := strings.CutPrefix(name, prefix); ok {
			if section, _, nested := strings.Cut(rest, "."); nested {
				if !slices.Contains(sections, section) {
					sections = append(sections, section)
					here = append(here, section)
				}
			} else {
				here = append(here, rest)
			}
		}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		name := strings.ToLower(k)
		switch {
		case slices.Contains(sections, name):
			sub, ok := m[k].(map[string]any)
			if !ok && m[k] != nil {
				errs = append(errs, &KeyError{Key: prefix + k, File: file, Err: ErrInvalidValue,
					Reason: "want a mapping of " + strings.Join(sectionKeys(prefix+name+"."), ", ")})
				continue
			}
			errs = append(errs, checkKeys(file, sub, prefix+name+".")...)
		case !slices.Contains(here, name):
			errs = append(errs, &KeyError{Key: prefix + k, File: file, Err: ErrUnknownKey,
				Reason: unknownKeyReason(prefix, name, here)})
		}
	}
	return errs
}

// unknownKeyReason tells what the unknown key name of the section prefix
// may have meant, here being the keys and sections of that section: the
// nearest of them, else (in a section) all of them.
func unknownKeyReason(prefix, name string, here []string) string {
	full := prefix + name
	if prefix == "" && name == FileFlag {
		return "--config or BRIDGE_CONFIG names the file; it is no key in it"
	}
	if section, rest, nested := strings.Cut(full, "."); nested && slices.Contains(names(), full) {
		return fmt.Sprintf("write it in the %s section, as %q under %q", section, rest, section+":")
	}
	if near := Suggest(name, here); len(near) > 0 {
		return DidYouMean(near, func(n string) string { return strconv.Quote(prefix + n) })
	}
	if prefix != "" {
		return "the keys of " + strings.TrimSuffix(prefix, ".") + " are " + strings.Join(sectionKeys(prefix), ", ")
	}
	return "no setting has this name (docs/configuration.md lists them; serve --print-config prints them all)"
}

// sectionKeys lists the keys under prefix, in full.
func sectionKeys(prefix string) []string {
	var out []string
	for _, name := range names() {
		if strings.HasPrefix(name, prefix) {
			out = append(out, name)
		}
	}
	return out
}

// describe says what a setting of p's type looks like, for error messages.
func describe(p any) string {
	switch p.(type) {
	case *int, *int64:
		return "a whole number"
	case *float64:
		return "a number"
	case *bool:
		return "true or false"
	case *time.Duration:
		return `a duration with a unit, such as "30s"`
	case *[]string:
		return "a list of strings"
	case *map[string]string:
		return "a mapping of strings (key=value,... in flags and variables)"
	default:
		return "a string"
	}
}

// strictHook refuses what weak decoding would quietly change: bare numbers
// as durations (nanoseconds) and fractions as whole numbers. It decodes
// durations from strings such as "30s".
func strictHook(_, to reflect.Type, data any) (any, error) {
	if str, ok := data.(string); ok && to == reflect.TypeFor[[]string]() {
		return splitList(str), nil
	}
	if str, ok := data.(string); ok && to == reflect.TypeFor[map[string]string]() {
		return splitMap(str)
	}
	switch to.Kind() {
	case reflect.Int, reflect.Int64:
		if f, ok := data.(float64); ok && f != math.Trunc(f) {
			return nil, errors.New("not a whole number")
		}
	}
	if to != reflect.TypeFor[time.Duration]() {
		return data, nil
	}
	switch d := data.(type) {
	case time.Duration:
		return d, nil
	case string:
		return time.ParseDuration(d)
	default:
		return nil, errors.New("no unit")
	}
}

// splitList splits a comma-separated list, as given in the environment.
func splitList(s string) []string {
	out := []string{}
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// splitMap splits a comma-separated list of key=value, as given in the
// environment.
func splitMap(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range splitList(s) {
		k, v, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not key=value", item)
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}

// normalize makes empty lists nil, however they were given.
func (s *Settings) normalize() {
	for _, l := range []*[]string{&s.Metadata.RequestHeaders, &s.Metadata.ResponseHeaders,
		&s.Descriptors.Proto, &s.Descriptors.ImportPath, &s.OpenRPC.Servers, &s.Streaming.WSOriginPatterns,
		&s.Auth.JWT.Audiences, &s.Auth.JWT.Algorithms, &s.Auth.JWT.Scopes} {
		if len(*l) == 0 {
			*l = nil
		}
	}
	s.Origins.normalize()
	if len(s.Auth.JWT.ClaimsMetadata) == 0 {
		s.Auth.JWT.ClaimsMetadata = nil
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		for _, l := range []*[]string{&b.Include, &b.Exclude} {
			if len(*l) == 0 {
				*l = nil
			}
		}
	}
}
