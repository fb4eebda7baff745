package deploy

// The Helm chart (helm/grpc-jsonrpc-bridge), checked with Helm's own
// library: linted, rendered with its default values and with each value
// set below, every object decoded strictly into its Kubernetes (or
// prometheus-operator) Go type, the invariants of a pod that shuts down
// cleanly and runs unprivileged checked for each set, and the
// configuration it mounts checked by the built binary's `serve --check`
// in a copy of the pod's files.

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/common"
	chartutil "helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	"helm.sh/helm/v4/pkg/strvals"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the files generated from the chart and its sources (kubernetes/*.yaml, the chart's files/)")

const (
	chartDir    = "helm/grpc-jsonrpc-bridge"
	releaseName = "grpc-jsonrpc-bridge"
	namespace   = "default"
)

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("loading the chart: %v", err)
	}
	return ch
}

// parseValues reads a value set written as YAML.
func parseValues(t *testing.T, text string) map[string]any {
	t.Helper()
	vals, err := common.ReadValues([]byte(text))
	if err != nil {
		t.Fatalf("values: %v\n%s", err, text)
	}
	return vals.AsMap()
}

// render templates the chart with vals over its defaults, as helm
// template and helm install do: the merged values are checked against
// values.schema.json first. It returns the rendered files by template
// name (NOTES.txt left out).
func render(ch *chart.Chart, vals map[string]any) (map[string]string, error) {
	top, err := chartutil.ToRenderValuesWithSchemaValidation(ch, vals,
		common.ReleaseOptions{Name: releaseName, Namespace: namespace, Revision: 1, IsInstall: true}, nil, false)
	if err != nil {
		return nil, err
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, text := range files {
		if strings.HasSuffix(name, "NOTES.txt") || strings.HasPrefix(filepath.Base(name), "_") {
			continue
		}
		if strings.TrimSpace(text) != "" {
			out[strings.TrimPrefix(name, releaseName+"/")] = text
		}
	}
	return out, nil
}

// lintChart runs helm lint's rules with vals and fails on any warning or
// error.
func lintChart(t *testing.T, vals map[string]any) {
	t.Helper()
	res := lint.RunAll(chartDir, vals, namespace)
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// TestChartLint: helm lint passes with the default values and every value set.
func TestChartLint(t *testing.T) {
	t.Parallel()
	lintChart(t, nil)
	for _, vs := range valueSets {
		t.Run(vs.name, func(t *testing.T) { lintChart(t, parseValues(t, vs.values)) })
	}
}

// TestManifestsFromChart: the plain manifests of kubernetes/ are the
// chart rendered with its default values, one file per template
// (regenerate: go test ./deploy -run TestManifestsFromChart -update).
// kubernetes/backend-service.yaml is the example backend's Service, not
// the chart's.
func TestManifestsFromChart(t *testing.T) {
	files, err := render(loadChart(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for name, text := range files {
		want[filepath.Base(name)] = generatedHeader + strings.TrimLeft(text, "-\n")
	}
	entries, err := os.ReadDir("kubernetes")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == exampleBackend {
			continue
		}
		if _, ok := want[e.Name()]; !ok {
			if *update {
				if err := os.Remove(filepath.Join("kubernetes", e.Name())); err != nil {
					t.Fatal(err)
				}
				continue
			}
			t.Errorf("kubernetes/%s is no template of the chart's default render (go test ./deploy -run TestManifestsFromChart -update)", e.Name())
		}
	}
	for name, text := range want {
		path := filepath.Join("kubernetes", name)
		if *update {
			if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != text {
			t.Errorf("kubernetes/%s is not the chart's default render of it (go test ./deploy -run TestManifestsFromChart -update)", name)
		}
	}
}

// exampleBackend is the example backend's headless Service in kubernetes/.
const exampleBackend = "backend-service.yaml"

const generatedHeader = "# Generated from deploy/helm/grpc-jsonrpc-bridge with its default values by\n" +
	"# `go test ./deploy -run TestManifestsFromChart -update`: edit the chart, then\n" +
	"# regenerate. Install with the chart or `kubectl apply -f deploy/kubernetes/`.\n"

// TestChartFiles: the chart's files/ are copies of the rule file and the
// dashboard, which the PrometheusRule and the dashboard's ConfigMap
// carry (regenerate with -update).
func TestChartFiles(t *testing.T) {
	for _, f := range []struct{ src, copy string }{
		{"prometheus/alerts.yaml", chartDir + "/files/alerts.yaml"},
		{"grafana/grpc-jsonrpc-bridge.json", chartDir + "/files/grpc-jsonrpc-bridge.json"},
	} {
		src, err := os.ReadFile(f.src)
		if err != nil {
			t.Fatal(err)
		}
		if *update {
			if err := os.WriteFile(f.copy, src, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got, err := os.ReadFile(f.copy); err != nil || !bytes.Equal(got, src) {
			t.Errorf("%s is not a copy of %s (go test ./deploy -run TestChartFiles -update)", f.copy, f.src)
		}
	}
}

// TestChartValueSets renders the defaults and every value set, decodes
// each object strictly and checks the invariants.
func TestChartValueSets(t *testing.T) {
	t.Parallel()
	ch := loadChart(t)
	sets := append([]valueSet{{name: "defaults"}}, valueSets...)
	for _, vs := range sets {
		t.Run(vs.name, func(t *testing.T) {
			files, err := render(ch, parseValues(t, vs.values))
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			objs := decodeAll(t, files)
			r := newRelease(t, objs)
			r.checkInvariants(t)
			for _, kind := range vs.kinds {
				if len(r.byKind[kind]) == 0 {
					t.Errorf("no %s rendered", kind)
				}
			}
			for _, kind := range vs.noKinds {
				if len(r.byKind[kind]) != 0 {
					t.Errorf("a %s rendered, want none", kind)
				}
			}
			if vs.check != nil {
				vs.check(t, r)
			}
			r.configCheck(t)
		})
	}
}

// TestChartRefusesBadValues: the schema (and, for what one value cannot
// tell alone, the templates) refuse bad values with a message naming them.
func TestChartRefusesBadValues(t *testing.T) {
	ch := loadChart(t)
	tests := []struct {
		name   string
		values string
		want   []string
	}{
		{"unknown key", "replica: 3", []string{"additional properties 'replica' not allowed"}},
		{"unknown nested key", "autoscaling: {minReplica: 3}", []string{"at '/autoscaling'", "'minReplica' not allowed"}},
		{"mistyped", "replicas: \"3\"", []string{"at '/replicas'", "want integer"}},
		{"unknown setting", "config: {lisen: ':8080'}", []string{"at '/config'", "'lisen' not allowed"}},
		{"setting the chart owns", "config: {shutdown_timeout: 30s}", []string{"at '/config'", "'shutdown_timeout' not allowed"}},
		{"listen is the port's", "config: {listen: ':9090'}", []string{"'listen' not allowed"}},
		{"duration without unit", "config: {call_timeout: '30'}", []string{"at '/config/call_timeout'", "does not match pattern"}},
		{"duration as a number", "config: {call_timeout: 30}", []string{"at '/config/call_timeout': got number, want string"}},
		{"mistyped setting", "config: {max_in_flight: lots}", []string{"at '/config/max_in_flight'", "want integer"}},
		{"unknown balance", "backends: [{name: a, address: 'a:1', plaintext: true, balance: fastest}]", []string{"at '/backends/0/balance'", "least_request"}},
		{"unknown backend key", "backends: [{name: a, address: 'a:1', plaintext: true, adress: 'b:1'}]", []string{"at '/backends/0'", "'adress' not allowed"}},
		{"backend without address", "backends: [{name: a, plaintext: true}]", []string{"at '/backends/0'", "missing property 'address'"}},
		{"backend name", "backends: [{name: Users_1, address: 'a:1', plaintext: true}]", []string{"at '/backends/0/name'", "does not match pattern"}},
		{"client certificate without key", "backends: [{name: a, address: 'a:1', tls: {secret: s, cert_file: tls.crt}}]", []string{"at '/backends/0/tls'", "key_file"}},
		{"CA file without a Secret", "backends: [{name: a, address: 'a:1', tls: {ca_file: ca.crt}}]", []string{"at '/backends/0/tls'", "secret"}},
		{"no backend", "backends: []", []string{"at '/backends'", "minItems"}},
		{"grace period no longer than the shutdown", "shutdown: {extraGraceSeconds: 0}", []string{"at '/shutdown/extraGraceSeconds'", "minimum"}},
		{"store URL", "rateLimitStore: {url: 'localhost:6379'}", []string{"at '/rateLimitStore/url'", "does not match pattern"}},
		{"store URL twice", "rateLimitStore: {url: 'redis://r:6379/0', urlSecret: {name: s}}", []string{"rateLimitStore: give url or urlSecret.name, not both"}},
		{"identities twice", "auth: {identities: {secret: a, configMap: b}}", []string{"auth.identities: give secret or configMap, not both"}},
		{"minAvailable of all replicas", "autoscaling: {enabled: false}\nreplicas: 2\npodDisruptionBudget: {minAvailable: 2}", []string{"podDisruptionBudget.minAvailable (2) must be below the replicas (2)"}},
		{"unknown algorithm", "auth: {jwt: {issuer: 'https://idp', audiences: [a], algorithms: [HS256]}}", []string{"at '/auth/jwt/algorithms/0'", "RS256"}},
		{"network policy peer", "networkPolicy: {ingressFrom: [{namespaceSelektor: {}}]}", []string{"at '/networkPolicy/ingressFrom/0'", "'namespaceSelektor' not allowed"}},
		{"pull policy", "image: {pullPolicy: Sometimes}", []string{"at '/image/pullPolicy'", "IfNotPresent"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := render(ch, parseValues(t, tt.values))
			if err == nil {
				t.Fatalf("values %q rendered, want them refused", tt.values)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error lacks %q:\n%v", w, err)
				}
			}
		})
	}
}

// TestDocsHelmCommands: every helm install and helm upgrade of
// docs/deploy.md and docs/operations.md names the checkout's chart, and
// its --set values render.
func TestDocsHelmCommands(t *testing.T) {
	ch := loadChart(t)
	n := 0
	for _, doc := range []string{"../docs/deploy.md", "../docs/operations.md"} {
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(data), "\\\n", " ")
		for line := range strings.Lines(text) {
			args := shellWords(strings.TrimSpace(line))
			if len(args) < 4 || args[0] != "helm" || (args[1] != "install" && args[1] != "upgrade") {
				continue
			}
			n++
			vals := map[string]any{}
			chartArg := false
			for i := 2; i < len(args); i++ {
				switch {
				case args[i] == "--set" && i+1 < len(args):
					i++
					if err := strvals.ParseInto(args[i], vals); err != nil {
						t.Errorf("%s: --set %s: %v", doc, args[i], err)
					}
				case args[i] == "-f" || args[i] == "--namespace":
					i++
				case args[i] == "deploy/helm/grpc-jsonrpc-bridge":
					chartArg = true
				}
			}
			if !chartArg {
				t.Errorf("%s: %q does not install deploy/helm/grpc-jsonrpc-bridge", doc, strings.TrimSpace(line))
			}
			if _, err := render(ch, vals); err != nil {
				t.Errorf("%s: %q: %v", doc, strings.TrimSpace(line), err)
			}
		}
	}
	if n < 2 {
		t.Errorf("%d helm commands in the docs, want the install of deploy.md and operations.md's", n)
	}
}

// shellWords splits a command line at blanks, keeping quoted words whole.
func shellWords(line string) []string {
	var words []string
	var w strings.Builder
	quote, in := rune(0), false
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// splitDocs splits the rendered files into YAML documents, named
// template#n.
func splitDocs(files map[string]string) map[string][]byte {
	docs := map[string][]byte{}
	for name, text := range files {
		for i, doc := range strings.Split("\n"+text, "\n---") {
			if strings.TrimSpace(stripComments(doc)) == "" {
				continue
			}
			docs[fmt.Sprintf("%s#%d", name, i)] = []byte(doc)
		}
	}
	return docs
}

func stripComments(doc string) string {
	var b strings.Builder
	for line := range strings.Lines(doc) {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// toYAML is for the failure messages.
func toYAML(v any) string {
	b, _ := yaml.Marshal(v)
	return string(b)
}
