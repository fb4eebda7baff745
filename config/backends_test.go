package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	goreflect "reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	grpccodes "google.golang.org/grpc/codes"
)

// writeCert writes a self-signed certificate and its key to dir and
// returns their paths.
func writeCert(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test"}, DNSNames: []string{"localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &priv.PublicKey, priv)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestBackendLB: a backends entry's own balance, resolve_interval,
// health_check, health_service and outlier detection win; those it
// leaves unset are the top-level keys'.
func TestBackendLB(t *testing.T) {
	file := `
balance: round_robin
resolve_interval: 5s
health_check: true
health_service: users.v1.Users
outlier_consecutive_failures: 3
outlier_codes: [UNAVAILABLE, 8]
outlier_ejection_time: 10s
outlier_max_ejection_time: 1m
outlier_max_ejection_percent: 30
backends:
  - {name: own, address: "dns://10.0.0.10/users:50051", plaintext: true, balance: pick_first, resolve_interval: 0s, health_check: false, health_service: "",
     outlier_consecutive_failures: 0, outlier_codes: [], outlier_ejection_time: 1s, outlier_max_ejection_time: 2s, outlier_max_ejection_percent: 100}
  - {name: inherits, address: "ipv4:10.0.0.1:1,10.0.0.2:1", plaintext: true}
  - {name: codes, address: "ipv4:10.0.0.1:1", plaintext: true, outlier_codes: [internal, 13, DATA_LOSS]}
`
	s, _, err := load(t, []string{"--config", "$FILE"}, nil, file)
	if err != nil {
		t.Fatal(err)
	}
	top := Outlier{ConsecutiveFailures: 3, Codes: []string{"UNAVAILABLE", "8"}, EjectionTime: 10 * time.Second, MaxEjectionTime: time.Minute, MaxEjectionPercent: 30}
	codes := top
	codes.Codes = []string{"internal", "13", "DATA_LOSS"}
	for i, want := range []LB{
		{Balance: "pick_first", Outlier: Outlier{Codes: []string{}, EjectionTime: time.Second, MaxEjectionTime: 2 * time.Second, MaxEjectionPercent: 100}},
		{Balance: "round_robin", ResolveInterval: 5 * time.Second, HealthCheck: true, HealthService: "users.v1.Users", Outlier: top},
		{Balance: "round_robin", ResolveInterval: 5 * time.Second, HealthCheck: true, HealthService: "users.v1.Users", Outlier: codes},
	} {
		if got := s.LB(s.Backends[i]); !goreflect.DeepEqual(got, want) {
			t.Errorf("backends[%d]: got %+v, want %+v", i, got, want)
		}
	}
	if got := s.LB(s.Backends[2]).Outlier.StatusCodes(); !slices.Equal(got, []grpccodes.Code{grpccodes.Internal, grpccodes.Internal, grpccodes.DataLoss}) {
		t.Errorf("backends[2]'s codes for package backend: %v", got)
	}
	printed, err := s.YAML()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"resolve_interval: 0s", "outlier_codes: []", "outlier_ejection_time: 1s", "outlier_max_ejection_time: 2s", "outlier_max_ejection_percent: 100"} {
		if !strings.Contains(string(printed), want) {
			t.Errorf("printed:\n%s\nwant %s", printed, want)
		}
	}
	again, _, err := load(t, []string{"--config", "$FILE"}, nil, string(printed))
	if err != nil {
		t.Fatalf("the printed settings do not load: %v", err)
	}
	for i := range s.Backends {
		if got, want := again.LB(again.Backends[i]), s.LB(s.Backends[i]); !goreflect.DeepEqual(got, want) {
			t.Errorf("printed and loaded again, backends[%d]: got %+v, want %+v", i, got, want)
		}
	}
}

