package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// tracingFlushTimeout bounds the export of the last spans at shutdown,
// after the HTTP server has stopped: a collector that is down does not
// hold the process up longer than this.
const tracingFlushTimeout = 5 * time.Second

// tracing is the OpenTelemetry instrumentation of serve. A nil *tracing
// means tracing is off: the HTTP handler and the backend connections are
// left as they are, so nothing of it is on the path of a call.
//
// The provider and the propagator are passed to otelhttp and otelgrpc
// explicitly; the otel globals are left alone.
type tracing struct {
	provider   *sdktrace.TracerProvider
	propagator propagation.TextMapPropagator
}

// newTracing creates the tracer provider of t: a batch span processor, an
// OTLP/gRPC exporter (not connected until the first export), a sampler
// following the client's sampled flag and t.SampleRatio for new traces.
// It returns nil when t turns tracing off.
func newTracing(ctx context.Context, t config.Tracing) (*tracing, error) {
	if !t.Enabled() {
		return nil, nil
	}
	var opts []otlptracegrpc.Option
	if t.Endpoint != "" {
		opts = append(opts, otlptracegrpc.WithEndpoint(t.Endpoint))
	}
	if t.Insecure {
		opts = append(opts, otlptracegrpc.WithInsecure())
	}
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, &config.KeyError{Key: "tracing.exporter", Err: config.ErrInvalidValue, Reason: err.Error()}
	}
	// Resource attributes from OTEL_RESOURCE_ATTRIBUTES, then the SDK's,
	// then ours: tracing.service_name wins over OTEL_SERVICE_NAME.
	res, err := resource.New(ctx, resource.WithFromEnv(), resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName(t.ServiceName), semconv.ServiceVersion(version())))
	if err != nil {
		_ = exp.Shutdown(ctx)
		return nil, fmt.Errorf("tracing: OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(t.SampleRatio))),
	)
	return &tracing{provider: tp, propagator: propagation.TraceContext{}}, nil
}

// handler wraps h with otelhttp: one server span per JSON-RPC request
// (POST /, GET /ws, GET /openrpc.json), a child of the client's
// traceparent when it sends one. Probes and /metrics get no spans.
func (tr *tracing) handler(h http.Handler) http.Handler {
	if tr == nil {
		return h
	}
	return otelhttp.NewHandler(h, "jsonrpc",
		otelhttp.WithTracerProvider(tr.provider),
		otelhttp.WithPropagators(tr.propagator),
		otelhttp.WithFilter(traced),
		otelhttp.WithSpanNameFormatter(spanName),
	)
}

// traced reports whether r gets a span: the probes and /metrics are
// polled by machines, and their spans would be noise.
func traced(r *http.Request) bool {
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return false
	}
	return true
}

// spanName is "POST /" for the bridge's own paths and the method alone
// for others, so that clients cannot make up span names.
func spanName(_ string, r *http.Request) string {
	switch r.URL.Path {
	case "/", "/ws", "/openrpc.json":
		return r.Method + " " + r.URL.Path
	}
	return r.Method
}

// dialOptions instrument a backend connection with otelgrpc: one client
// span per call, a child of the HTTP request's span, named like
// "helloworld.Greeter/SayHello"; the span's context replaces the
// traceparent (and tracestate) the bridge forwards from the client, so
// the backend gets one, a child of the client's trace. Discovery calls
// (server reflection) get no spans.
func (tr *tracing) dialOptions() []grpc.DialOption {
	if tr == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithStatsHandler(otelgrpc.NewClientHandler(
		otelgrpc.WithTracerProvider(tr.provider),
		otelgrpc.WithPropagators(tr.propagator),
		otelgrpc.WithFilter(func(info *stats.RPCTagInfo) bool {
			return !strings.HasPrefix(info.FullMethodName, "/grpc.reflection.")
		}),
	))}
}

// shutdown exports the spans not yet sent, waiting at most
// tracingFlushTimeout, and stops the provider. Export errors are logged.
func (tr *tracing) shutdown(ctx context.Context, log *slog.Logger) {
	if tr == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, tracingFlushTimeout)
	defer cancel()
	if err := tr.provider.Shutdown(ctx); err != nil {
		log.Warn("tracing: cannot export the last spans", "error", err)
	}
}
