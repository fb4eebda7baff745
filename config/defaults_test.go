package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/mapping"
)

// packageDefaults are the keys that set an option of a package (the
// command passes them to bridge.Options, backend.DirectOptions,
// mapping.DocumentInfo or reflect's options), each with that package's
// default: the constant the option's zero value stands for, or the zero
// value itself where the key's default means what the option's zero
// means.
var packageDefaults = map[string]struct {
	want any
	of   string
}{
	"max_body_bytes":                {bridge.DefaultMaxBodyBytes, "bridge.DefaultMaxBodyBytes"},
	"max_batch_size":                {bridge.DefaultMaxBatchSize, "bridge.DefaultMaxBatchSize"},
	"batch_parallelism":             {bridge.DefaultBatchParallelism, "bridge.DefaultBatchParallelism"},
	"call_timeout":                  {bridge.DefaultCallTimeout, "bridge.DefaultCallTimeout"},
	"max_call_timeout":              {time.Duration(0), "bridge.Options.MaxCallTimeout zero: call_timeout"},
	"metadata.request_headers":      {[]string(nil), "bridge.Metadata.RequestHeaders nil: only Grpc-Metadata-*"},
	"metadata.response_headers":     {[]string(nil), "bridge.Metadata.ResponseHeaders nil: none"},
	"max_metadata_bytes":            {bridge.DefaultMaxMetadataBytes, "bridge.DefaultMaxMetadataBytes"},
	"emit_unpopulated":              {false, "bridge.Options.EmitUnpopulated false"},
	"auth.identity_metadata_key":    {bridge.DefaultIdentityMetadataKey, "bridge.DefaultIdentityMetadataKey"},
	"auth.jwt.clock_skew":           {idp.DefaultClockSkew, "idp.DefaultClockSkew"},
	"auth.jwt.jwks_refresh":         {idp.DefaultRefresh, "idp.DefaultRefresh"},
	"auth.jwt.algorithms":           {[]string(nil), "idp.Options.Algorithms nil: every asymmetric one"},
	"auth.jwt.jwks_url":             {"", "idp.Options.JWKSURL empty: OIDC discovery"},
	"auth.resource":                 {"", "bridge.Options.Resource empty: the first audience when it is a URL"},
	"auth.jwt.scopes":               {[]string(nil), "bridge.Options.Scopes nil: none listed"},
	"max_in_flight":                 {bridge.DefaultMaxInFlight, "bridge.DefaultMaxInFlight"},
	"max_response_bytes":            {bridge.DefaultMaxResponseBytes, "bridge.DefaultMaxResponseBytes"},
	"rate_limit":                    {0, "bridge.Options.RateLimit zero: off"},
	"rate_burst":                    {0, "bridge.Options.RateBurst zero: the larger of max_batch_size and rate_limit"},
	"body_timeout":                  {bridge.DefaultBodyTimeout, "bridge.DefaultBodyTimeout"},
	"reply_timeout":                 {bridge.DefaultReplyTimeout, "bridge.DefaultReplyTimeout"},
	"max_body_reads_per_client":     {bridge.DefaultMaxBodyReadsPerClient, "bridge.DefaultMaxBodyReadsPerClient"},
	"max_body_reads_per_connection": {bridge.DefaultMaxBodyReadsPerConnection, "bridge.DefaultMaxBodyReadsPerConnection"},
	"max_ws_connections":            {bridge.DefaultMaxWSConnections, "bridge.DefaultMaxWSConnections"},
	"max_ws_connections_per_client": {bridge.DefaultMaxWSConnectionsPerClient, "bridge.DefaultMaxWSConnectionsPerClient"},
	"max_stream_messages":           {bridge.DefaultMaxStreamMessages, "bridge.DefaultMaxStreamMessages"},
	"max_stream_bytes":              {bridge.DefaultMaxStreamBytes, "bridge.DefaultMaxStreamBytes"},
	"ws_max_message_bytes":          {0, "bridge.Options.WSMaxMessageBytes zero: max_body_bytes"},
	"stream_buffer":                 {bridge.DefaultStreamBuffer, "bridge.DefaultStreamBuffer"},
	"stream_buffer_bytes":           {bridge.DefaultStreamBufferBytes, "bridge.DefaultStreamBufferBytes"},
	"ws_buffer_bytes":               {bridge.DefaultWSBufferBytes, "bridge.DefaultWSBufferBytes"},
	"slow_client_timeout":           {bridge.DefaultSlowClientTimeout, "bridge.DefaultSlowClientTimeout"},
	"max_streams_per_connection":    {bridge.DefaultMaxStreamsPerConnection, "bridge.DefaultMaxStreamsPerConnection"},
	"max_calls_per_connection":      {bridge.DefaultMaxCallsPerConnection, "bridge.DefaultMaxCallsPerConnection"},
	// The command turns a 0s ws_ping_interval into bridge's negative (off).
	"ws_ping_interval": {bridge.DefaultWSPingInterval, "bridge.DefaultWSPingInterval"},
	// The command turns a 0s stream_keepalive into bridge's negative (off).
	"stream_keepalive":                        {bridge.DefaultStreamKeepalive, "bridge.DefaultStreamKeepalive"},
	"stream_timeout":                          {time.Duration(0), "bridge.Options.StreamTimeout zero: call_timeout"},
	"ws_origin_patterns":                      {[]string(nil), "bridge.Options.WSOriginPatterns nil: none"},
	"cors_origins":                            {[]string(nil), "bridge.Options.CORSOrigins nil: no other origin"},
	"backend_keepalive.time":                  {time.Duration(0), "backend.DirectOptions.KeepaliveTime zero: off"},
	"backend_keepalive.permit_without_stream": {false, "backend.DirectOptions.KeepalivePermitWithoutStream false"},
	"balance":                                 {backend.LeastRequest, "backend.Options.Balance empty: backend.LeastRequest"},
	"health_check":                            {false, "backend.Options.HealthCheck false"},
	"health_service":                          {"", "backend.Options.HealthService empty: the whole server"},
	"outlier_consecutive_failures":            {backend.DefaultConsecutiveFailures, "backend.DefaultOutlier().ConsecutiveFailures"},
	"outlier_codes":                           {[]string{"UNAVAILABLE"}, "backend.DefaultOutlier().Codes"},
	"outlier_ejection_time":                   {backend.DefaultEjectionTime, "backend.DefaultOutlier().EjectionTime"},
	"outlier_max_ejection_time":               {backend.DefaultMaxEjectionTime, "backend.DefaultOutlier().MaxEjectionTime"},
	"outlier_max_ejection_percent":            {backend.DefaultMaxEjectionPercent, "backend.DefaultOutlier().MaxEjectionPercent"},
	"openrpc_title":                           {mapping.DefaultTitle, "mapping.DefaultTitle"},
	"openrpc_version":                         {mapping.DefaultVersion, "mapping.DefaultVersion"},
	"openrpc_description":                     {"", "mapping.DocumentInfo.Description empty: the services' comments"},
}

