package deploy

import (
	"fmt"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// kinds are the objects the chart may render, by apiVersion and kind,
// each with its Go type.
var kinds = map[string]func() any{
	"apps/v1 Deployment":                      func() any { return new(appsv1.Deployment) },
	"v1 ConfigMap":                            func() any { return new(corev1.ConfigMap) },
	"v1 Service":                              func() any { return new(corev1.Service) },
	"v1 ServiceAccount":                       func() any { return new(corev1.ServiceAccount) },
	"autoscaling/v2 HorizontalPodAutoscaler":  func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"policy/v1 PodDisruptionBudget":           func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1 NetworkPolicy":      func() any { return new(networkingv1.NetworkPolicy) },
	"networking.k8s.io/v1 Ingress":            func() any { return new(networkingv1.Ingress) },
	"monitoring.coreos.com/v1 ServiceMonitor": func() any { return new(monitoringv1.ServiceMonitor) },
	"monitoring.coreos.com/v1 PrometheusRule": func() any { return new(monitoringv1.PrometheusRule) },
}

// decodeAll decodes every rendered document strictly into its Go type:
// an unknown or duplicate field fails, as the API server refuses it.
func decodeAll(t *testing.T, files map[string]string) map[string][]any {
	t.Helper()
	objs := map[string][]any{}
	for name, doc := range splitDocs(files) {
		var meta struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, doc)
		}
		newObj, ok := kinds[meta.APIVersion+" "+meta.Kind]
		if !ok {
			t.Errorf("%s: %s %s is no kind the chart renders", name, meta.APIVersion, meta.Kind)
			continue
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			t.Errorf("%s does not decode strictly as %s: %v\n%s", name, meta.Kind, err, doc)
			continue
		}
		objs[meta.Kind] = append(objs[meta.Kind], obj)
	}
	return objs
}

// release is one render of the chart.
type release struct {
	byKind   map[string][]any
	deploy   *appsv1.Deployment
	pod      corev1.PodSpec
	bridge   corev1.Container
	config   *corev1.ConfigMap // the bridge's bridge.yaml
	settings map[string]any    // bridge.yaml, parsed
	svc      *corev1.Service
	hpa      *autoscalingv2.HorizontalPodAutoscaler
	pdb      *policyv1.PodDisruptionBudget
}

func newRelease(t *testing.T, objs map[string][]any) *release {
	t.Helper()
	r := &release{byKind: objs}
	one := func(kind string) any {
		if n := len(objs[kind]); n != 1 {
			t.Fatalf("%d %s objects rendered, want 1", n, kind)
		}
		return objs[kind][0]
	}
	r.deploy = one("Deployment").(*appsv1.Deployment)
	r.svc = one("Service").(*corev1.Service)
	r.pod = r.deploy.Spec.Template.Spec
	if len(r.pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(r.pod.Containers))
	}
	r.bridge = r.pod.Containers[0]
	for _, o := range objs["ConfigMap"] {
		if cm := o.(*corev1.ConfigMap); cm.Data["bridge.yaml"] != "" {
			r.config = cm
		}
	}
	if r.config == nil {
		t.Fatal("no ConfigMap holds bridge.yaml")
	}
	if err := yaml.Unmarshal([]byte(r.config.Data["bridge.yaml"]), &r.settings); err != nil {
		t.Fatalf("bridge.yaml: %v", err)
	}
	if hs := objs["HorizontalPodAutoscaler"]; len(hs) > 0 {
		r.hpa = hs[0].(*autoscalingv2.HorizontalPodAutoscaler)
	}
	if ps := objs["PodDisruptionBudget"]; len(ps) > 0 {
		r.pdb = ps[0].(*policyv1.PodDisruptionBudget)
	}
	return r
}

// duration is the bridge setting key, a duration.
func (r *release) duration(t *testing.T, key string) time.Duration {
	t.Helper()
	s, _ := r.settings[key].(string)
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("bridge.yaml %s: %v", key, err)
	}
	return d
}

