package deploy

// The dashboard (grafana/grpc-jsonrpc-bridge.json) and the alert rules
// (prometheus/alerts.yaml), checked with Prometheus's own parser and rule
// loader, and against the /metrics of a running bridge.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/ratelimit/redislimit/redistest"
)

const (
	rulesFile     = "prometheus/alerts.yaml"
	dashboardFile = "grafana/grpc-jsonrpc-bridge.json"
	runbookBase   = "https://github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/blob/main/docs/operations.md#"
)

// loadRules loads the rule file as Prometheus does: unknown fields and
// bad expressions or templates fail.
func loadRules(t *testing.T) *rulefmt.RuleGroups {
	t.Helper()
	groups, errs := rulefmt.ParseFile(rulesFile, false, model.UTF8Validation)
	for _, err := range errs {
		t.Errorf("rulefmt: %v", err)
	}
	if groups == nil || len(groups.Groups) == 0 {
		t.Fatalf("%s holds no rule group", rulesFile)
	}
	return groups
}

// alertNames are the alerts the rule file must have (issue 31's list,
// and those the balancer's and the identity issues' metrics call for).
var alertNames = []string{
	"JSONRPCBridgeHighErrorRatio", "JSONRPCBridgeBackendNotReady", "JSONRPCBridgeBackendAddressesDown",
	"JSONRPCBridgeRateLimitStoreDown", "JSONRPCBridgeHighLatency", "JSONRPCBridgeAuthenticationFailures",
	"JSONRPCBridgeAuthReloadFailed", "JSONRPCBridgeAddressesEjected", "JSONRPCBridgeOverloaded",
}

// TestAlertRules: the rule file loads with rulefmt; every alert has a
// severity, a summary, a description and a runbook_url whose anchor is a
// heading of docs/operations.md.
func TestAlertRules(t *testing.T) {
	groups := loadRules(t)
	anchors := markdownAnchors(t, "../docs/operations.md")
	var names []string
	for _, g := range groups.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				t.Errorf("group %s: a recording rule %s; want alerts only", g.Name, r.Record)
				continue
			}
			names = append(names, r.Alert)
			if _, err := parser.ParseExpr(r.Expr); err != nil {
				t.Errorf("%s: %v", r.Alert, err)
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			for _, a := range []string{"summary", "description", "runbook_url"} {
				if strings.TrimSpace(r.Annotations[a]) == "" {
					t.Errorf("%s has no %s", r.Alert, a)
				}
			}
			anchor, ok := strings.CutPrefix(r.Annotations["runbook_url"], runbookBase)
			if !ok || anchor != strings.ToLower(r.Alert) || !anchors[anchor] {
				t.Errorf("%s: runbook_url %s, want %s%s, a heading of docs/operations.md", r.Alert, r.Annotations["runbook_url"], runbookBase, strings.ToLower(r.Alert))
			}
		}
	}
	if !slices.Equal(names, alertNames) {
		t.Errorf("got alerts %v, want %v", names, alertNames)
	}
}

// markdownAnchors are the anchors GitHub gives the headings of a file.
func markdownAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	strip := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	anchors := map[string]bool{}
	for line := range strings.Lines(string(data)) {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimSpace(strings.TrimLeft(h, "#"))
			anchors[strings.ReplaceAll(strip.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
		}
	}
	return anchors
}