// TestOutlierInvalid: bad outlier detection values exit 2 at start,
// naming the key, at the top level and in a backends entry.
func TestOutlierInvalid(t *testing.T) {
	for _, tc := range []struct {
		name, file, key, want string
	}{
		{"negative failures", "outlier_consecutive_failures: -1\n", "outlier_consecutive_failures", "0 (off) or more"},
		{"unknown code", "outlier_codes: [UNAVAILABLE, SOMETIMES]\n", "outlier_codes", `"SOMETIMES" is no gRPC status code`},
		{"OK", "outlier_codes: [OK]\n", "outlier_codes", `"OK" is no gRPC status code`},
		{"code 17", "outlier_codes: [17]\n", "outlier_codes", `"17" is no gRPC status code`},
		{"no ejection time", "outlier_ejection_time: 0s\n", "outlier_ejection_time", "must be positive"},
		{"no max ejection time", "outlier_max_ejection_time: 0s\n", "outlier_max_ejection_time", "must be positive"},
		{"percent over 100", "outlier_max_ejection_percent: 101\n", "outlier_max_ejection_percent", "0 to 100"},
		{"a fraction of a percent", "outlier_max_ejection_percent: 2.5\n", "outlier_max_ejection_percent", "whole number"},
		{"a backend's code", "backends:\n  - {address: \"localhost:1\", plaintext: true, outlier_codes: [14, nope]}\n", "backends[0].outlier_codes", `"nope"`},
		{"a backend's percent", "backends:\n  - {address: \"localhost:1\", plaintext: true, outlier_max_ejection_percent: -5}\n", "backends[0].outlier_max_ejection_percent", "0 to 100"},
		{"a backend's failures", "backends:\n  - {address: \"localhost:1\", plaintext: true, outlier_consecutive_failures: x}\n", "backends[0].outlier_consecutive_failures", "a whole number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := load(t, []string{"--config", "$FILE"}, nil, tc.file)
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tc.key || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error of %s saying %s", err, tc.key, tc.want)
			}
		})
	}
}