// commandDefaults are the keys whose default the command owns, with why
// no package has one to agree with.
var commandDefaults = map[string]string{
	"backend":                      "no default backend",
	"auth.jwt.issuer":              "no default identity provider",
	"auth.jwt.audiences":           "no default audience: the operator names the bridge",
	"auth.jwt.jwks_file":           "no default key set file",
	"auth.jwt.ca_file":             "the system's roots, as for backends",
	"auth.jwt.claims_metadata":     "no claim is forwarded unless the operator says",
	"auth.jwt_providers":           "no default identity provider",
	"backends":                     "no default backend",
	"listen":                       "the command's listener",
	"tls.cert_file":                "the command's listener",
	"tls.key_file":                 "the command's listener",
	"tls.client_ca_file":           "the command's listener",
	"read_header_timeout":          "net/http.Server, set by the command",
	"read_timeout":                 "net/http.Server, set by the command",
	"write_timeout":                "net/http.Server, set by the command",
	"idle_timeout":                 "net/http.Server, set by the command",
	"http2_max_concurrent_streams": "net/http.Server, set by the command",
	"shutdown_timeout":             "the command's shutdown",
	"shutdown_delay":               "the command's shutdown",
	"log_level":                    "the command's logger",
	"log_format":                   "the command's logger",
	"access_log":                   "the command makes bridge.Options.AccessLog (nil: off) when on",
	"metrics":                      "the command makes bridge.Options.Metrics (nil: off) when on",
	"auth.file":                    "the command makes bridge.Options.Auth (nil: off) from it",
	"direct_calls":                 "the command sets backend.Options.Direct from it",
	// backend.Options.ResolveInterval's zero re-resolves on failures only;
	// the command resolves every 30s unless told 0s.
	"resolve_interval":               "the command's choice for backend.Options.ResolveInterval",
	"explorer":                       "the command mounts bridge/explorer's handler, or none",
	"lean_http1":                     "the command puts bridge/h1 in front of its http.Server, or not",
	"mcp":                            "the command sets Options.DisableMCP from it: on, as the zero Options are",
	"mcp_stateless":                  "the command sets Options.MCPStateless from it: off, as the zero Options are",
	"rate_limit_store":               "the command makes bridge.Options.RateLimiter (nil: per process) from it",
	"rate_limit_store_password_file": "the command reads it for redislimit.Options.Password",
	"rate_limit_store_timeout":       "redislimit.DefaultTimeout, passed always",
	"rate_limit_store_fallback":      "redislimit.Local, passed always",
	// reflect.WatchOptions.Interval's zero is off too; the command refreshes
	// every 5m unless told 0s.
	"refresh_interval": "the command's choice for reflect.WatchOptions.Interval",
	// backend.DirectOptions.KeepaliveTimeout's zero means 20s, a default of
	// bridge/backend/internal/unary (and grpc-go's) that no package exports; the
	// command always passes the key's value.
	"backend_keepalive.timeout": "passed always; the packages' 20s is not exported",
	"allowed_hosts":             "the command derives it from listen (DefaultAllowedHosts); bridge's nil allows any",
	"openrpc_servers":           "the command derives http://<listen>/",
	"protoset":                  "the command's descriptor source",
	"proto":                     "the command's descriptor source",
	"import_path":               "the command's descriptor source",
	"tracing.exporter":          "the command's tracing",
	"tracing.endpoint":          "the command's tracing",
	"tracing.insecure":          "the command's tracing",
	"tracing.sample_ratio":      "the command's tracing",
	"tracing.service_name":      "the command's tracing",
}

