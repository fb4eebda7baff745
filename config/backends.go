package config

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// parseBackends decodes the backends list of file. Every problem is a
// *KeyError naming its key in full, such as backends[1].tls.ca_file.
func parseBackends(file string, raw any) ([]Backend, []error) {
	if raw == nil {
		return nil, nil
	}
	var errs []error
	bad := func(key string, sentinel error, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, File: file, Err: sentinel, Reason: fmt.Sprintf(format, args...)})
	}
	list, ok := raw.([]any)
	if !ok {
		bad(KeyBackends, ErrInvalidValue, "want a list of backends, each a mapping with %s", strings.Join(backendKeys(), ", "))
		return nil, errs
	}
	var out []Backend
	for i, item := range list {
		prefix := fmt.Sprintf("%s[%d]", KeyBackends, i)
		m, ok := item.(map[string]any)
		if !ok {
			bad(prefix, ErrInvalidValue, "want a mapping with %s", strings.Join(backendKeys(), ", "))
			continue
		}
		var b Backend
		for _, k := range slices.Sorted(maps.Keys(m)) {
			key, val := prefix+"."+k, m[k]
			var ok bool
			switch strings.ToLower(k) {
			case "name":
				b.Name, ok = val.(string)
			case "address":
				b.Address, ok = val.(string)
			case "plaintext":
				b.Plaintext, ok = val.(bool)
			case "include":
				b.Include, ok = stringList(val)
			case "exclude":
				b.Exclude, ok = stringList(val)
			case "balance":
				b.Balance, ok = val.(string)
			case "resolve_interval":
				var d time.Duration
				d, ok = duration(val)
				b.ResolveInterval = &d
			case "health_check":
				var on bool
				on, ok = val.(bool)
				b.HealthCheck = &on
			case "health_service":
				var name string
				name, ok = val.(string)
				b.HealthService = &name
			case "outlier_consecutive_failures":
				b.OutlierConsecutiveFailures, ok = wholeNumber(val)
			case "outlier_max_ejection_percent":
				b.OutlierMaxEjectionPercent, ok = wholeNumber(val)
			case "outlier_codes":
				b.OutlierCodes, ok = codeList(val)
			case "outlier_ejection_time":
				var d time.Duration
				d, ok = duration(val)
				b.OutlierEjectionTime = &d
			case "outlier_max_ejection_time":
				var d time.Duration
				d, ok = duration(val)
				b.OutlierMaxEjectionTime = &d
			case "tls":
				var tlsErrs []error
				b.TLS, tlsErrs = parseBackendTLS(file, key, val)
				errs = append(errs, tlsErrs...)
				continue
			default:
				bad(key, ErrUnknownKey, "%s", nearKey(k, backendKeys(), "a backend"))
				continue
			}
			if !ok {
				bad(key, ErrInvalidValue, "want %s, got %v", backendType(k), val)
			}
		}
		out = append(out, b)
	}
	return out, errs
}

// parseBackendTLS decodes the tls section of a backend; key is its name.
// A present but empty section means TLS with the system's CAs.
func parseBackendTLS(file, key string, raw any) (*BackendTLS, []error) {
	t := new(BackendTLS)
	if raw == nil {
		return t, nil
	}
	m, ok := raw.(map[string]any)
	if !ok {
		return t, []error{&KeyError{Key: key, File: file, Err: ErrInvalidValue,
			Reason: "want a mapping with ca_file, server_name, cert_file and key_file ({} for the system's CAs)"}}
	}
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(m)) {
		var field *string
		switch strings.ToLower(k) {
		case "ca_file":
			field = &t.CAFile
		case "server_name":
			field = &t.ServerName
		case "cert_file":
			field = &t.CertFile
		case "key_file":
			field = &t.KeyFile
		default:
			errs = append(errs, &KeyError{Key: key + "." + k, File: file, Err: ErrUnknownKey,
				Reason: nearKey(k, []string{"ca_file", "server_name", "cert_file", "key_file"}, "a backend's tls")})
			continue
		}
		s, ok := m[k].(string)
		if !ok {
			errs = append(errs, &KeyError{Key: key + "." + k, File: file, Err: ErrInvalidValue,
				Reason: fmt.Sprintf("want a string, got %v", m[k])})
		}
		*field = s
	}
	return t, errs
}

// stringList accepts a YAML list of strings, or one string.
func stringList(v any) ([]string, bool) {
	switch v := v.(type) {
	case string:
		return []string{v}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, item := range v {
			s, ok := item.(string)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	}
	return nil, false
}

// wholeNumber accepts a YAML integer.
func wholeNumber(v any) (*int, bool) {
	n, ok := v.(int)
	return &n, ok
}

// codeList accepts a list of status codes, names or numbers, or one;
// an empty list is none (not unset).
func codeList(v any) ([]string, bool) {
	switch v := v.(type) {
	case int:
		return []string{strconv.Itoa(v)}, true
	case []any:
		out := make([]string, 0, len(v))
		for _, item := range v {
			switch item := item.(type) {
			case string:
				out = append(out, item)
			case int:
				out = append(out, strconv.Itoa(item))
			default:
				return nil, false
			}
		}
		return out, true
	}
	return stringList(v)
}

// duration accepts a duration such as "30s".
func duration(v any) (time.Duration, bool) {
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	return d, err == nil
}

func backendType(key string) string {
	switch key {
	case "resolve_interval", "outlier_ejection_time", "outlier_max_ejection_time":
		return "a duration such as 30s"
	case "outlier_consecutive_failures", "outlier_max_ejection_percent":
		return "a whole number"
	case "outlier_codes":
		return "a list of status codes, names (UNAVAILABLE) or numbers (14)"
	case "plaintext", "health_check":
		return "true or false"
	case "include", "exclude":
		return "a list of service name patterns"
	}
	return "a string"
}

// nearKey tells what the unknown key k of what (such as "a backend") may
// have meant: the nearest of its keys, then all of them.
func nearKey(k string, keys []string, what string) string {
	all := "the keys of " + what + " are " + strings.Join(keys, ", ")
	if near := Suggest(k, keys); len(near) > 0 {
		return DidYouMean(near, strconv.Quote) + " (" + all + ")"
	}
	return all
}
