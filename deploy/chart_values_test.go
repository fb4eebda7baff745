package deploy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"
)

// A valueSet is one way to install the chart.
type valueSet struct {
	name   string
	values string // YAML, over the chart's defaults
	// kinds must be rendered, noKinds must not.
	kinds, noKinds []string
	check          func(t *testing.T, r *release)
}

var valueSets = []valueSet{
	{
		name: "backend TLS",
		values: `
backends:
  - name: users
    address: dns:///users.users.svc.cluster.local:50051
    tls: {secret: users-backend-tls, ca_file: ca.crt, cert_file: tls.crt, key_file: tls.key, server_name: users.internal}
    include: ["users.*"]
    balance: round_robin
    health_check: true
  - name: billing
    address: billing.example.com:443
    tls: {}
`,
		check: func(t *testing.T, r *release) {
			tls := r.backend(t, 0)["tls"].(map[string]any)
			if tls["ca_file"] != "/etc/grpc-jsonrpc-bridge/backend-users/ca.crt" || tls["key_file"] != "/etc/grpc-jsonrpc-bridge/backend-users/tls.key" ||
				tls["server_name"] != "users.internal" {
				t.Errorf("backend users: tls %v", tls)
			}
			if v := r.volume(t, "backend-users"); v.Secret == nil || v.Secret.SecretName != "users-backend-tls" {
				t.Errorf("backend-users: got %+v, want Secret users-backend-tls", v.VolumeSource)
			}
			if tls, ok := r.backend(t, 1)["tls"].(map[string]any); !ok || len(tls) != 0 {
				t.Errorf("backend billing: got tls %v, want {} (the system's roots)", r.backend(t, 1)["tls"])
			}
		},
	},
	{
		name: "JWT",
		values: `
auth:
  identities: {secret: bridge-identities}
  jwt:
    issuer: https://idp.example.com/realms/main
    audiences: [https://api.example.com]
    jwks: {secret: idp-jwks}
    algorithms: [RS256, ES256]
    clock_skew: 30s
    jwks_refresh: 5m
    claims_metadata: {sub: x-user-sub, email: x-user-email}
  resource: https://api.example.com/mcp
ingress:
  enabled: true
  className: nginx
  hosts: [api.example.com]
  tls: [{secretName: api-example-com-tls, hosts: [api.example.com]}]
`,
		kinds: []string{"Ingress"},
		check: func(t *testing.T, r *release) {
			auth := r.settings["auth"].(map[string]any)
			jwt := auth["jwt"].(map[string]any)
			if auth["file"] != "/etc/grpc-jsonrpc-bridge/auth/identities.yaml" || jwt["jwks_file"] != "/etc/grpc-jsonrpc-bridge/jwks-0/jwks.json" ||
				jwt["issuer"] != "https://idp.example.com/realms/main" || auth["resource"] != "https://api.example.com/mcp" {
				t.Errorf("got auth %v", auth)
			}
			if _, ok := jwt["jwks_url"]; ok {
				t.Errorf("jwks_url is set, empty: want it left out")
			}
			ing := r.byKind["Ingress"][0].(*networkingv1.Ingress)
			if !slices.ContainsFunc(ing.Spec.Rules[0].HTTP.Paths, func(p networkingv1.HTTPIngressPath) bool {
				return p.Path == "/.well-known/oauth-protected-resource"
			}) || ing.Spec.Rules[0].Host != "api.example.com" {
				t.Errorf("the Ingress routes %+v, want the protected resource metadata on api.example.com too", ing.Spec.Rules)
			}
		},
	},
	{
		name: "JWT providers",
		values: `
auth:
  jwt_providers:
    - issuer: https://idp.example.com/realms/main
      audiences: [https://api.example.com]
      jwks_url: https://idp.example.com/realms/main/protocol/openid-connect/certs
    - issuer: https://token.actions.githubusercontent.com
      audiences: [https://github.com/my-org]
      jwks: {configMap: github-actions-jwks}
      claims_metadata: {repository: x-github-repository}
ingress: {enabled: true}
`,
		kinds: []string{"Ingress"},
		check: func(t *testing.T, r *release) {
			ps := r.settings["auth"].(map[string]any)["jwt_providers"].([]any)
			if len(ps) != 2 || ps[1].(map[string]any)["jwks_file"] != "/etc/grpc-jsonrpc-bridge/jwks-2/jwks.json" {
				t.Errorf("got jwt_providers %v", ps)
			}
			if v := r.volume(t, "jwks-2"); v.ConfigMap == nil || v.ConfigMap.Name != "github-actions-jwks" {
				t.Errorf("jwks-2: got %+v, want ConfigMap github-actions-jwks", v.VolumeSource)
			}
		},
	},
	{
		name: "Redis store",
		values: `
rateLimitStore:
  url: redis://redis.redis.svc.cluster.local:6379/0
  passwordSecret: {name: redis-store, key: password}
config:
  rate_limit: 100
  rate_burst: 200
  rate_limit_store_timeout: 50ms
  rate_limit_store_fallback: local
`,
		check: func(t *testing.T, r *release) {
			if r.settings["rate_limit_store_password_file"] != "/etc/grpc-jsonrpc-bridge/store/password" {
				t.Errorf("got password file %v", r.settings["rate_limit_store_password_file"])
			}
		},
	},
	{
		name: "Redis store URL from a Secret",
		values: `
rateLimitStore:
  urlSecret: {name: redis-url, key: url}
config:
  rate_limit: 100
`,
		check: func(t *testing.T, r *release) {
			for _, e := range r.bridge.Env {
				if e.Name == "BRIDGE_RATE_LIMIT_STORE" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil &&
					e.ValueFrom.SecretKeyRef.Name == "redis-url" && e.ValueFrom.SecretKeyRef.Key == "url" {
					return
				}
			}
			t.Errorf("got env %v, want BRIDGE_RATE_LIMIT_STORE from Secret redis-url", r.bridge.Env)
		},
	},
	{
		name: "autoscaling off",
		values: `
autoscaling: {enabled: false}
replicas: 3
podDisruptionBudget: {minAvailable: 2}
`,
		noKinds: []string{"HorizontalPodAutoscaler"},
		check: func(t *testing.T, r *release) {
			if r.deploy.Spec.Replicas == nil || *r.deploy.Spec.Replicas != 3 || r.pdb.Spec.MinAvailable == nil || r.pdb.Spec.MinAvailable.IntValue() != 2 {
				t.Errorf("got replicas %v, disruption budget %+v", r.deploy.Spec.Replicas, r.pdb.Spec)
			}
		},
	},
	{
		name: "ServiceMonitor on",
		values: `
scrapeAnnotations: false
serviceMonitor: {enabled: true, interval: 15s, labels: {release: kube-prometheus-stack}}
prometheusRule: {enabled: true, labels: {release: kube-prometheus-stack}}
grafanaDashboard: {enabled: true}
`,
		kinds: []string{"ServiceMonitor", "PrometheusRule"},
		check: func(t *testing.T, r *release) {
			if n := len(r.byKind["ConfigMap"]); n != 2 {
				t.Errorf("%d ConfigMaps, want the settings' and the dashboard's", n)
			}
			if ann := r.deploy.Spec.Template.Annotations; ann["prometheus.io/scrape"] != "" {
				t.Errorf("scrape annotations %v with the ServiceMonitor on: the pods would be scraped twice", ann)
			}
		},
	},
	{
		name: "outlier detection",
		values: `
backends:
  - name: users
    address: dns:///users:50051
    plaintext: true
    outlier_consecutive_failures: 3
    outlier_codes: [UNAVAILABLE, 4]
    outlier_ejection_time: 10s
    outlier_max_ejection_time: 2m
    outlier_max_ejection_percent: 34
config:
  outlier_consecutive_failures: 5
`,
	},
	{
		name: "long shutdown",
		values: `
shutdown: {delaySeconds: 30, timeoutSeconds: 120, extraGraceSeconds: 5}
`,
		check: func(t *testing.T, r *release) {
			if g := r.pod.TerminationGracePeriodSeconds; g == nil || *g != 155 {
				t.Errorf("got grace period %v, want 155 s", g)
			}
		},
	},
	{
		name: "without NetworkPolicy, budget and ServiceAccount",
		values: `
networkPolicy: {enabled: false}
podDisruptionBudget: {enabled: false}
serviceAccount: {create: false, name: bridges}
`,
		noKinds: []string{"NetworkPolicy", "PodDisruptionBudget", "ServiceAccount"},
		check: func(t *testing.T, r *release) {
			if r.pod.ServiceAccountName != "bridges" {
				t.Errorf("got service account %q, want bridges", r.pod.ServiceAccountName)
			}
		},
	},
}

