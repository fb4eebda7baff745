package main

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// collector is an OTLP/gRPC trace collector on loopback: it keeps the
// spans the bridge exports, as a real collector receives them.
type collector struct {
	collectortrace.UnimplementedTraceServiceServer
	mu    sync.Mutex
	spans []span
}

// span is what the tests check of one exported span.
type span struct {
	TraceID      trace.TraceID
	SpanID       trace.SpanID
	Parent       trace.SpanID // invalid for a root span
	RemoteParent bool
	Kind         trace.SpanKind
	Name         string
	Service      string // the resource's service.name
}

// startCollector serves a collector until the test ends and returns it
// with its address.
func startCollector(t *testing.T) (*collector, string) {
	t.Helper()
	c := new(collector)
	b := testserver.Start(t, testserver.Options{Addr: testserver.Loopback, NoConn: true, Reflection: testserver.ReflectionNone,
		Services: []testserver.Service{func(s *grpc.Server) { collectortrace.RegisterTraceServiceServer(s, c) }}})
	return c, b.Addr()
}

func (c *collector) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				sp := span{Kind: trace.SpanKind(s.GetKind()), Name: s.GetName(), Service: service,
					RemoteParent: s.GetFlags()&uint32(tracepb.SpanFlags_SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK) != 0}
				copy(sp.TraceID[:], s.GetTraceId())
				copy(sp.SpanID[:], s.GetSpanId())
				copy(sp.Parent[:], s.GetParentSpanId())
				c.spans = append(c.spans, sp)
			}
		}
	}
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// received returns the spans exported so far.
func (c *collector) received() []span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.spans)
}

// parseTraceparent splits a version-00 traceparent into its ids.
func parseTraceparent(t *testing.T, v string) (trace.TraceID, trace.SpanID) {
	t.Helper()
	parts := strings.Split(v, "-")
	if len(parts) != 4 || parts[0] != "00" {
		t.Fatalf("traceparent %q: want 00-<trace id>-<parent id>-<flags>", v)
	}
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil {
		t.Fatalf("traceparent %q: %v", v, err)
	}
	sid, err := trace.SpanIDFromHex(parts[2])
	if err != nil {
		t.Fatalf("traceparent %q: %v", v, err)
	}
	return tid, sid
}

