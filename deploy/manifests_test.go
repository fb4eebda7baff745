// Package deploy holds the container image and Kubernetes manifests; its
// tests parse the manifests strictly into Kubernetes API types and check
// them against the bridge's code and configuration rules.
package deploy

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// The paths the bridge serves (bridge/http.go).
const (
	livenessPath  = "/healthz"
	readinessPath = "/readyz"
	metricsPath   = "/metrics"
)

// load parses a manifest strictly: unknown or duplicate fields fail, and
// its apiVersion and kind must be the ones given.
func load(t *testing.T, name, apiVersion, kind string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, v); err != nil {
		t.Fatalf("%s does not parse strictly as %s: %v", name, kind, err)
	}
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(data, &meta); err != nil {
		t.Fatal(err)
	}
	if meta.APIVersion != apiVersion || meta.Kind != kind {
		t.Fatalf("%s is %s %s, want %s %s", name, meta.APIVersion, meta.Kind, apiVersion, kind)
	}
}

type manifests struct {
	deploy appsv1.Deployment
	cm     corev1.ConfigMap
	svc    corev1.Service
	hpa    autoscalingv2.HorizontalPodAutoscaler
	pdb    policyv1.PodDisruptionBudget
	secret corev1.Secret // the rate limit store's password
	// backend is the example backend's headless Service.
	backend corev1.Service
}

func loadAll(t *testing.T) *manifests {
	t.Helper()
	m := &manifests{}
	load(t, "deployment.yaml", "apps/v1", "Deployment", &m.deploy)
	load(t, "configmap.yaml", "v1", "ConfigMap", &m.cm)
	load(t, "service.yaml", "v1", "Service", &m.svc)
	load(t, "hpa.yaml", "autoscaling/v2", "HorizontalPodAutoscaler", &m.hpa)
	load(t, "pdb.yaml", "policy/v1", "PodDisruptionBudget", &m.pdb)
	load(t, "secret.yaml", "v1", "Secret", &m.secret)
	load(t, "backend-service.yaml", "v1", "Service", &m.backend)
	entries, err := os.ReadDir("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains([]string{"deployment.yaml", "configmap.yaml", "service.yaml", "hpa.yaml", "pdb.yaml", "secret.yaml", "backend-service.yaml"}, e.Name()) {
			t.Errorf("kubernetes/%s is not checked by this test", e.Name())
		}
	}
	return m
}

// settings loads the ConfigMap's file with the bridge's own loader, as the
// pod does through BRIDGE_CONFIG, with the container's environment.
func (m *manifests) settings(t *testing.T, c corev1.Container) config.Settings {
	t.Helper()
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "BRIDGE_") {
			t.Setenv(k, "")
		}
	}
	dir := t.TempDir()
	for key, data := range m.cm.Data {
		if err := os.WriteFile(filepath.Join(dir, key), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mounts := map[string]string{}  // mount path -> ConfigMap name
	secrets := map[string]string{} // mount path -> Secret name
	pod := m.deploy.Spec.Template.Spec
	for _, vm := range c.VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil {
				mounts[vm.MountPath] = v.ConfigMap.Name
			}
			if v.Name == vm.Name && v.Secret != nil {
				secrets[vm.MountPath] = v.Secret.SecretName
			}
		}
	}
	// The password file the ConfigMap names is a key of the Secret, where
	// the pod mounts it: the test reads the Secret's value from a file of
	// its own.
	var file struct {
		PasswordFile string `json:"rate_limit_store_password_file"`
	}
	if err := yaml.Unmarshal([]byte(m.cm.Data["bridge.yaml"]), &file); err != nil {
		t.Fatal(err)
	}
	if p := file.PasswordFile; p != "" {
		name, key := secrets[filepath.Dir(p)], filepath.Base(p)
		value, ok := m.secret.StringData[key]
		if name != m.secret.Name || !ok {
			t.Fatalf("rate_limit_store_password_file %s is not a key of Secret %s mounted at %s", p, m.secret.Name, filepath.Dir(p))
		}
		local := filepath.Join(dir, "secret-"+key)
		if err := os.WriteFile(local, []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
		t.Setenv("BRIDGE_RATE_LIMIT_STORE_PASSWORD_FILE", local)
	}
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "BRIDGE_") || e.ValueFrom != nil {
			t.Errorf("env %s: want only plain BRIDGE_* values", e.Name)
			continue
		}
		v := e.Value
		if e.Name == "BRIDGE_RATE_LIMIT_STORE_PASSWORD_FILE" {
			t.Errorf("env %s: want the password file in the ConfigMap, where the test maps it to the Secret", e.Name)
		}
		if e.Name == "BRIDGE_CONFIG" {
			if mounts[filepath.Dir(v)] != m.cm.Name || m.cm.Data[filepath.Base(v)] == "" {
				t.Fatalf("BRIDGE_CONFIG %s is not a key of ConfigMap %s mounted at %s", v, m.cm.Name, filepath.Dir(v))
			}
			v = filepath.Join(dir, filepath.Base(v))
		}
		t.Setenv(e.Name, v)
	}
	fs := pflag.NewFlagSet("deploy", pflag.ContinueOnError)
	config.Register(fs)
	s, err := config.Load(fs)
	if err != nil {
		t.Fatalf("the ConfigMap's settings do not load: %v", err)
	}
	return s
}