func (r *release) backend(t *testing.T, i int) map[string]any {
	t.Helper()
	bs, _ := r.settings["backends"].([]any)
	if i >= len(bs) {
		t.Fatalf("bridge.yaml has %d backends, want %d or more", len(bs), i+1)
	}
	return bs[i].(map[string]any)
}

func (r *release) volume(t *testing.T, name string) corev1.Volume {
	t.Helper()
	for _, v := range r.pod.Volumes {
		if v.Name == name {
			return v
		}
	}
	t.Fatalf("no volume %s", name)
	return corev1.Volume{}
}

// mountRoot is where the pod mounts what the bridge reads.
const mountRoot = "/etc/grpc-jsonrpc-bridge"

// configCheck lays out the pod's files in a directory (the ConfigMap, and
// the fixtures' Secrets and ConfigMaps where the pod mounts them), with
// the container's environment, and runs the built binary's serve --check
// there: the configuration the chart renders must be one serve starts
// with. Paths under mountRoot are moved into the directory.
func (r *release) configCheck(t *testing.T) {
	t.Helper()
	root := t.TempDir()
	move := func(s string) string { return strings.ReplaceAll(s, mountRoot+"/", root+mountRoot+"/") }
	fx := fixtures(t)
	for _, vm := range r.bridge.VolumeMounts {
		if !strings.HasPrefix(vm.MountPath, mountRoot+"/") {
			t.Errorf("volume %s is mounted at %s, want under %s", vm.Name, vm.MountPath, mountRoot)
			continue
		}
		v := r.volume(t, vm.Name)
		var files map[string]string
		switch {
		case v.ConfigMap != nil && v.ConfigMap.Name == r.config.Name:
			files = r.config.Data
		case v.ConfigMap != nil:
			files = fx[v.ConfigMap.Name]
		case v.Secret != nil:
			files = fx[v.Secret.SecretName]
		}
		if files == nil {
			t.Fatalf("volume %s: no fixture for %+v", vm.Name, v.VolumeSource)
		}
		dir := filepath.Join(root, vm.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for key, data := range files {
			if err := os.WriteFile(filepath.Join(dir, key), []byte(move(data)), 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	var env []string
	for _, e := range r.bridge.Env {
		v := move(e.Value)
		if ref := e.ValueFrom; ref != nil {
			if ref.SecretKeyRef == nil {
				t.Fatalf("env %s: want a value or a Secret's key", e.Name)
			}
			data, ok := fx[ref.SecretKeyRef.Name][ref.SecretKeyRef.Key]
			if !ok {
				t.Fatalf("env %s: no fixture for Secret %s key %s", e.Name, ref.SecretKeyRef.Name, ref.SecretKeyRef.Key)
			}
			v = data
		}
		env = append(env, e.Name+"="+v)
	}
	cmd := exec.Command(bridgeBinary(t), append(slices.Clone(r.bridge.Args), "--check")...)
	cmd.Env = env
	var stderr strings.Builder
	cmd.Stderr = &stderr // a key set file's load is logged there
	out, err := cmd.Output()
	if err != nil || !strings.HasPrefix(string(out), "configuration valid: ") {
		t.Errorf("serve --check of the ConfigMap's bridge.yaml: %v\n%s%s\nbridge.yaml:\n%s", err, out, stderr.String(), r.config.Data["bridge.yaml"])
	}
}

// fixtures are the Secrets and ConfigMaps the value sets name, by name:
// their keys and contents.
func fixtures(t *testing.T) map[string]map[string]string {
	t.Helper()
	caPEM, certPEM, keyPEM := testCertificates(t)
	sum := sha256.Sum256([]byte("team-token"))
	return map[string]map[string]string{
		"users-backend-tls":   {"ca.crt": caPEM, "tls.crt": certPEM, "tls.key": keyPEM},
		"bridge-identities":   {"identities.yaml": "identities:\n  - name: team\n    tokens: [\"sha256:" + hex.EncodeToString(sum[:]) + "\"]\n    allow: [\"*\"]\n"},
		"idp-jwks":            {"jwks.json": testJWKS(t)},
		"github-actions-jwks": {"jwks.json": testJWKS(t)},
		"redis-store":         {"password": "s3cret\n"},
		"redis-url":           {"url": "redis://:s3cret@redis.redis.svc.cluster.local:6379/0"},
	}
}

// testCertificates are a CA and a client certificate it signed, PEM.
func testCertificates(t *testing.T) (ca, cert, key string) {
	t.Helper()
	pemOf := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leafTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "bridge"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, caTmpl, &leafKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leafKey)
	if err != nil {
		t.Fatal(err)
	}
	return pemOf("CERTIFICATE", caDER), pemOf("CERTIFICATE", leafDER), pemOf("PRIVATE KEY", keyDER)
}

// testJWKS is a JSON Web Key Set of one P-256 public key.
func testJWKS(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := k.PublicKey.Bytes() // 0x04 || X || Y
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding.EncodeToString
	jwks, err := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "EC", "crv": "P-256", "kid": "test", "alg": "ES256", "use": "sig", "x": b64(pub[1:33]), "y": b64(pub[33:]),
	}}})
	if err != nil {
		t.Fatal(err)
	}
	return string(jwks)
}

