package config

import (
	"slices"
	"testing"
)

func TestUnknownEnv(t *testing.T) {
	got := UnknownEnv([]string{
		"BRIDGE_LISEN=:8080",        // a typo of BRIDGE_LISTEN
		"BRIDGE_LISTEN=:8080",       // a setting
		"BRIDGE_CONFIG=bridge.yaml", // the file's
		"BRIDGE_TLS_CERT_FIL=a.pem", // a typo of a nested key
		"BRIDGE_MAX_BODY_BYTE=1",    // a typo
		"BRIDGE_URL=http://x/",      // another program's: near no setting
		"BRIDGE_BACKENDS=x",         // backends is file only: near backend
		"PATH=/usr/bin",             // not the bridge's
		"bridge_listen=:1",          // not the bridge's prefix
		"BRIDGE_TRACING_EXPORTERS=otlp",
	})
	want := []string{
		"BRIDGE_BACKENDS is no setting: did you mean BRIDGE_BACKEND?",
		"BRIDGE_LISEN is no setting: did you mean BRIDGE_LISTEN?",
		"BRIDGE_MAX_BODY_BYTE is no setting: did you mean BRIDGE_MAX_BODY_BYTES?",
		"BRIDGE_TLS_CERT_FIL is no setting: did you mean BRIDGE_TLS_CERT_FILE?",
		"BRIDGE_TRACING_EXPORTERS is no setting: did you mean BRIDGE_TRACING_EXPORTER?",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}