// TestServeTracing runs serve in front of a real gRPC backend on loopback,
// with tracing on (spans to an OTLP/gRPC collector on loopback) and off. On, a call with a traceparent
// gets a server span whose parent is the client's, and a client span
// "helloworld.Greeter/SayHello" below it; the backend sees one
// traceparent, of the client's trace, whose parent is the client span. A
// call without one starts a trace the backend joins. Off, no spans, and
// the client's traceparent and tracestate reach the backend as sent.
func TestServeTracing(t *testing.T) {
	const (
		incoming   = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
		tracestate = "vendor=opaque"
	)
	inTrace, inParent := parseTraceparent(t, incoming)
	for _, tt := range []struct {
		name string
		args []string
		on   bool
	}{
		{name: "on", args: []string{"--tracing-exporter", "otlp", "--tracing-service-name", "edge"}, on: true},
		{name: "off", args: nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			be := &recordingBackend{}
			backend := startBackend(t, be.intercept)
			for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_RESOURCE_ATTRIBUTES"} {
				t.Setenv(k, "")
			}
			col, colAddr := startCollector(t)
			// The collector's address is given with tracing off too: no span may reach it.
			p, addr := startBridge(t, append([]string{"--backend", backend, "--tracing-endpoint", colAddr, "--tracing-insecure"}, tt.args...)...)
			url := "http://" + addr + "/"

			// A probe and a scrape, which get no spans.
			for _, path := range []string{"readyz", "metrics"} {
				resp, err := http.Get(url + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}

			status, r, _ := rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"),
				http.Header{"Traceparent": {incoming}, "Tracestate": {tracestate}})
			if status != 200 || code(r) != 0 {
				t.Fatalf("got %d %v, want a result", status, r)
			}
			withParent := be.last(t).md
			status, r, _ = rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"), nil)
			if status != 200 || code(r) != 0 {
				t.Fatalf("got %d %v, want a result", status, r)
			}
			withoutParent := be.last(t).md
			if code := p.stop(t); code != exitOK {
				t.Fatalf("got exit code %d, want 0; stderr:\n%s", code, p.stderr.rest())
			}
			spans := col.received()

			tps := withParent.Get("traceparent")
			if len(tps) != 1 {
				t.Fatalf("the backend got traceparent %q, want exactly one", tps)
			}
			if got := withParent.Get("tracestate"); len(got) != 1 || got[0] != tracestate {
				t.Errorf("the backend got tracestate %q, want [%s]", got, tracestate)
			}
			if !tt.on {
				if tps[0] != incoming {
					t.Errorf("the backend got traceparent %s, want the client's %s", tps[0], incoming)
				}
				if got := withoutParent.Get("traceparent"); len(got) != 0 {
					t.Errorf("without a client traceparent the backend got %q, want none", got)
				}
				if len(spans) != 0 {
					t.Errorf("got %d spans with tracing off, want none: %v", len(spans), spans)
				}
				return
			}

			if len(spans) != 4 {
				t.Fatalf("got %d spans, want 4 (a server and a client span per call): %v", len(spans), spanNames(spans))
			}
			server, client := spanOf(spans, inTrace, trace.SpanKindServer), spanOf(spans, inTrace, trace.SpanKindClient)
			if server == nil || client == nil {
				t.Fatalf("got spans %v, want a server and a client span in trace %s", spanNames(spans), inTrace)
			}
			if server.Name != "POST /" || server.Parent != inParent || !server.RemoteParent {
				t.Errorf("server span: got %q with parent %s (remote %t), want \"POST /\" with the client's parent %s",
					server.Name, server.Parent, server.RemoteParent, inParent)
			}
			if client.Name != "helloworld.Greeter/SayHello" || client.Parent != server.SpanID {
				t.Errorf("client span: got %q with parent %s, want \"helloworld.Greeter/SayHello\" below the server span %s",
					client.Name, client.Parent, server.SpanID)
			}
			if got := client.Service; got != "edge" {
				t.Errorf("service.name: got %q, want edge", got)
			}
			gotTrace, gotParent := parseTraceparent(t, tps[0])
			if gotTrace != inTrace || gotParent != client.SpanID {
				t.Errorf("the backend got traceparent %s, want trace %s with parent %s (the client span)",
					tps[0], inTrace, client.SpanID)
			}

			tps = withoutParent.Get("traceparent")
			if len(tps) != 1 {
				t.Fatalf("without a client traceparent the backend got %q, want exactly one", tps)
			}
			newTrace, parent := parseTraceparent(t, tps[0])
			root, child := spanOf(spans, newTrace, trace.SpanKindServer), spanOf(spans, newTrace, trace.SpanKindClient)
			if newTrace == inTrace || root == nil || child == nil || root.Parent.IsValid() || parent != child.SpanID {
				t.Errorf("without a client traceparent: got backend traceparent %s and spans %v, want a new trace of a root server span and a client span, the backend's parent",
					tps[0], spanNames(spans))
			}
		})
	}
}

func spanOf(spans []span, tid trace.TraceID, kind trace.SpanKind) *span {
	for i, s := range spans {
		if s.TraceID == tid && s.Kind == kind {
			return &spans[i]
		}
	}
	return nil
}

func spanNames(spans []span) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Kind.String()+" "+s.Name+" "+s.TraceID.String())
	}
	return out
}

// TestTracingOff checks that tracing off leaves the handler and the
// backend connections as they are: nothing on the path of a call.
func TestTracingOff(t *testing.T) {
	tr, err := newTracing(t.Context(), config.Defaults().Tracing)
	if err != nil || tr != nil {
		t.Fatalf("got %v, %v, want nil, nil", tr, err)
	}
	h := http.NewServeMux()
	if got := tr.handler(h); got != http.Handler(h) {
		t.Errorf("got handler %T, want the bridge's own", got)
	}
	if got := tr.dialOptions(); got != nil {
		t.Errorf("got %d dial options, want none", len(got))
	}
	tr.shutdown(t.Context(), nil) // no provider: nothing to do, no logger needed
}

// TestTracingOTLP builds the OTLP exporter (it connects lazily) and shuts
// it down with no spans, promptly, even though no collector listens.
func TestTracingOTLP(t *testing.T) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
	tc := config.Defaults().Tracing
	tc.Exporter, tc.Endpoint, tc.Insecure, tc.SampleRatio = "otlp", "127.0.0.1:1", true, 0.5
	tr, err := newTracing(t.Context(), tc)
	if err != nil || tr == nil {
		t.Fatalf("got %v, %v, want the tracer provider", tr, err)
	}
	start := time.Now()
	tr.shutdown(t.Context(), slog.New(slog.DiscardHandler))
	if took := time.Since(start); took > tracingFlushTimeout {
		t.Errorf("shutdown took %s, want at most %s", took, tracingFlushTimeout)
	}
}