// minReplicas is how few pods the release runs.
func (r *release) minReplicas() int32 {
	if r.hpa != nil && r.hpa.Spec.MinReplicas != nil {
		return *r.hpa.Spec.MinReplicas
	}
	if r.deploy.Spec.Replicas != nil {
		return *r.deploy.Spec.Replicas
	}
	return 1
}

// selects reports whether every label of sel is on the pods.
func (r *release) selects(sel map[string]string) bool {
	labels := r.deploy.Spec.Template.Labels
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func (r *release) checkInvariants(t *testing.T) {
	t.Helper()
	d, pod, c := r.deploy, r.pod, r.bridge
	if !r.selects(d.Spec.Selector.MatchLabels) {
		t.Errorf("the Deployment selects %v, which its pods do not carry", d.Spec.Selector.MatchLabels)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("got args %v, want serve", c.Args)
	}

	// The bridge listens on the container's http port, which the probes,
	// the Service, the scrapes and the NetworkPolicy name.
	listen, _ := r.settings["listen"].(string)
	host, port, err := net.SplitHostPort(listen)
	if err != nil || host != "0.0.0.0" {
		t.Errorf("bridge.yaml listen %q, want 0.0.0.0:PORT", listen)
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
	if ann := d.Spec.Template.Annotations; ann["prometheus.io/scrape"] != "" &&
		(ann["prometheus.io/path"] != metricsPath || ann["prometheus.io/port"] != port) {
		t.Errorf("got scrape annotations %v, want %s on port %s", ann, metricsPath, port)
	}
	if d.Spec.Template.Annotations["checksum/config"] == "" {
		t.Errorf("no checksum/config annotation: a new configuration would not roll the pods")
	}

	// The grace period covers the preStop sleep and the whole shutdown.
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	delay, timeout := r.duration(t, "shutdown_delay"), r.duration(t, "shutdown_timeout")
	if pod.TerminationGracePeriodSeconds == nil {
		t.Errorf("no terminationGracePeriodSeconds")
	} else if grace := time.Duration(*pod.TerminationGracePeriodSeconds) * time.Second; grace <= preStop+delay+timeout {
		t.Errorf("got grace period %s, want more than preStop %s + shutdown_delay %s + shutdown_timeout %s", grace, preStop, delay, timeout)
	}
	if preStop+delay == 0 {
		t.Errorf("no preStop sleep nor shutdown_delay: endpoints may still send to a pod that refuses connections")
	}

	// Unprivileged: non-root, read-only, no escalation, no capabilities,
	// no token.
	psc, sc := pod.SecurityContext, c.SecurityContext
	if psc == nil || sc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.RunAsUser == nil || *psc.RunAsUser == 0 ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) ||
		pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("got pod %+v container %+v, want non-root, seccomp, read-only, no privileges, no token", psc, sc)
	}
	for _, o := range r.byKind["ServiceAccount"] {
		sa := o.(*corev1.ServiceAccount)
		if sa.Name != pod.ServiceAccountName || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken {
			t.Errorf("ServiceAccount %s: the pods use %q; want theirs, with no token mounted", sa.Name, pod.ServiceAccountName)
		}
	}

	// Settings only as BRIDGE_* variables; every mount has its volume and
	// every volume is mounted.
	for _, e := range c.Env {
		if !strings.HasPrefix(e.Name, "BRIDGE_") {
			t.Errorf("env %s: want only BRIDGE_* variables", e.Name)
		}
	}
	mounted := map[string]bool{}
	for _, vm := range c.VolumeMounts {
		mounted[vm.Name] = true
		if !vm.ReadOnly || vm.SubPath != "" {
			t.Errorf("volume mount %s: want read-only and whole (a subPath is never updated)", vm.Name)
		}
	}
	for _, v := range pod.Volumes {
		if !mounted[v.Name] {
			t.Errorf("volume %s is not mounted", v.Name)
		}
		delete(mounted, v.Name)
	}
	for name := range mounted {
		t.Errorf("volume mount %s has no volume", name)
	}

	// Resources: requests, a memory limit, and the worst case of request
	// and reply buffers within half of it.
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("got resources %+v, want cpu and memory requests and a memory limit", c.Resources)
	}
	num := func(key string, def int64) int64 {
		if f, ok := r.settings[key].(float64); ok {
			return int64(f)
		}
		return def
	}
	worst := num("max_in_flight", 1024) * (num("max_body_bytes", 4<<20) + num("max_response_bytes", 8<<20))
	if limit := c.Resources.Limits.Memory().Value(); worst > limit/2 {
		t.Errorf("max_in_flight x (max_body_bytes + max_response_bytes) = %d MiB, want at most half the memory limit (%d MiB)", worst>>20, limit>>20)
	}

	// Upgrades keep capacity; the replicas are the autoscaler's or fixed.
	if ru := d.Spec.Strategy.RollingUpdate; ru == nil || ru.MaxUnavailable == nil || ru.MaxUnavailable.IntValue() != 0 {
		t.Errorf("got strategy %+v, want a rolling update with maxUnavailable 0", d.Spec.Strategy)
	}
	if r.hpa != nil {
		if d.Spec.Replicas != nil {
			t.Errorf("the Deployment sets replicas, which fights the autoscaler")
		}
		if ref := r.hpa.Spec.ScaleTargetRef; ref.Kind != "Deployment" || ref.Name != d.Name {
			t.Errorf("the autoscaler scales %s %s, want Deployment %s", ref.Kind, ref.Name, d.Name)
		}
		if r.hpa.Spec.MinReplicas == nil || r.hpa.Spec.MaxReplicas < *r.hpa.Spec.MinReplicas {
			t.Errorf("got autoscaler %v..%d", r.hpa.Spec.MinReplicas, r.hpa.Spec.MaxReplicas)
		}
	} else if d.Spec.Replicas == nil {
		t.Errorf("no autoscaler and no replicas")
	}

	// The disruption budget lets a drain evict a pod: minAvailable below
	// the replicas, or maxUnavailable at least 1.
	if r.pdb != nil {
		if sel := r.pdb.Spec.Selector; sel == nil || !r.selects(sel.MatchLabels) {
			t.Errorf("the disruption budget selects %v, not the pods", sel)
		}
		replicas := int(r.minReplicas())
		switch s := r.pdb.Spec; {
		case s.MinAvailable != nil:
			if n, err := intstr.GetScaledValueFromIntOrPercent(s.MinAvailable, replicas, true); err != nil || n >= replicas {
				t.Errorf("minAvailable %s of %d replicas: want below the replicas", s.MinAvailable.String(), replicas)
			}
		case s.MaxUnavailable != nil:
			if n, err := intstr.GetScaledValueFromIntOrPercent(s.MaxUnavailable, replicas, false); err != nil || n < 1 {
				t.Errorf("maxUnavailable %s of %d replicas: want at least 1", s.MaxUnavailable.String(), replicas)
			}
		default:
			t.Errorf("the disruption budget sets neither minAvailable nor maxUnavailable")
		}
	}

	// The Service finds the pods on http.
	if !r.selects(r.svc.Spec.Selector) {
		t.Errorf("the Service selects %v, which the pods do not carry", r.svc.Spec.Selector)
	}
	if len(r.svc.Spec.Ports) != 1 || r.svc.Spec.Ports[0].TargetPort != intstr.FromString("http") {
		t.Errorf("got service ports %+v, want one targeting http", r.svc.Spec.Ports)
	}
	r.checkNetwork(t)
	r.checkMonitoring(t)
	for kind, objs := range r.byKind {
		for _, o := range objs {
			if o.(metav1.Object).GetLabels()["app.kubernetes.io/name"] == "" {
				t.Errorf("a %s has no app.kubernetes.io/name label", kind)
			}
		}
	}
}

