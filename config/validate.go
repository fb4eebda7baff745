package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate reports every bad value of s, each as a *KeyError naming the
// key; e checks what only the bridge's packages know. Certificate files
// must exist and parse. An empty Backend and
// Backends are valid here: only `serve` needs one.
func (s Settings) Validate(e Engine) error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	if _, _, err := net.SplitHostPort(s.Listen); err != nil {
		bad("listen", "want HOST:PORT, got %q", s.Listen)
	}
	if s.Backend != "" {
		if reason := checkTarget(e, s.Backend); reason != "" {
			bad("backend", "%s", reason)
		}
		if len(s.Backends) > 0 {
			bad("backend", "give either backend (one plaintext backend) or backends, not both")
		}
	}
	names := map[string]int{}
	for i, b := range s.Backends {
		errs = append(errs, b.validate(e, fmt.Sprintf("backends[%d]", i))...)
		name := cmpOr(b.Name, b.Address)
		if j, dup := names[name]; dup {
			bad(fmt.Sprintf("backends[%d].name", i), "%q is the name of backends[%d] too", name, j)
		}
		names[name] = i
	}
	errs = append(errs, s.TLS.validate()...)
	if s.MaxBodyBytes <= 0 {
		bad("max_body_bytes", "must be positive, got %d", s.MaxBodyBytes)
	}
	if s.MaxBatchSize < 1 {
		bad("max_batch_size", "must be at least 1, got %d", s.MaxBatchSize)
	}
	if s.BatchParallelism < 1 {
		bad("batch_parallelism", "must be at least 1, got %d", s.BatchParallelism)
	}
	if s.CallTimeout <= 0 {
		bad("call_timeout", "must be positive, got %s", s.CallTimeout)
	}
	if s.MaxCallTimeout < 0 || s.MaxCallTimeout > 0 && s.MaxCallTimeout < s.CallTimeout {
		bad("max_call_timeout", "must be 0s or at least call_timeout (%s), got %s", s.CallTimeout, s.MaxCallTimeout)
	}
	if s.MaxMetadataBytes <= 0 {
		bad("max_metadata_bytes", "must be positive, got %d", s.MaxMetadataBytes)
	}
	if s.RefreshInterval < 0 {
		bad("refresh_interval", "must be 0s (off) or positive, got %s", s.RefreshInterval)
	}
	if s.ShutdownTimeout <= 0 {
		bad("shutdown_timeout", "must be positive, got %s", s.ShutdownTimeout)
	}
	if k := s.BackendKeepalive; k.Time != 0 && k.Time < MinKeepaliveTime {
		bad("backend_keepalive.time", "must be 0s (off) or at least %s, got %s", MinKeepaliveTime, k.Time)
	}
	if s.BackendKeepalive.Timeout <= 0 {
		bad("backend_keepalive.timeout", "must be positive, got %s", s.BackendKeepalive.Timeout)
	}
	if e.Balances != nil && !slices.Contains(e.Balances, s.Balance) {
		bad("balance", "want one of %s, got %q", strings.Join(e.Balances, ", "), s.Balance)
	}
	if s.ResolveInterval < 0 {
		bad("resolve_interval", "must be 0s (only when a connection fails) or positive, got %s", s.ResolveInterval)
	}
	errs = append(errs, s.Outlier.validate("outlier_")...)
	errs = append(errs, s.validateGuard(e)...)
	errs = append(errs, s.validateRateLimitStore(e)...)
	errs = append(errs, s.validateSources()...)
	errs = append(errs, s.validateOrigins()...)
	errs = append(errs, s.validateTracing()...)
	if !slices.Contains(LogLevels(), s.LogLevel) {
		bad("log_level", "want one of %v, got %q", LogLevels(), s.LogLevel)
	}
	if !slices.Contains(LogFormats(), s.LogFormat) {
		bad("log_format", "want one of %v, got %q", LogFormats(), s.LogFormat)
	}
	return errors.Join(errs...)
}

