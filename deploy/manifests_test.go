// Package deploy holds the container image, the Helm chart, the plain
// Kubernetes manifests generated from it, the Grafana dashboard and the
// Prometheus alert rules; its tests check each with the tools' own
// libraries (Helm, the Kubernetes API types, Prometheus's PromQL parser,
// rule loader and rule evaluation) against the bridge's code.
package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The paths the bridge serves (bridge/http.go).
const (
	livenessPath  = "/healthz"
	readinessPath = "/readyz"
	metricsPath   = "/metrics"
)

// TestExampleBackend: kubernetes/backend-service.yaml, the example
// backend's Service, is headless (one A record per pod) and is the
// backend the chart's default values name by dns:///, so that the bridge
// balances its calls over every pod.
func TestExampleBackend(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("kubernetes", exampleBackend))
	if err != nil {
		t.Fatal(err)
	}
	var b corev1.Service
	if err := yaml.UnmarshalStrict(data, &b); err != nil {
		t.Fatalf("%s does not parse strictly as a Service: %v", exampleBackend, err)
	}
	if b.Spec.ClusterIP != corev1.ClusterIPNone || len(b.Spec.Ports) != 1 {
		t.Fatalf("%s: clusterIP %q, ports %+v; want a headless Service with one port", exampleBackend, b.Spec.ClusterIP, b.Spec.Ports)
	}
	files, err := render(loadChart(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	r := newRelease(t, decodeAll(t, files))
	want := fmt.Sprintf("dns:///%s:%d", b.Name, b.Spec.Ports[0].Port)
	if got := r.backend(t, 0)["address"]; got != want {
		t.Errorf("the chart's default backend is %v, want the example's headless Service %s", got, want)
	}
	if r.backend(t, 0)["balance"] == "pick_first" {
		t.Errorf("the chart's default backend balances by pick_first, want its calls spread over the pods")
	}
	// A proxy in front (nginx/bridge.conf) closes its idle upstream
	// connections before a draining pod stops accepting.
	if ka, delay := nginxKeepaliveTimeout(t), r.duration(t, "shutdown_delay"); ka >= delay {
		t.Errorf("nginx/bridge.conf keepalive_timeout %s, want below the chart's shutdown_delay %s (docs/scaling.md#rolling-restarts)", ka, delay)
	}
}

func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, want := range []string{
		"FROM golang:1.26 AS build",
		"CGO_ENABLED=0",
		"./cmd/grpc-jsonrpc-bridge",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"USER 65532:65532",
		`ENTRYPOINT ["/usr/local/bin/grpc-jsonrpc-bridge"]`,
		`CMD ["serve"]`,
		"EXPOSE 8080",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// nginxKeepaliveTimeout is the keepalive_timeout of the upstream block of
// nginx/bridge.conf: how long nginx keeps an idle connection to a replica.
func nginxKeepaliveTimeout(t *testing.T) time.Duration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("nginx", "bridge.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(data)
	i := strings.Index(conf, "upstream bridge {")
	if i < 0 {
		t.Fatal("nginx/bridge.conf has no upstream bridge block")
	}
	block := conf[i : i+strings.IndexByte(conf[i:], '}')]
	for line := range strings.Lines(block) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "keepalive_timeout "); ok {
			d, err := time.ParseDuration(strings.TrimSuffix(v, ";"))
			if err != nil {
				t.Fatalf("keepalive_timeout %q: %v", v, err)
			}
			return d
		}
	}
	t.Fatal("the upstream block sets no keepalive_timeout (nginx's default, 60s, outlasts any shutdown_delay)")
	return 0
}