func TestManifests(t *testing.T) {
	m := loadAll(t)
	d := m.deploy
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("got %d containers, want 1", len(pod.Containers))
	}
	c := pod.Containers[0]
	s := m.settings(t, c)
	if s.Backend == "" {
		t.Errorf("the ConfigMap names no backend")
	}
	// The backend is the example's headless Service, by dns:///, so that
	// the bridge balances its calls over every pod.
	b := m.backend
	if b.Spec.ClusterIP != corev1.ClusterIPNone || len(b.Spec.Ports) != 1 {
		t.Errorf("backend-service.yaml: clusterIP %q, ports %+v; want a headless Service with one port", b.Spec.ClusterIP, b.Spec.Ports)
	} else if want := fmt.Sprintf("dns:///%s:%d", b.Name, b.Spec.Ports[0].Port); s.Backend != want {
		t.Errorf("the ConfigMap's backend is %q, want the headless Service %q", s.Backend, want)
	}
	if lb := s.LB(s.BackendList()[0]); lb.Balance == "pick_first" || lb.ResolveInterval <= 0 {
		t.Errorf("the ConfigMap balances by %+v, want calls spread over the pods and the name resolved again", lb)
	}

	// The listen port is the container's http port, which the probes,
	// the Service and the scrape annotation use.
	_, port, err := net.SplitHostPort(s.Listen)
	if err != nil {
		t.Fatalf("listen %q: %v", s.Listen, err)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || strconv.Itoa(int(c.Ports[0].ContainerPort)) != port {
		t.Errorf("got ports %+v, want one named http on the listen port %s", c.Ports, port)
	}
	for _, p := range []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, livenessPath}, {"readiness", c.ReadinessProbe, readinessPath}} {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("no %s probe, want GET %s", p.name, p.path)
			continue
		}
		if g := p.probe.HTTPGet; g.Path != p.path || g.Port != intstr.FromString("http") {
			t.Errorf("%s probe: got GET %s on %s, want GET %s on http", p.name, g.Path, g.Port.String(), p.path)
		}
	}
	ann := d.Spec.Template.Annotations
	if ann["prometheus.io/path"] != metricsPath || ann["prometheus.io/port"] != port {
		t.Errorf("got scrape annotations %v, want %s on port %s", ann, metricsPath, port)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("got args %v, want serve", c.Args)
	}

	// The grace period covers the preStop sleep and the drain.
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if pod.TerminationGracePeriodSeconds == nil {
		t.Fatalf("no terminationGracePeriodSeconds")
	}
	grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second
	if grace <= preStop+s.ShutdownDelay+s.ShutdownTimeout {
		t.Errorf("got grace period %s, want more than preStop %s + shutdown_delay %s + shutdown_timeout %s",
			grace, preStop, s.ShutdownDelay, s.ShutdownTimeout)
	}
	if preStop+s.ShutdownDelay == 0 {
		t.Errorf("no preStop sleep nor shutdown_delay: endpoints may still send to a pod that refuses connections")
	}

	// Resources and a restrictive security context.
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("got resources %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	// The worst case of request and reply buffers fits in half the limit.
	if worst, limit := int64(s.MaxInFlight)*(s.MaxBodyBytes+s.MaxResponseBytes), c.Resources.Limits.Memory().Value(); worst > limit/2 {
		t.Errorf("max_in_flight x (max_body_bytes + max_response_bytes) = %d MiB, want at most half the memory limit (%d MiB)", worst>>20, limit>>20)
	}
	if s.Auth.File != "" {
		t.Errorf("auth.file %s is set, but the manifests mount no identities file", s.Auth.File)
	}
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("got pod %+v container %+v, want non-root, seccomp, read-only, no privileges, no token", psc, sc)
	}
	for _, v := range pod.Volumes {
		if v.ConfigMap == nil && (v.Secret == nil || v.Secret.SecretName != m.secret.Name) {
			t.Errorf("volume %s: want only the ConfigMap and the store's Secret (secret.yaml)", v.Name)
		}
	}
	if len(m.secret.Data) != 0 || len(m.secret.StringData) != 1 || m.secret.StringData["password"] != "replace-me" {
		t.Errorf("secret.yaml: want one key, password, holding only the placeholder replace-me")
	}

	// One rate limit for all replicas: through the store, which never
	// stops a pod from starting, with the local fallback.
	if s.RateLimit <= 0 || s.RateLimitStore == "" || s.RateLimitStoreFallback != "local" || s.RateLimitStoreTimeout <= 0 {
		t.Errorf("got rate_limit %d, store %q, fallback %s, timeout %s; want a limit shared through a store, falling back to local",
			s.RateLimit, s.RateLimitStore, s.RateLimitStoreFallback, s.RateLimitStoreTimeout)
	}
	if pw, err := s.RateLimitStorePassword(); err != nil || pw == "" {
		t.Errorf("the store's password: %q, %v; want the Secret's", pw, err)
	}
	// A proxy in front (deploy/nginx/bridge.conf) closes its idle upstream
	// connections before a draining pod stops accepting.
	if ka := nginxKeepaliveTimeout(t); ka >= s.ShutdownDelay {
		t.Errorf("nginx/bridge.conf keepalive_timeout %s, want below shutdown_delay %s (docs/scaling.md#rolling-restarts)", ka, s.ShutdownDelay)
	}
	if len(c.EnvFrom) != 0 {
		t.Errorf("got envFrom %v, want settings only in the ConfigMap and env", c.EnvFrom)
	}

	// Upgrades keep capacity.
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("got strategy %+v, want a rolling update with maxUnavailable 0", d.Spec.Strategy)
	}

	// The Service, the autoscaler and the disruption budget find the pods.
	labels := d.Spec.Template.Labels
	for k, v := range d.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("the Deployment selects %s=%s, which its pods do not carry", k, v)
		}
	}
	for k, v := range m.svc.Spec.Selector {
		if labels[k] != v {
			t.Errorf("the Service selects %s=%s, which the pods do not carry", k, v)
		}
	}
	if len(m.svc.Spec.Ports) != 1 || m.svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("got service ports %+v, want one targeting http", m.svc.Spec.Ports)
	}
	if ref := m.hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name {
		t.Errorf("the autoscaler scales %s %s, want Deployment %s", ref.Kind, ref.Name, d.Name)
	}
	if d.Spec.Replicas != nil {
		t.Errorf("the Deployment sets replicas, which fights the autoscaler")
	}
	if m.hpa.Spec.MinReplicas == nil || *m.hpa.Spec.MinReplicas < 2 || m.hpa.Spec.MaxReplicas < *m.hpa.Spec.MinReplicas {
		t.Errorf("got autoscaler %d..%d, want at least 2 replicas", m.hpa.Spec.MinReplicas, m.hpa.Spec.MaxReplicas)
	}
	if sel := m.pdb.Spec.Selector; sel == nil {
		t.Errorf("the disruption budget selects nothing")
	} else {
		for k, v := range sel.MatchLabels {
			if labels[k] != v {
				t.Errorf("the disruption budget selects %s=%s, which the pods do not carry", k, v)
			}
		}
	}
	if mu := m.pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() < 1 || mu.IntValue() >= int(*m.hpa.Spec.MinReplicas) {
		t.Errorf("got maxUnavailable %v, want at least 1 and fewer than the minimum replicas", mu)
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