// clientPaths are the paths an Ingress may route: the calls, and the
// OAuth protected resource metadata MCP clients read.
var clientPaths = []string{"/", "/ws", "/mcp", "/openrpc.json", "/.well-known/oauth-protected-resource"}

func (r *release) checkNetwork(t *testing.T) {
	t.Helper()
	for _, o := range r.byKind["NetworkPolicy"] {
		np := o.(*networkingv1.NetworkPolicy)
		if !r.selects(np.Spec.PodSelector.MatchLabels) || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("the NetworkPolicy selects %v for %v, want the pods, for Ingress", np.Spec.PodSelector.MatchLabels, np.Spec.PolicyTypes)
		}
		if len(np.Spec.Ingress) == 0 {
			t.Errorf("the NetworkPolicy lets nothing in")
		}
		for i, rule := range np.Spec.Ingress {
			if len(rule.From) == 0 {
				t.Errorf("NetworkPolicy rule %d lets in anyone", i)
			}
			if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || *rule.Ports[0].Port != intstr.FromString("http") {
				t.Errorf("NetworkPolicy rule %d: ports %v, want http only", i, rule.Ports)
			}
		}
	}
	for _, o := range r.byKind["Ingress"] {
		ing := o.(*networkingv1.Ingress)
		for _, rule := range ing.Spec.Rules {
			if rule.HTTP == nil {
				t.Errorf("Ingress rule %q routes nothing", rule.Host)
				continue
			}
			var paths []string
			for _, p := range rule.HTTP.Paths {
				paths = append(paths, p.Path)
				if !slices.Contains(clientPaths, p.Path) {
					t.Errorf("the Ingress routes %s: want only %v", p.Path, clientPaths)
				}
				if p.Path == "/" && (p.PathType == nil || *p.PathType != networkingv1.PathTypeExact) {
					t.Errorf("the Ingress routes / as %v, want Exact (a prefix would route /metrics)", p.PathType)
				}
				if b := p.Backend.Service; b == nil || b.Name != r.svc.Name || b.Port.Number != r.svc.Spec.Ports[0].Port {
					t.Errorf("the Ingress sends %s to %+v, want Service %s port %d", p.Path, p.Backend, r.svc.Name, r.svc.Spec.Ports[0].Port)
				}
			}
			for _, want := range clientPaths[:4] {
				if !slices.Contains(paths, want) {
					t.Errorf("the Ingress does not route %s", want)
				}
			}
		}
	}
}