// validate checks one backend; prefix is its key, "backends[1]".
func (b Backend) validate(e Engine, prefix string) []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: prefix + key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	if reason := checkTarget(e, b.Address); reason != "" {
		bad(".address", "%s", reason)
	}
	if b.Balance != "" && e.Balances != nil && !slices.Contains(e.Balances, b.Balance) {
		bad(".balance", "want one of %s, got %q", strings.Join(e.Balances, ", "), b.Balance)
	}
	if b.ResolveInterval != nil && *b.ResolveInterval < 0 {
		bad(".resolve_interval", "must be 0s (only when a connection fails) or positive, got %s", *b.ResolveInterval)
	}
	var o Outlier // the backend's own keys, checked as the top-level ones are
	o.Codes = b.OutlierCodes
	o.EjectionTime, o.MaxEjectionTime = time.Second, time.Second
	set(&o.ConsecutiveFailures, b.OutlierConsecutiveFailures)
	set(&o.EjectionTime, b.OutlierEjectionTime)
	set(&o.MaxEjectionTime, b.OutlierMaxEjectionTime)
	set(&o.MaxEjectionPercent, b.OutlierMaxEjectionPercent)
	errs = append(errs, o.validate(prefix+".outlier_")...)
	switch {
	case b.Plaintext && b.TLS != nil:
		bad(".plaintext", "a backend is either plaintext: true or has a tls section, not both")
	case !b.Plaintext && b.TLS == nil:
		bad(".plaintext", "choose plaintext: true or a tls section (tls: {} uses the system's CAs)")
	}
	for _, f := range [...]struct {
		key      string
		patterns []string
	}{{".include", b.Include}, {".exclude", b.Exclude}} {
		for _, p := range f.patterns {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				bad(f.key, "bad service pattern %q", p)
			}
		}
	}
	if t := b.TLS; t != nil {
		if t.CAFile != "" {
			if err := checkCAFile(t.CAFile); err != nil {
				bad(".tls.ca_file", "%v", err)
			}
		}
		errs = append(errs, checkKeyPair(prefix+".tls.cert_file", prefix+".tls.key_file", t.CertFile, t.KeyFile)...)
	}
	return errs
}

func (t ListenerTLS) validate() []error {
	errs := checkKeyPair("tls.cert_file", "tls.key_file", t.CertFile, t.KeyFile)
	if t.ClientCAFile != "" {
		if err := checkCAFile(t.ClientCAFile); err != nil {
			errs = append(errs, &KeyError{Key: "tls.client_ca_file", Err: ErrInvalidValue, Reason: err.Error()})
		}
		if t.CertFile == "" {
			errs = append(errs, &KeyError{Key: "tls.client_ca_file", Err: ErrInvalidValue,
				Reason: "client certificates need HTTPS: set tls.cert_file and tls.key_file too"})
		}
	}
	return errs
}

// checkKeyPair checks that cert and key are both set or both empty, and
// load as a pair.
func checkKeyPair(certKey, keyKey, cert, key string) []error {
	bad := func(k, reason string) []error {
		return []error{&KeyError{Key: k, Err: ErrInvalidValue, Reason: reason}}
	}
	switch {
	case cert == "" && key == "":
		return nil
	case key == "":
		return bad(keyKey, "missing: "+certKey+" is set, so the key file is needed too")
	case cert == "":
		return bad(certKey, "missing: "+keyKey+" is set, so the certificate file is needed too")
	}
	if _, err := os.Stat(cert); err != nil {
		return bad(certKey, readError(err))
	}
	if _, err := os.Stat(key); err != nil {
		return bad(keyKey, readError(err))
	}
	if _, err := tls.LoadX509KeyPair(cert, key); err != nil {
		return bad(certKey, "cannot load the certificate with "+keyKey+": "+err.Error())
	}
	return nil
}

// checkCAFile checks that file holds at least one PEM certificate.
func checkCAFile(file string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return errors.New(readError(err))
	}
	if !x509.NewCertPool().AppendCertsFromPEM(data) {
		return fmt.Errorf("%s holds no PEM certificate", file)
	}
	return nil
}

func readError(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Sprintf("cannot read %s: %v", pe.Path, pe.Err)
	}
	return err.Error()
}

// checkTarget tells what is wrong with a gRPC target, or returns "".
// HOST:PORT needs a numeric port; targets with a scheme ("dns:///h:1",
// "unix:///run/b.sock") are passed to gRPC as they are.
func checkTarget(e Engine, target string) string {
	if target == "" {
		return "missing: want HOST:PORT"
	}
	if strings.HasPrefix(target, "dns://") || strings.HasPrefix(target, "ipv4:") || strings.HasPrefix(target, "ipv6:") {
		if e.CheckTarget == nil {
			return ""
		}
		if err := e.CheckTarget(target); err != nil {
			return fmt.Sprintf("want dns://[SERVER]/HOST:PORT, ipv4:IP:PORT,IP:PORT or ipv6:[IP]:PORT,[IP]:PORT, got %q", target)
		}
		return ""
	}
	if strings.HasPrefix(target, "unix:") || strings.Contains(target, ":///") {
		if _, err := url.Parse(target); err != nil {
			return fmt.Sprintf("want HOST:PORT or a gRPC target such as dns:///host:port, got %q", target)
		}
		return ""
	}
	_, port, err := net.SplitHostPort(target)
	if err != nil {
		return fmt.Sprintf("want HOST:PORT, got %q", target)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Sprintf("want a port number from 1 to 65535, got %q", port)
	}
	return ""
}