// TestDefaultsMatchPackages: every key is either one whose default is a
// package's (and then Defaults agrees with that package) or one the
// command owns; a new key must be put in one of the two lists.
func TestDefaultsMatchPackages(t *testing.T) {
	d := Defaults()
	seen := map[string]bool{}
	for _, k := range keys() {
		seen[k.name] = true
		got := reflect.ValueOf(k.field(&d)).Elem()
		pd, pinned := packageDefaults[k.name]
		_, owned := commandDefaults[k.name]
		switch {
		case pinned && owned:
			t.Errorf("%s: in packageDefaults and commandDefaults", k.name)
		case !pinned && !owned:
			t.Errorf("%s: in neither packageDefaults nor commandDefaults: say which owns its default", k.name)
		case pinned:
			want := reflect.ValueOf(pd.want)
			if want.Type() != got.Type() && want.Type().ConvertibleTo(got.Type()) && want.Kind() != reflect.Slice {
				want = want.Convert(got.Type())
			}
			if !reflect.DeepEqual(got.Interface(), want.Interface()) {
				t.Errorf("%s: config default %v, want %v (%s)", k.name, got.Interface(), want.Interface(), pd.of)
			}
		}
	}
	for name := range packageDefaults {
		if !seen[name] {
			t.Errorf("packageDefaults names %s, which is not a key", name)
		}
	}
	for name := range commandDefaults {
		if !seen[name] {
			t.Errorf("commandDefaults names %s, which is not a key", name)
		}
	}
}