// The settings the chart sets from values of its own rather than under
// config: those tied to Kubernetes objects (a port, mounted files,
// Secrets, the grace period). The listener's TLS and descriptor files
// are left out of the chart: TLS ends at the Ingress, and the chart's
// backends offer reflection.
var chartOwned = []string{"backend", "backends", "listen", "shutdown_delay", "shutdown_timeout",
	"rate_limit_store", "rate_limit_store_password_file", "protoset", "proto", "import_path",
	"tls.cert_file", "tls.key_file", "tls.client_ca_file"}

// chartAuth are the keys of auth the chart renders (auth.jwt.* and the
// rest of issue 28 included).
var chartAuth = []string{"auth.file", "auth.identity_metadata_key", "auth.jwt.issuer", "auth.jwt.audiences",
	"auth.jwt.jwks_url", "auth.jwt.ca_file", "auth.jwt.jwks_file", "auth.jwt.algorithms", "auth.jwt.clock_skew", "auth.jwt.jwks_refresh",
	"auth.jwt.claims_metadata", "auth.jwt.scopes", "auth.jwt_providers", "auth.resource"}

// TestChartConfigKeys: values.schema.json's config takes every setting of
// the bridge but those the chart owns, under its name and of its type,
// and nothing else; the chart renders every key of auth.
func TestChartConfigKeys(t *testing.T) {
	bridge := bridgeSettings(t)
	data, err := os.ReadFile(filepath.Join(chartDir, "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	chart := map[string]string{} // key -> JSON schema type
	schemaLeaves(schema.Properties["config"], "", chart)
	for key, def := range bridge {
		switch {
		case slices.Contains(chartOwned, key):
		case strings.HasPrefix(key, "auth."):
			if !slices.Contains(chartAuth, key) {
				t.Errorf("the bridge's setting %s is not rendered by the chart (auth in _helpers.tpl, values.yaml, values.schema.json)", key)
			}
		case chart[key] == "":
			t.Errorf("the bridge's setting %s is not in values.schema.json's config", key)
		case chart[key] != jsonType(def) && !(chart[key] == "number" && jsonType(def) == "integer"):
			t.Errorf("config.%s is of type %s in values.schema.json, want %s (its default is %v)", key, chart[key], jsonType(def), def)
		}
	}
	for key := range chart {
		if _, ok := bridge[key]; ok {
			continue
		}
		t.Errorf("values.schema.json's config has %s, which is no setting of the bridge", key)
	}
}

// bridgeSettings are the bridge's settings, each with its default, from
// the configuration file --print-config writes (config.Settings.YAML).
func bridgeSettings(t *testing.T) map[string]any {
	t.Helper()
	text, err := config.Defaults().YAML()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := yaml.Unmarshal(text, &m); err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok && len(sub) > 0 && k != "claims_metadata" {
				walk(prefix+k+".", sub)
				continue
			}
			out[prefix+k] = v
		}
	}
	walk("", m)
	return out
}

// schemaLeaves collects the leaf keys of a JSON schema of nested objects
// with their types ("duration" for the $ref of a duration).
func schemaLeaves(raw json.RawMessage, prefix string, out map[string]string) {
	var s struct {
		Type       any                        `json:"type"`
		Ref        string                     `json:"$ref"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	_ = json.Unmarshal(raw, &s)
	if s.Type == "object" && s.Properties != nil {
		for k, v := range s.Properties {
			schemaLeaves(v, prefix+k+".", out)
		}
		return
	}
	key := strings.TrimSuffix(prefix, ".")
	switch {
	case s.Ref == "#/$defs/duration":
		out[key] = "duration"
	case s.Type != nil:
		out[key] = strings.Trim(strings.ReplaceAll(toYAML(s.Type), "\n", ""), " -")
	default:
		out[key] = "?"
	}
}

// jsonType is the schema type of a setting by its default value.
func jsonType(v any) string {
	switch v := v.(type) {
	case string:
		if _, err := time.ParseDuration(v); err == nil {
			return "duration"
		}
		return "string"
	case bool:
		return "boolean"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "?"
}
