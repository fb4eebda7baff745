package config

import (
	"fmt"
	"math"
	"net"
	"slices"
	"strconv"
)

// Tracing are the OpenTelemetry tracing settings. The zero value (an
// empty Exporter, like "none") records no spans; the bridge still passes
// a client's W3C trace context on to the backends.
type Tracing struct {
	// Exporter is "none" (tracing off) or "otlp" (spans sent to an
	// OpenTelemetry collector over OTLP/gRPC).
	Exporter string
	// Endpoint is the collector's HOST:PORT. Empty means the SDK's choice:
	// OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT, else localhost:4317.
	Endpoint string
	// Insecure sends spans without TLS. False means TLS with the system's
	// roots, unless OTEL_EXPORTER_OTLP_(TRACES_)INSECURE says otherwise.
	Insecure bool
	// SampleRatio is the share, 0 to 1, of new traces recorded; a client's
	// traceparent decides for the traces it starts.
	SampleRatio float64
	// ServiceName is the service.name of the bridge's spans.
	ServiceName string
}

// Enabled reports whether spans are recorded and exported.
func (t Tracing) Enabled() bool { return t.Exporter != "" && t.Exporter != "none" }

// TracingExporters lists the accepted values of Tracing.Exporter.
func TracingExporters() []string { return []string{"none", "otlp"} }

func defaultTracing() Tracing {
	return Tracing{Exporter: "none", SampleRatio: 1, ServiceName: "grpc-jsonrpc-bridge"}
}

// validateTracing checks the tracing settings of s, whether or not
// tracing is on, so that turning it on finds no surprise.
func (s Settings) validateTracing() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, &KeyError{Key: key, Err: ErrInvalidValue, Reason: fmt.Sprintf(format, args...)})
	}
	t := s.Tracing
	if !slices.Contains(TracingExporters(), t.Exporter) {
		bad("tracing.exporter", "want one of %v, got %q", TracingExporters(), t.Exporter)
	}
	if t.Endpoint != "" {
		host, port, err := net.SplitHostPort(t.Endpoint)
		if n, perr := strconv.ParseUint(port, 10, 16); err != nil || host == "" || perr != nil || n == 0 {
			bad("tracing.endpoint", "want HOST:PORT of an OTLP/gRPC collector, such as otel-collector:4317, or empty, got %q", t.Endpoint)
		}
	}
	if r := t.SampleRatio; math.IsNaN(r) || r < 0 || r > 1 {
		bad("tracing.sample_ratio", "must be from 0 to 1, got %v", r)
	}
	if t.ServiceName == "" {
		bad("tracing.service_name", "must not be empty")
	}
	return errs
}