// A dashboard is the part of grafana/grpc-jsonrpc-bridge.json the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		ID         int                      `json:"id"`
		Type       string                   `json:"type"`
		Title      string                   `json:"title"`
		Datasource *datasource              `json:"datasource"`
		GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
		Targets    []struct {
			Expr       string      `json:"expr"`
			RefID      string      `json:"refId"`
			Datasource *datasource `json:"datasource"`
		} `json:"targets"`
	} `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return d
}

// grafanaVars are Grafana's variables in a query: $__rate_interval and
// the like become a duration, the dashboard's own a value.
var (
	grafanaIntervals = regexp.MustCompile(`\$__(rate_interval|interval|range)\b`)
	grafanaVars      = regexp.MustCompile(`\$\{?\w+\}?`)
	labelValues      = regexp.MustCompile(`^label_values\((.*),\s*(\w+)\)$`)
)

// promQL is a query of the dashboard as Prometheus receives it.
func promQL(q string) string {
	return grafanaVars.ReplaceAllString(grafanaIntervals.ReplaceAllString(q, "5m"), "x")
}

// A query is one PromQL expression of the dashboard or the rules.
type query struct {
	where string
	expr  parser.Expr
}

// dashboardQueries parses every query of the dashboard: each target, and
// each variable's label_values(SELECTOR, LABEL).
func dashboardQueries(t *testing.T, d dashboard) []query {
	t.Helper()
	var qs []query
	add := func(where, text string) {
		e, err := parser.ParseExpr(promQL(text))
		if err != nil {
			t.Errorf("%s: %q: %v", where, text, err)
			return
		}
		qs = append(qs, query{where, e})
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			t.Errorf("variable %s: %v", v.Name, err)
			continue
		}
		m := labelValues.FindStringSubmatch(q.Query)
		if m == nil {
			t.Errorf("variable %s: query %q, want label_values(SELECTOR, LABEL)", v.Name, q.Query)
			continue
		}
		add("variable "+v.Name, m[1])
	}
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			add(fmt.Sprintf("panel %q target %s", p.Title, tg.RefID), tg.Expr)
		}
	}
	return qs
}

func ruleQueries(t *testing.T) []query {
	t.Helper()
	var qs []query
	for _, g := range loadRules(t).Groups {
		for _, r := range g.Rules {
			e, err := parser.ParseExpr(r.Expr)
			if err != nil {
				t.Errorf("%s: %v", r.Alert, err)
				continue
			}
			qs = append(qs, query{"alert " + r.Alert, e})
		}
	}
	return qs
}

// dashboardPanels are the panels issue 31 asks for, by title.
var dashboardPanels = []string{
	"Calls a second by method", "Calls a second by code", "Error ratio", "Latency", "Calls in flight",
	"429s by reason", "Backend addresses by state", "Ejections", "Rate limit store", "Authentication failures by reason",
}

// TestDashboard: every query parses as PromQL; the dashboard is templated
// on the data source, the namespace and the pod, and every selector of
// every panel follows the namespace and pod variables.
func TestDashboard(t *testing.T) {
	d := loadDashboard(t)
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: want both", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
		if v.Type == "query" && (v.Datasource == nil || v.Datasource.UID != "${datasource}") {
			t.Errorf("variable %s queries %+v, want ${datasource}", v.Name, v.Datasource)
		}
	}
	if vars["datasource"] != "datasource" || vars["namespace"] != "query" || vars["pod"] != "query" {
		t.Errorf("got variables %v, want datasource (a data source), namespace and pod", vars)
	}
	ids := map[int]bool{}
	var titles []string
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if g := p.GridPos; g.W <= 0 || g.X < 0 || g.X+g.W > 24 || g.H <= 0 {
			t.Errorf("panel %q: gridPos %+v outside the 24 columns", p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 || p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: %d targets on %+v, want some on ${datasource}", p.Title, len(p.Targets), p.Datasource)
		}
		for _, tg := range p.Targets {
			e, err := parser.ParseExpr(promQL(tg.Expr))
			if err != nil {
				continue // reported by dashboardQueries
			}
			parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
				vs, ok := n.(*parser.VectorSelector)
				if !ok {
					return nil
				}
				if !strings.Contains(tg.Expr, vs.Name+`{namespace=~"$namespace", pod=~"$pod"`) {
					t.Errorf("panel %q: %s does not select namespace=~\"$namespace\", pod=~\"$pod\"", p.Title, vs.Name)
				}
				return nil
			})
		}
	}
	for _, want := range dashboardPanels {
		if !slices.Contains(titles, want) {
			t.Errorf("no panel %q", want)
		}
	}
	if len(dashboardQueries(t, d)) == 0 {
		t.Fatal("no queries")
	}
}

// targetLabels are added by Prometheus at scrape time, never exposed.
var targetLabels = []string{"namespace", "pod", "job", "instance", "service", "container", "endpoint"}

// A use is what a query needs of one metric: the label names it groups
// or matches by, and its label matchers.
type use struct {
	labels   map[string]bool
	matchers []*labels.Matcher
	where    []string
}

// metricUses collects what the queries use of each metric.
func metricUses(qs []query) map[string]*use {
	uses := map[string]*use{}
	for _, q := range qs {
		var grouping []string
		parser.Inspect(q.expr, func(n parser.Node, path []parser.Node) error {
			switch n := n.(type) {
			case *parser.AggregateExpr:
				grouping = append(grouping, n.Grouping...)
			case *parser.VectorSelector:
				u := uses[n.Name]
				if u == nil {
					u = &use{labels: map[string]bool{}}
					uses[n.Name] = u
				}
				u.where = append(u.where, q.where)
				for _, m := range n.LabelMatchers {
					if m.Name == model.MetricNameLabel || slices.Contains(targetLabels, m.Name) {
						continue
					}
					u.labels[m.Name] = true
					u.matchers = append(u.matchers, m)
				}
				// The aggregations around the selector group by its labels.
				for _, p := range path {
					if a, ok := p.(*parser.AggregateExpr); ok {
						for _, l := range a.Grouping {
							if !slices.Contains(targetLabels, l) {
								u.labels[l] = true
							}
						}
					}
				}
			}
			return nil
		})
	}
	return uses
}

// TestMetricsOnBridge: every metric the dashboard and the rules use, with
// every label they group or match by and a series for each of their
// label matchers, is on the /metrics of a running bridge after a few
// calls, errors, 401s and 429s.
func TestMetricsOnBridge(t *testing.T) {
	families := scrapeBusyBridge(t)
	uses := metricUses(append(dashboardQueries(t, loadDashboard(t)), ruleQueries(t)...))
	for name, u := range uses {
		series := exposedSeries(families, name)
		if series == nil {
			t.Errorf("%s: %s", name, fmt.Sprintf("not on /metrics, used by %s", strings.Join(u.where, ", ")))
			continue
		}
		for l := range u.labels {
			if !slices.ContainsFunc(series, func(s map[string]string) bool { _, ok := s[l]; return ok }) {
				t.Errorf("%s has no label %s, which %s use", name, l, strings.Join(u.where, ", "))
			}
		}
		for _, m := range u.matchers {
			if m.Type == labels.MatchNotEqual || m.Type == labels.MatchNotRegexp {
				continue
			}
			if !slices.ContainsFunc(series, func(s map[string]string) bool { return m.Matches(s[m.Name]) }) {
				t.Errorf("%s{%s}: no series on /metrics matches it", name, m)
			}
		}
	}
	for _, want := range []string{"jsonrpc_bridge_calls_total", "jsonrpc_bridge_call_duration_seconds_bucket",
		"jsonrpc_bridge_requests_refused_total", "jsonrpc_bridge_backend_addresses", "jsonrpc_bridge_rate_limit_store_up"} {
		if uses[want] == nil {
			t.Errorf("neither the dashboard nor the rules use %s", want)
		}
	}
}

// exposedSeries are the label sets of the series of name on /metrics;
// nil if there is none.
func exposedSeries(series map[string][]map[string]string, name string) []map[string]string {
	if s, ok := series[name]; ok {
		return s
	}
	return nil
}

// failCall fails with code 13 (or 14 on the failing address).
const failCall = `{"jsonrpc":"2.0","id":2,"method":"test.v1.TestService.Fail","params":{"code":13,"message":"boom"}}`

// scrapeBusyBridge runs a bridge with authentication, a rate limit shared
// through a real redis-server, and a backend of two addresses, one of
// which fails every call with UNAVAILABLE; sends it calls that succeed,
// fail, are refused as unauthenticated and as over the rate limit; and
// returns its /metrics as series by name (a histogram's as name_bucket,
// name_sum and name_count), each a set of labels. The failing address is
// ejected after one failure, and a JWT is refused too.
func scrapeBusyBridge(t *testing.T) map[string][]map[string]string {
	t.Helper()
	store := redistest.Start(t, "")
	args := []string{"--backend", "ipv4:" + startBackend(t) + "," + startUnavailable(t), "--balance", "round_robin",
		"--auth-file", identities(t, token), "--rate-limit", "20", "--rate-burst", "20",
		"--rate-limit-store", store.URL(), "--access-log=false"}
	args = append(args, "--outlier-consecutive-failures", "1")
	jwks := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(jwks, []byte(testJWKS(t)), 0o600); err != nil {
		t.Fatal(err)
	}
	args = append(args, "--auth-jwt-issuer", "https://issuer.test", "--auth-jwt-audiences", "bridge", "--auth-jwt-jwks-file", jwks)
	jwt := unsignedJWT(`{"alg":"ES256","kid":"not-in-the-key-set","typ":"JWT"}`,
		fmt.Sprintf(`{"iss":"https://issuer.test","aud":"bridge","sub":"x","exp":%d}`, time.Now().Add(time.Hour).Unix()))
	r := startReplicas(t, 1, args...)[0]
	url := "http://" + r.addr() + "/"
	team := http.Header{"Authorization": {"Bearer " + token}}
	unavailable := false // a call reached the failing address (which outlier detection then ejects)
	for _, body := range []string{echoCall, failCall} {
		got, reply := post(t, url, body, team)
		if got != http.StatusOK {
			t.Fatalf("a call answered HTTP %d, want 200", got)
		}
		unavailable = unavailable || strings.Contains(reply, `"code":14`)
	}
	// Round robin sends one of the next calls to the failing address,
	// unless one of those two went there already.
	for i := 0; !unavailable; i++ {
		if _, reply := post(t, url, echoCall, team); strings.Contains(reply, `"code":14`) {
			break
		}
		if i == 10 {
			t.Fatal("10 calls over two addresses in turn: none reached the one failing with UNAVAILABLE")
		}
	}
	if got, _ := post(t, url, echoCall, http.Header{"Authorization": {"Bearer wrong-token"}}); got != http.StatusUnauthorized {
		t.Errorf("a wrong token: HTTP %d, want 401", got)
	}
	if got, _ := post(t, url, echoCall, http.Header{"Authorization": {"Bearer " + jwt}}); got != http.StatusUnauthorized {
		t.Errorf("a JWT signed by no key of the set: HTTP %d, want 401", got)
	}
	limited := false
	for range 100 {
		if got, _ := post(t, url, echoCall, team); got == http.StatusTooManyRequests {
			limited = true
			break
		}
	}
	if !limited {
		t.Errorf("100 calls at once past a burst of 20: none answered 429")
	}

	resp, err := http.Get("http://" + r.addr() + metricsPath)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics: %v", err)
	}
	series := map[string][]map[string]string{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			ls := map[string]string{}
			for _, l := range m.GetLabel() {
				ls[l.GetName()] = l.GetValue()
			}
			if f.GetType() != dto.MetricType_HISTOGRAM {
				series[name] = append(series[name], ls)
				continue
			}
			series[name+"_sum"] = append(series[name+"_sum"], ls)
			series[name+"_count"] = append(series[name+"_count"], ls)
			for _, b := range m.GetHistogram().GetBucket() {
				bl := maps.Clone(ls)
				bl["le"] = strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)
				series[name+"_bucket"] = append(series[name+"_bucket"], bl)
			}
		}
	}
	return series
}

// startUnavailable is a gRPC server on loopback that answers every call
// with UNAVAILABLE, as a pod whose dependency is down.
func startUnavailable(t *testing.T) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.UnknownServiceHandler(func(any, grpc.ServerStream) error {
		return status.Error(codes.Unavailable, "this pod's dependency is down")
	}))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// unsignedJWT is a JWS compact token of header and payload with a
// signature no key made.
func unsignedJWT(header, payload string) string {
	b64 := base64.RawURLEncoding.EncodeToString
	return b64([]byte(header)) + "." + b64([]byte(payload)) + "." + b64(make([]byte, 64))
}

// post posts body to url with header and returns the status and the
// reply.
func post(t *testing.T, url, body string, header http.Header) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = header.Clone()
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	reply, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(reply)
}