func (r *release) checkMonitoring(t *testing.T) {
	t.Helper()
	for _, o := range r.byKind["ServiceMonitor"] {
		sm := o.(*monitoringv1.ServiceMonitor)
		for k, v := range sm.Spec.Selector.MatchLabels {
			if r.svc.Labels[k] != v {
				t.Errorf("the ServiceMonitor selects %s=%s, which the Service does not carry", k, v)
			}
		}
		if len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "http" || sm.Spec.Endpoints[0].Path != metricsPath {
			t.Errorf("got ServiceMonitor endpoints %+v, want %s on http", sm.Spec.Endpoints, metricsPath)
		}
	}
	for _, o := range r.byKind["PrometheusRule"] {
		pr := o.(*monitoringv1.PrometheusRule)
		data, err := os.ReadFile("prometheus/alerts.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var want monitoringv1.PrometheusRuleSpec
		if err := yaml.UnmarshalStrict(data, &want); err != nil {
			t.Fatalf("prometheus/alerts.yaml as a PrometheusRule's spec: %v", err)
		}
		if !reflect.DeepEqual(pr.Spec, want) {
			t.Errorf("the PrometheusRule's rules are not those of prometheus/alerts.yaml")
		}
	}
	for _, o := range r.byKind["ConfigMap"] {
		cm := o.(*corev1.ConfigMap)
		if js, ok := cm.Data["grpc-jsonrpc-bridge.json"]; ok {
			data, err := os.ReadFile("grafana/grpc-jsonrpc-bridge.json")
			if err != nil {
				t.Fatal(err)
			}
			if strings.TrimSpace(js) != strings.TrimSpace(string(data)) {
				t.Errorf("the dashboard's ConfigMap does not hold grafana/grpc-jsonrpc-bridge.json")
			}
		}
	}
}

// String names the release's Deployment, for messages.
func (r *release) String() string { return fmt.Sprintf("release %s", r.deploy.Name) }