// TestOutlierFlagsAndEnv: the default backend's outlier detection from
// flags and variables, codes by name or number.
func TestOutlierFlagsAndEnv(t *testing.T) {
	s, _, err := load(t, []string{"--outlier-consecutive-failures", "7", "--outlier-codes", "unavailable,8", "--outlier-ejection-time", "3s"},
		map[string]string{"BRIDGE_OUTLIER_MAX_EJECTION_TIME": "1m", "BRIDGE_OUTLIER_MAX_EJECTION_PERCENT": "20"}, "")
	if err != nil {
		t.Fatal(err)
	}
	want := Outlier{ConsecutiveFailures: 7, Codes: []string{"unavailable", "8"}, EjectionTime: 3 * time.Second, MaxEjectionTime: time.Minute, MaxEjectionPercent: 20}
	if !goreflect.DeepEqual(s.Outlier, want) {
		t.Errorf("got %+v, want %+v", s.Outlier, want)
	}
	s, _, err = load(t, nil, map[string]string{"BRIDGE_OUTLIER_CODES": "14, RESOURCE_EXHAUSTED"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Outlier.StatusCodes(); !slices.Equal(got, []grpccodes.Code{grpccodes.Unavailable, grpccodes.ResourceExhausted}) {
		t.Errorf("BRIDGE_OUTLIER_CODES: got %v", got)
	}
}

func TestLoadBackendsAndSections(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	file := `
backends:
  - name: users
    address: users:443
    tls:
      ca_file: ` + cert + `
      server_name: users.internal
      cert_file: ` + cert + `
      key_file: ` + key + `
    include: ["users.*"]
  - address: localhost:50051
    plaintext: true
    exclude: users.v1.Users
  - name: public
    address: dns:///public:443
    tls: {}
tls:
  cert_file: ` + cert + `
  key_file: ` + key + `
  client_ca_file: ` + cert + `
metadata:
  request_headers: [Authorization, X-Request-Id]
max_call_timeout: 2m
refresh_interval: 0s
`
	got, _, err := load(t, []string{"--config", "$FILE"}, map[string]string{"BRIDGE_METADATA_RESPONSE_HEADERS": "x-trace-id, x-b-bin"}, file)
	if err != nil {
		t.Fatal(err)
	}
	want := Defaults()
	want.Backends = []Backend{
		{Name: "users", Address: "users:443", TLS: &BackendTLS{CAFile: cert, ServerName: "users.internal", CertFile: cert, KeyFile: key}, Include: []string{"users.*"}},
		{Address: "localhost:50051", Plaintext: true, Exclude: []string{"users.v1.Users"}},
		{Name: "public", Address: "dns:///public:443", TLS: &BackendTLS{}},
	}
	want.TLS = ListenerTLS{CertFile: cert, KeyFile: key, ClientCAFile: cert}
	want.Metadata = Metadata{RequestHeaders: []string{"Authorization", "X-Request-Id"}, ResponseHeaders: []string{"x-trace-id", "x-b-bin"}}
	want.MaxCallTimeout = 2 * time.Minute
	want.RefreshInterval = 0
	if !goreflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}

	// The printed configuration loads back to the same settings.
	printed, err := got.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, _, err := load(t, []string{"--config", "$FILE"}, nil, string(printed))
	if err != nil {
		t.Fatalf("loading the printed config: %v\n%s", err, printed)
	}
	if !goreflect.DeepEqual(again, got) {
		t.Errorf("printed and loaded again: got %+v, want %+v\n%s", again, got, printed)
	}
}

func TestLoadFlagsOfNestedKeys(t *testing.T) {
	got, _, err := load(t, []string{"--metadata-request-headers", "a,b", "--metadata-request-headers", "c",
		"--max-call-timeout", "1m", "--refresh-interval", "10s"}, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a", "b", "c"}; !goreflect.DeepEqual(got.Metadata.RequestHeaders, want) {
		t.Errorf("got %v, want %v", got.Metadata.RequestHeaders, want)
	}
	if got.MaxCallTimeout != time.Minute || got.RefreshInterval != 10*time.Second {
		t.Errorf("got %s %s, want 1m 10s", got.MaxCallTimeout, got.RefreshInterval)
	}
}

// TestConfigErrors is the table of bad files of acceptance 7: each error
// names the key and the file.
func TestConfigErrors(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeCert(t, dir)
	missing := filepath.Join(dir, "missing.pem")
	tests := []struct {
		name    string
		file    string
		wantKey string
		wantErr error
		want    string // more text the message must hold
	}{
		{name: "unknown key", file: "listen: a:1\nlisten_tls: true\n", wantKey: "listen_tls", wantErr: ErrUnknownKey, want: `did you mean "listen"?`},
		{name: "unknown nested key", file: "tls:\n  cert: x\n", wantKey: "tls.cert", wantErr: ErrUnknownKey, want: "tls.cert_file"},
		{name: "unknown backend key", file: "backends:\n  - address: a:1\n    plaintext: true\n  - address: b:1\n    adress: x\n", wantKey: "backends[1].adress", wantErr: ErrUnknownKey, want: `did you mean "address"?`},
		{name: "unknown backend tls key", file: "backends:\n  - address: a:1\n    tls:\n      ca: x\n", wantKey: "backends[0].tls.ca", wantErr: ErrUnknownKey, want: "ca_file"},
		{name: "section not a mapping", file: "metadata: [a]\n", wantKey: "metadata", wantErr: ErrInvalidValue, want: "mapping"},
		{name: "bad duration", file: "call_timeout: 30\n", wantKey: "call_timeout", wantErr: ErrInvalidValue, want: "unit"},
		{name: "bad nested duration", file: "max_call_timeout: soon\n", wantKey: "max_call_timeout", wantErr: ErrInvalidValue, want: "duration"},
		{name: "max below call timeout", file: "call_timeout: 10s\nmax_call_timeout: 1s\n", wantKey: "max_call_timeout", wantErr: ErrInvalidValue, want: "at least call_timeout"},
		{name: "keepalive below grpc-go's floor", file: "backend_keepalive:\n  time: 1s\n", wantKey: "backend_keepalive.time", wantErr: ErrInvalidValue, want: "at least 10s"},
		{name: "keepalive timeout zero", file: "backend_keepalive:\n  time: 1m\n  timeout: 0s\n", wantKey: "backend_keepalive.timeout", wantErr: ErrInvalidValue, want: "positive"},
		{name: "negative refresh", file: "refresh_interval: -1s\n", wantKey: "refresh_interval", wantErr: ErrInvalidValue},
		{name: "missing listener certificate", file: "tls:\n  cert_file: " + missing + "\n  key_file: " + key + "\n", wantKey: "tls.cert_file", wantErr: ErrInvalidValue, want: "missing.pem"},
		{name: "key without certificate", file: "tls:\n  key_file: " + key + "\n", wantKey: "tls.cert_file", wantErr: ErrInvalidValue, want: "missing"},
		{name: "client CA without certificate", file: "tls:\n  client_ca_file: " + cert + "\n", wantKey: "tls.client_ca_file", wantErr: ErrInvalidValue, want: "HTTPS"},
		{name: "missing backend CA", file: "backends:\n  - address: a:1\n    tls:\n      ca_file: " + missing + "\n", wantKey: "backends[0].tls.ca_file", wantErr: ErrInvalidValue, want: "no such file"},
		{name: "CA file without certificates", file: "backends:\n  - address: a:1\n    tls:\n      ca_file: " + key + "\n", wantKey: "backends[0].tls.ca_file", wantErr: ErrInvalidValue, want: "no PEM certificate"},
		{name: "missing client key", file: "backends:\n  - address: a:1\n    tls:\n      cert_file: " + cert + "\n      key_file: " + missing + "\n", wantKey: "backends[0].tls.key_file", wantErr: ErrInvalidValue, want: "missing.pem"},
		{name: "bad address", file: "backends:\n  - address: localhost\n    plaintext: true\n", wantKey: "backends[0].address", wantErr: ErrInvalidValue, want: "HOST:PORT"},
		{name: "bad port", file: "backends:\n  - address: a:http\n    plaintext: true\n", wantKey: "backends[0].address", wantErr: ErrInvalidValue, want: "port"},
		{name: "bad shorthand address", file: "backend: nohost\n", wantKey: "backend", wantErr: ErrInvalidValue, want: "HOST:PORT"},
		{name: "neither plaintext nor tls", file: "backends:\n  - address: a:1\n", wantKey: "backends[0].plaintext", wantErr: ErrInvalidValue, want: "tls"},
		{name: "plaintext and tls", file: "backends:\n  - address: a:1\n    plaintext: true\n    tls: {}\n", wantKey: "backends[0].plaintext", wantErr: ErrInvalidValue, want: "not both"},
		{name: "plaintext not a bool", file: "backends:\n  - address: a:1\n    plaintext: yes please\n", wantKey: "backends[0].plaintext", wantErr: ErrInvalidValue, want: "true or false"},
		{name: "bad pattern", file: "backends:\n  - address: a:1\n    plaintext: true\n    include: ['[a-']\n", wantKey: "backends[0].include", wantErr: ErrInvalidValue, want: "[a-"},
		{name: "duplicate names", file: "backends:\n  - {name: a, address: a:1, plaintext: true}\n  - {name: a, address: b:1, plaintext: true}\n", wantKey: "backends[1].name", wantErr: ErrInvalidValue, want: "backends[0]"},
		{name: "backend and backends", file: "backend: a:1\nbackends:\n  - {address: b:1, plaintext: true}\n", wantKey: "backend", wantErr: ErrInvalidValue, want: "not both"},
		{name: "backends not a list", file: "backends: a:1\n", wantKey: "backends", wantErr: ErrInvalidValue, want: "list"},
		{name: "unknown balance", file: "balance: random\n", wantKey: "balance", wantErr: ErrInvalidValue, want: "least_request, round_robin, pick_first"},
		{name: "unknown backend balance", file: "backends:\n  - {address: a:1, plaintext: true, balance: rr}\n", wantKey: "backends[0].balance", wantErr: ErrInvalidValue, want: "least_request, round_robin, pick_first"},
		{name: "negative resolve interval", file: "resolve_interval: -1s\n", wantKey: "resolve_interval", wantErr: ErrInvalidValue, want: "0s"},
		{name: "backend resolve interval not a duration", file: "backends:\n  - {address: a:1, plaintext: true, resolve_interval: 30}\n", wantKey: "backends[0].resolve_interval", wantErr: ErrInvalidValue, want: "duration"},
		{name: "backend health_check not a bool", file: "backends:\n  - {address: a:1, plaintext: true, health_check: maybe}\n", wantKey: "backends[0].health_check", wantErr: ErrInvalidValue, want: "true or false"},
		{name: "bad dns server target", file: "backend: dns://x\n", wantKey: "backend", wantErr: ErrInvalidValue, want: "dns://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, path, err := load(t, []string{"--config", "$FILE"}, nil, tt.file)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("got %v, want %v", err, tt.wantErr)
			}
			var ke *KeyError
			if !errors.As(err, &ke) || ke.Key != tt.wantKey {
				t.Errorf("got %v, want a *KeyError for %s", err, tt.wantKey)
			}
			for _, want := range []string{`"` + tt.wantKey + `"`, path, tt.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("got %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

func TestLoadEnvOverridesNestedFileKey(t *testing.T) {
	// The bad value comes from the environment, so the error does not
	// blame the file.
	_, path, err := load(t, []string{"--config", "$FILE"}, map[string]string{"BRIDGE_MAX_CALL_TIMEOUT": "1s"},
		"call_timeout: 5s\nmax_call_timeout: 1m\n")
	var ke *KeyError
	if !errors.As(err, &ke) || ke.Key != "max_call_timeout" || strings.Contains(err.Error(), path) {
		t.Errorf("got %v, want an error for max_call_timeout not naming %s", err, path)
	}
}

func TestYAMLMasksSecrets(t *testing.T) {
	s := Defaults()
	s.Listen = "hunter2"
	ks := keys()
	for i := range ks {
		ks[i].secret = ks[i].name == "listen"
	}
	out, err := renderYAML(s, ks)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "hunter2") || !strings.Contains(string(out), "listen: '"+masked+"'") {
		t.Errorf("got\n%s\nwant listen masked", out)
	}
}

func TestFlagsOfFileOnlyKeys(t *testing.T) {
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	Register(fs)
	if fs.Lookup("backends") != nil {
		t.Errorf("got a --backends flag, want none: backends is file only")
	}
	for _, name := range []string{"tls-cert-file", "tls-key-file", "tls-client-ca-file", "metadata-request-headers", "metadata-response-headers", "max-call-timeout", "refresh-interval"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no flag --%s", name)
		}
	}
}
