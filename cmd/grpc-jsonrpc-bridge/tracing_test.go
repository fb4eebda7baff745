package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// keptSpans is an in-memory exporter whose spans outlive the provider's
// shutdown (tracetest's forgets them then).
type keptSpans struct{ *tracetest.InMemoryExporter }

func (keptSpans) Shutdown(context.Context) error { return nil }

// startTracedBridge is startBridge with spans sent to exp.
func startTracedBridge(t *testing.T, exp sdktrace.SpanExporter, args ...string) (*process, string) {
	t.Helper()
	clearEnv(t)
	ctx, cancel := context.WithCancel(withSpanExporter(t.Context(), exp))
	p := &process{cancel: cancel, exit: make(chan int, 1), stdout: newOutput(), stderr: newOutput()}
	args = append(append([]string{"serve"}, args...), "--listen", "127.0.0.1:0", "--log-format", "json")
	go func() {
		code := run(ctx, args, p.stdout.w, p.stderr.w)
		p.stdout.w.Close()
		p.stderr.w.Close()
		p.exit <- code
	}()
	t.Cleanup(func() {
		cancel()
		p.wait(t)
		<-p.stdout.done
		<-p.stderr.done
	})
	var addr string
	p.stderr.until(t, "listening log", func(l string) bool {
		var rec struct{ Msg, Addr string }
		if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "listening" {
			addr = rec.Addr
			return true
		}
		return false
	})
	p.stderr.until(t, "discovery log", func(l string) bool { return strings.Contains(l, "discovered the backends") })
	return p, addr
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
// with tracing on (spans to memory) and off. On, a call with a traceparent
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
			exp := tracetest.NewInMemoryExporter()
			p, addr := startTracedBridge(t, keptSpans{exp}, append([]string{"--backend", backend}, tt.args...)...)
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
			spans := exp.GetSpans()

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
			if server.Name != "POST /" || server.Parent.SpanID() != inParent || !server.Parent.IsRemote() {
				t.Errorf("server span: got %q with parent %s, want \"POST /\" with the client's parent %s",
					server.Name, server.Parent.SpanID(), inParent)
			}
			if client.Name != "helloworld.Greeter/SayHello" || client.Parent.SpanID() != server.SpanContext.SpanID() {
				t.Errorf("client span: got %q with parent %s, want \"helloworld.Greeter/SayHello\" below the server span %s",
					client.Name, client.Parent.SpanID(), server.SpanContext.SpanID())
			}
			if got := attr(client.Resource.Attributes(), "service.name"); got != "edge" {
				t.Errorf("service.name: got %q, want edge", got)
			}
			gotTrace, gotParent := parseTraceparent(t, tps[0])
			if gotTrace != inTrace || gotParent != client.SpanContext.SpanID() {
				t.Errorf("the backend got traceparent %s, want trace %s with parent %s (the client span)",
					tps[0], inTrace, client.SpanContext.SpanID())
			}

			tps = withoutParent.Get("traceparent")
			if len(tps) != 1 {
				t.Fatalf("without a client traceparent the backend got %q, want exactly one", tps)
			}
			newTrace, parent := parseTraceparent(t, tps[0])
			root, child := spanOf(spans, newTrace, trace.SpanKindServer), spanOf(spans, newTrace, trace.SpanKindClient)
			if newTrace == inTrace || root == nil || child == nil || root.Parent.IsValid() || parent != child.SpanContext.SpanID() {
				t.Errorf("without a client traceparent: got backend traceparent %s and spans %v, want a new trace of a root server span and a client span, the backend's parent",
					tps[0], spanNames(spans))
			}
		})
	}
}

func spanOf(spans tracetest.SpanStubs, tid trace.TraceID, kind trace.SpanKind) *tracetest.SpanStub {
	for i, s := range spans {
		if s.SpanContext.TraceID() == tid && s.SpanKind == kind {
			return &spans[i]
		}
	}
	return nil
}

func spanNames(spans tracetest.SpanStubs) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.SpanKind.String()+" "+s.Name+" "+s.SpanContext.TraceID().String())
	}
	return out
}

func attr(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
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
