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
	def := Defaults()
	for _, k := range keys() {
		if slices.Contains(except, k.name) {
			continue
		}
		name, usage := flagName(k.name), fmt.Sprintf("%s (env %s)", k.usage, envName(k.name))
		switch p := k.field(&def).(type) {
		case *string:
			flags.String(name, *p, usage)
		case *int:
			flags.Int(name, *p, usage)
		case *int64:
			flags.Int64(name, *p, usage)
		case *bool:
			flags.Bool(name, *p, usage)
		case *time.Duration:
			flags.Duration(name, *p, usage)
		default:
			panic(fmt.Sprintf("config: setting %s has unsupported type %T", k.name, p))
		}
	}
	flags.String(FileFlag, "", fmt.Sprintf("YAML configuration file (env %s)", envName(FileFlag)))
}

// Load reads the settings from flags (already parsed; a key without a flag
// is fine), then BRIDGE_* variables, then the YAML file named by --config
// or BRIDGE_CONFIG, then Defaults, and validates them. Every error names
// the key, and for unknown keys the file; all of them are the user's to fix.
func Load(flags *pflag.FlagSet) (Settings, error) {
	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	for _, name := range append(names(), FileFlag) {
		if err := bind(v, flags, name); err != nil {
			return Settings{}, err
		}
	}
	if path := v.GetString(FileFlag); path != "" {
		if err := readFile(v, path); err != nil {
			return Settings{}, err
		}
	}

	s := Defaults()
	var errs []error
	for _, k := range keys() {
		p := k.field(&s)
		if err := v.UnmarshalKey(k.name, p, viper.DecodeHook(strictHook)); err != nil {
			errs = append(errs, &KeyError{Key: k.name, Err: ErrInvalidValue,
				Reason: fmt.Sprintf("want %s, got %q", describe(p), fmt.Sprint(v.Get(k.name)))})
		}
	}
	// A key that failed to decode kept its default, so Validate reports
	// only the other problems.
	if err := errors.Join(append(errs, s.Validate())...); err != nil {
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
// setting.
func readFile(v *viper.Viper, path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(data, &m); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	known := names()
	var unknown []error
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !slices.Contains(known, strings.ToLower(name)) {
			unknown = append(unknown, &KeyError{
				Key: name, File: path, Err: ErrUnknownKey,
				Reason: "known keys are " + strings.Join(known, ", "),
			})
		}
	}
	if err := errors.Join(unknown...); err != nil {
		return err
	}
	v.SetConfigType("yaml")
	if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
		return fmt.Errorf("config: %s: %w", path, err)
	}
	return nil
}

// describe says what a setting of p's type looks like, for error messages.
func describe(p any) string {
	switch p.(type) {
	case *int, *int64:
		return "a whole number"
	case *bool:
		return "true or false"
	case *time.Duration:
		return `a duration with a unit, such as "30s"`
	default:
		return "a string"
	}
}

// strictHook refuses what weak decoding would quietly change: bare numbers
// as durations (nanoseconds) and fractions as whole numbers. It decodes
// durations from strings such as "30s".
func strictHook(_, to reflect.Type, data any) (any, error) {
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
