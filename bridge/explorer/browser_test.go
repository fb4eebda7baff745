package explorer_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/explorer"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
	testv1 "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/v1"
	bridgereflect "github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/reflect"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/backend"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/internal/browsertest"
)

// screenshotsEnv names the directory the browser test writes its
// screenshots to, relative to the repository's root (docs/explorer when
// they are refreshed); unset, none are taken.
const screenshotsEnv = "EXPLORER_SCREENSHOTS"

// env is a bridge with the explorer in front of a real gRPC backend (the
// test and demo services, with reflection) on loopback TCP.
type env struct {
	url     string // http://127.0.0.1:PORT
	backend *testv1.Server

	mu   sync.Mutex
	seen seenCall // the last unary call the backend received
}

// seenCall is what the backend saw of a unary call.
type seenCall struct {
	method   string
	md       metadata.MD
	deadline time.Duration // left when it arrived; 0 without one
}

func (e *env) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	c := seenCall{method: info.FullMethod, md: md}
	if d, ok := ctx.Deadline(); ok {
		c.deadline = time.Until(d)
	}
	e.mu.Lock()
	e.seen = c
	e.mu.Unlock()
	return h(ctx, req)
}

func (e *env) last() seenCall {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen
}

// testProtoset describes the test and demo services with their comments,
// which server reflection does not carry.
const testProtoset = "../../proto/testpb/test.protoset"

// newEnv serves the backend's services as reflection describes them;
// newEnvProtoset as a descriptor set does.
func newEnv(t *testing.T, opts bridge.Options) *env { return newEnvFrom(t, opts, "") }

func newEnvProtoset(t *testing.T, opts bridge.Options) *env {
	return newEnvFrom(t, opts, testProtoset)
}

func newEnvFrom(t *testing.T, opts bridge.Options, protoset string) *env {
	t.Helper()
	e := &env{}
	ts := testv1.NewServer()
	conn := testserver.Start(t, testserver.Options{
		Addr:     testserver.Loopback,
		Services: []testserver.Service{testserver.Test(ts), testserver.Notes, testserver.Greeter, testserver.Ops},
		Server:   []grpc.ServerOption{grpc.UnaryInterceptor(e.intercept)},
		Dial:     backend.DialOptions(),
	}).Conn()
	srv := bridge.New(conn, opts)
	if protoset != "" {
		reg, err := bridgereflect.ReadProtoset(protoset)
		if err != nil {
			t.Fatal(err)
		}
		srv.Update(reg)
	} else {
		reg, err := bridgereflect.Discover(context.Background(), conn)
		if err != nil {
			t.Fatal(err)
		}
		srv.Update(reg)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	e.url, e.backend = hs.URL, ts
	return e
}

// post calls the bridge from Go, as another client would.
func (e *env) post(t *testing.T, token, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.url+"/", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// browser starts a headless Chromium (see browsertest.Start) with a
// window the size of the screenshots, and returns a context of one of
// its tabs.
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, 3*time.Minute, chromedp.WindowSize(1280, 900), chromedp.Flag("hide-scrollbars", true))
}

// traffic is what the tab did on the network and in its console.
type traffic struct {
	mu         sync.Mutex
	requests   []request // every HTTP request, with the page it was for
	sockets    []string  // every WebSocket URL
	console    []string  // warnings and errors: CSP violations, failed loads
	exceptions []string
}

type request struct{ url, document string }

func watch(t *testing.T, ctx context.Context) *traffic {
	t.Helper()
	tr := &traffic{}
	err := chromedp.Listen(ctx, func(ev any) {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			tr.requests = append(tr.requests, request{ev.Request.URL, ev.DocumentURL})
		case *network.EventWebSocketCreated:
			tr.sockets = append(tr.sockets, ev.URL)
		case *log.EventEntryAdded:
			if ev.Entry.Level == log.EntryLevelError || ev.Entry.Level == log.EntryLevelWarning {
				tr.console = append(tr.console, string(ev.Entry.Source)+": "+ev.Entry.Text+" "+ev.Entry.URL)
			}
		case *runtime.EventExceptionThrown:
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			tr.exceptions = append(tr.exceptions, msg)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func (tr *traffic) take() (requests []request, sockets, console, exceptions []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	requests, sockets, console, exceptions = tr.requests, tr.sockets, tr.console, tr.exceptions
	tr.requests, tr.sockets, tr.console, tr.exceptions = nil, nil, nil, nil
	return
}

// page drives the explorer in one tab.
type page struct {
	t   *testing.T
	ctx context.Context
}

func (p page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatal(err)
	}
}

// eval runs a JavaScript expression and returns its string value.
func (p page) eval(expr string) string {
	p.t.Helper()
	v, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](`(() => { const v = (`+expr+`); return typeof v === "string" ? v : JSON.stringify(v); })()`))
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
	return v
}

// wait polls the expression until it is true.
func (p page) wait(what, expr string) {
	p.t.Helper()
	if _, err := chromedp.Run(p.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		p.t.Fatalf("waiting for %s (%s): %v\nstatus: %s\nreply: %s\nerrors: %s", what, expr, err,
			p.eval(text("status")), p.eval(text("reply")), p.eval(text("params-errors")))
	}
}

func (p page) open(url string) {
	p.t.Helper()
	p.do(chromedp.Navigate(url + "/explorer"))
	p.wait("the list", `document.querySelector('[data-role="list-status"]').textContent !== "Loading…"`)
}

func sel(role string) string { return `[data-role="` + role + `"]` }

func text(role string) string {
	return `((document.querySelector('` + sel(role) + `') || {}).textContent || "")`
}

func (p page) click(css string) {
	p.t.Helper()
	p.do(chromedp.Click(chromedp.CSS(css)))
}

// fill sets a control's value as typing would, with an input event.
func (p page) fill(role, value string) {
	p.t.Helper()
	v, _ := json.Marshal(value)
	p.eval(`(() => { const e = document.querySelector('` + sel(role) + `'); e.value = ` + string(v) + `;
		e.dispatchEvent(new Event("input", {bubbles: true})); return ""; })()`)
}

func (p page) method(name string) {
	p.t.Helper()
	p.click(`[data-method="` + name + `"]`)
	p.wait("the method "+name, `document.querySelector('`+sel("method-name")+`').textContent === "`+name+`"`)
}

// send clicks send and waits for a new reply.
func (p page) send() string {
	p.t.Helper()
	p.eval(`document.querySelector('` + sel("reply") + `').textContent = "", ""`)
	p.click(sel("send"))
	p.wait("the reply", text("reply")+` !== ""`)
	return p.eval(text("reply"))
}

func (p page) screenshot(name string) {
	p.t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join("..", "..", dir) // relative to the repository's root
	}
	p.eval(`window.scrollTo(0, 0), ""`)
	b, err := chromedp.Run(p.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("%q is not a JSON object: %v", s, err)
	}
	return v
}

func origin(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return ""
	}
	return p.Scheme + "://" + p.Host
}

// TestExplorer drives the explorer in headless Chromium against real
// bridges and backends: the list, calls, errors, validation, streams,
// curl, history, keyboard, authentication and the page's network.
func TestExplorer(t *testing.T) {
	ctx := browser(t)
	tr := watch(t, ctx)
	p := page{t: t, ctx: ctx}
	playground, elsewhere := pageServer(t), pageServer(t)
	e := newEnvProtoset(t, bridge.Options{Explorer: explorer.Handler(), CORSOrigins: []string{playground}})

	t.Run("list", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.open(e.url)
		for _, svc := range []string{"helloworld.Greeter", "demo.v1.Notes", "test.v1.TestService"} {
			if got := p.eval(`document.querySelectorAll('[data-service="` + svc + `"] [data-method]').length`); got == "0" {
				t.Errorf("no methods of %s in the list", svc)
			}
		}
		p.fill("search", "notes watch")
		visible := p.eval(`[...document.querySelectorAll("[data-method]")].filter(b => b.offsetParent !== null).map(b => b.dataset.method).join(",")`)
		if visible != "demo.v1.Notes.WatchNotes" {
			t.Errorf("searching \"notes watch\" shows %q, want demo.v1.Notes.WatchNotes only", visible)
		}
		p.fill("search", "errorinfo") // a word of GetNote's description only
		visible = p.eval(`[...document.querySelectorAll("[data-method]")].filter(b => b.offsetParent !== null).map(b => b.dataset.method).join(",")`)
		if visible != "demo.v1.Notes.GetNote" {
			t.Errorf("searching \"errorinfo\" shows %q, want demo.v1.Notes.GetNote only", visible)
		}
		p.fill("search", "")
		p.method("demo.v1.Notes.CreateNote")
		if d := p.eval(text("method-description")); !strings.HasPrefix(d, "CreateNote stores a note") {
			t.Errorf("CreateNote's description is %q, want its proto comment", d)
		}
		if ty := p.eval(`document.querySelector('tr[data-field="note"] td:nth-child(2)').textContent`); ty != "demo.v1.Note" {
			t.Errorf("the type of CreateNote's note is %q, want demo.v1.Note", ty)
		}
		var schemas struct {
			Schema      map[string]any
			Definitions map[string]map[string]any
		}
		for _, r := range []string{"params-schema", "result-schema"} {
			if err := json.Unmarshal([]byte(p.eval(text(r))), &schemas); err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			name := map[string]string{"params-schema": "demo.v1.Note-input", "result-schema": "demo.v1.Note"}[r]
			if schemas.Definitions[name]["properties"] == nil {
				t.Errorf("CreateNote's %s lacks the schema of %s: %v", r, name, schemas)
			}
		}
		if errs := p.eval(text("method-errors")); !strings.Contains(errs, "-32602 INVALID_PARAMS") || !strings.Contains(errs, "5 NOT_FOUND") {
			t.Errorf("CreateNote's errors are %q, want -32602 and the gRPC codes", errs)
		}
		p.screenshot("methods.png")
		// A link names a method.
		p.do(chromedp.Navigate(e.url + "/explorer#m=demo.v1.Notes.GetNote"))
		p.wait("the linked method", text("method-name")+` === "demo.v1.Notes.GetNote"`)
	})

	t.Run("unary", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.method("helloworld.Greeter.SayHello")
		if got := p.eval(`JSON.stringify(JSON.parse(document.querySelector('` + sel("params") + `').value))`); got != `{"name":""}` {
			t.Errorf("SayHello's example params are %s, want {\"name\":\"\"}", got)
		}
		p.fill("params", `{"name": "Ada"}`)
		reply := decodeJSON(t, p.send())
		if r, _ := reply["result"].(map[string]any); r["message"] != "Hello, Ada!" {
			t.Errorf("the reply is %v, want the greeting of Ada", reply)
		}
		if s := p.eval(text("status")); !strings.HasPrefix(s, "HTTP 200") || !strings.Contains(s, " ms") {
			t.Errorf("the status is %q, want HTTP 200 and the time", s)
		}
		if d := p.eval(text("method-description")); d == "" && p.eval(text("params-table")) == "" {
			t.Error("the method shows neither description nor params")
		}
		p.screenshot("call.png")
	})

	t.Run("example", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.method("test.v1.TestService.Echo")
		ex := decodeJSON(t, p.eval(`document.querySelector('`+sel("params")+`').value`))
		want := map[string]any{"fInt64": "0", "fUint64": "0", "fInt32": 0.0, "fEnum": "COLOR_UNSPECIFIED", "fBool": false,
			"fString": "", "wktTimestamp": "1970-01-01T00:00:00Z", "wktDuration": "0s", "rInt64": []any{"0"}, "rEnum": []any{"COLOR_UNSPECIFIED"}}
		for k, v := range want {
			if got, _ := json.Marshal(ex[k]); string(got) != mustJSON(v) {
				t.Errorf("example %s = %s, want %s", k, got, mustJSON(v))
			}
		}
		for _, k := range []string{"f_int64", "oMessage"} { // a proto-name alias; the second member of a oneof
			if _, ok := ex[k]; ok {
				t.Errorf("the example has %s", k)
			}
		}
		if _, ok := ex["oString"]; !ok {
			t.Error("the example lacks the oneof's first member oString")
		}
		// The example is valid: the bridge takes it as it is.
		reply := decodeJSON(t, p.send())
		if reply["error"] != nil {
			t.Errorf("sending Echo's example: %v", reply)
		}
	})

	t.Run("validation", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.method("test.v1.TestService.Count")
		cases := []struct{ params, field, message string }{
			{`{"key": 5}`, "key", "want a string"},
			{`{"key": "v", "kee": 1}`, "kee", "unknown field"},
			{`{"key": "v",}`, "", "not JSON"},
		}
		for _, c := range cases {
			p.fill("params", c.params)
			got := p.eval(`[...document.querySelectorAll('[data-role="field-error"]')].map(e => e.dataset.field + "|" + e.textContent).join("\n")`)
			if !strings.Contains(got, c.field+"|") || !strings.Contains(got, c.message) {
				t.Errorf("%s: the field errors are %q, want %s at %q", c.params, got, c.message, c.field)
			}
			if c.field == "key" && p.eval(`document.querySelector('tr[data-field="key"]').classList.contains("invalid")`) != "true" {
				t.Errorf("%s: the params table does not mark key", c.params)
			}
			p.click(sel("send"))
			p.wait("the refusal", text("status")+`.startsWith("Not sent")`)
		}
		// Clicking an error selects its field in the editor.
		p.fill("params", `{"key": "v", "kee": 1}`)
		p.click(`[data-role="field-error"][data-field="kee"] button`)
		if got := p.eval(`(() => { const e = document.querySelector('` + sel("params") + `'); return e.value.slice(e.selectionStart, e.selectionEnd); })()`); got != `"kee": 1` {
			t.Errorf("clicking the error of kee selects %q", got)
		}
		// So do a bad timeout and bad metadata.
		p.fill("params", `{"key": "v"}`)
		for _, c := range []struct{ role, value, want string }{
			{"timeout", "5 parsecs", "Not sent: timeout: want a whole number and a unit"},
			{"metadata", "no colon here", "Not sent: metadata: metadata line 1: want key: value"},
		} {
			p.fill(c.role, c.value)
			p.click(sel("send"))
			p.wait("the refusal", text("status")+`.startsWith("Not sent")`)
			if s := p.eval(text("status")); !strings.HasPrefix(s, c.want) || p.eval(`document.querySelector('`+sel(c.role)+`').getAttribute("aria-invalid")`) != "true" {
				t.Errorf("%s %q: the status is %q, want %q and the field marked", c.role, c.value, s, c.want)
			}
			p.fill(c.role, "")
		}
		if n := e.backend.Calls("v"); n != 0 {
			t.Errorf("invalid params reached the backend: Count(v) ran %d times", n)
		}
		// Fixed, it is sent.
		p.fill("params", `{"key": "v"}`)
		if got := p.eval(`document.querySelectorAll('[data-role="field-error"]').length`); got != "0" {
			t.Errorf("valid params still show %s errors", got)
		}
		p.send()
		if n := e.backend.Calls("v"); n != 1 {
			t.Errorf("Count(v) ran %d times, want 1", n)
		}
	})

	t.Run("errors", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		cases := []struct{ method, params, code, status, detail string }{
			{"demo.v1.Notes.GetNote", `{"id": "nope"}`, "5", "NOT_FOUND", "google.rpc.ErrorInfo"},
			{"test.v1.TestService.Fail", `{"code": 7, "message": "no"}`, "7", "PERMISSION_DENIED", ""},
			// The range of a 64-bit integer in a string is the bridge's to check.
			{"test.v1.TestService.Echo", `{"fInt64": "9223372036854775808"}`, "-32602", "INVALID_PARAMS", "fInt64"},
		}
		for _, c := range cases {
			p.method(c.method)
			p.fill("params", c.params)
			p.send()
			code, status, details := p.eval(text("error-code")), p.eval(text("error-status")), p.eval(text("error-details"))
			if code != c.code || status != c.status || !strings.Contains(details, c.detail) {
				t.Errorf("%s %s: shows code %q %q, details %q; want %s %s with %s", c.method, c.params, code, status, details, c.code, c.status, c.detail)
			}
			if p.eval(`document.querySelector('`+sel("error")+`').hidden`) != "false" {
				t.Errorf("%s: the error is hidden", c.method)
			}
			if c.code == "5" {
				p.screenshot("error.png")
			}
		}
	})

	t.Run("server-stream", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.method("test.v1.TestService.ServerStream")
		p.fill("params", `{"count": 5}`)
		p.send()
		p.wait("the end", `document.querySelector('`+sel("stream-end")+`').textContent !== ""`)
		seqs := p.eval(`[...document.querySelectorAll('[data-role="stream-message"]')].map(li => JSON.parse(li.textContent).seq).join(",")`)
		if seqs != "1,2,3,4,5" {
			t.Errorf("the stream's messages are %q, want 1,2,3,4,5 in order", seqs)
		}
		// A long stream keeps the last 500 on the page, numbered as received.
		p.fill("params", `{"count": 600}`)
		p.send()
		p.wait("the end", `document.querySelector('`+sel("stream-end")+`').textContent !== ""`)
		shown := p.eval(`(() => { const l = document.querySelector('` + sel("stream-messages") + `');
			return l.children.length + " from " + l.start + ", first seq " + JSON.parse(l.firstElementChild.textContent).seq; })()`)
		if shown != "500 from 101, first seq 101" || !strings.Contains(p.eval(text("stream-state")), "600 messages") {
			t.Errorf("a stream of 600 shows %s (%s), want the last 500 from 101", shown, p.eval(text("stream-state")))
		}
		// An error after two messages: both shown, then the status.
		p.fill("params", `{"count": 5, "failCode": 9, "failAfter": 2}`)
		p.send()
		p.wait("the end", `document.querySelector('`+sel("stream-end")+`').textContent !== ""`)
		if n := p.eval(`document.querySelectorAll('[data-role="stream-message"]').length`); n != "2" {
			t.Errorf("a stream failing after 2 messages shows %s", n)
		}
		if c, s := p.eval(text("error-code")), p.eval(text("error-status")); c != "9" || s != "FAILED_PRECONDITION" {
			t.Errorf("the failed stream shows %s %s, want 9 FAILED_PRECONDITION", c, s)
		}
	})

	t.Run("live-stream", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.method("demo.v1.Notes.WatchNotes")
		p.fill("params", `{"tags": ["live"], "follow": true}`)
		p.send()
		p.wait("the stream", text("stream-state")+`.includes("open")`)
		for i, title := range []string{"First", "Second"} {
			e.post(t, "", `{"jsonrpc":"2.0","id":1,"method":"demo.v1.Notes.CreateNote","params":{"note":{"title":"`+title+`","tags":["live"]}}}`)
			p.wait("message "+title, fmt.Sprintf(`document.querySelectorAll('[data-role="stream-message"]').length === %d`, i+1))
		}
		titles := p.eval(`[...document.querySelectorAll('[data-role="stream-message"]')].map(li => JSON.parse(li.textContent).title).join(",")`)
		if titles != "First,Second" {
			t.Errorf("the live stream shows %q, want First,Second", titles)
		}
		if !strings.Contains(p.eval(text("stream-state")), "open") {
			t.Errorf("the following stream is %q, want open", p.eval(text("stream-state")))
		}
		p.screenshot("stream.png")
		p.click(sel("stream-cancel"))
		p.wait("the end", `document.querySelector('`+sel("stream-end")+`').textContent !== ""`)
		if s := p.eval(text("error-status")); s != "CANCELLED" {
			t.Errorf("a cancelled stream shows %q, want CANCELLED", s)
		}
	})

	// With metadata (or a timeout) a server stream cannot go on the
	// WebSocket: it goes over POST / with its messages live (Accept:
	// text/event-stream), each shown as it comes.
	t.Run("live-stream-over-post", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.method("demo.v1.Notes.WatchNotes")
		p.fill("metadata", "tenant: t1")
		p.fill("timeout", "1m")
		defer p.fill("timeout", "")
		defer p.fill("metadata", "")
		if help := p.eval(text("transport-help")); !strings.Contains(help, "POST /") || !strings.Contains(help, "live") {
			t.Errorf("the page says %q, want that the stream goes over POST /, live", help)
		}
		p.fill("params", `{"tags": ["post-live"], "follow": true}`)
		p.click(sel("send"))
		p.wait("the stream", text("stream-state")+`.includes("open over POST /")`)
		for i, title := range []string{"First", "Second"} {
			e.post(t, "", `{"jsonrpc":"2.0","id":1,"method":"demo.v1.Notes.CreateNote","params":{"note":{"title":"`+title+`","tags":["post-live"]}}}`)
			p.wait("message "+title, fmt.Sprintf(`document.querySelectorAll('[data-role="stream-message"]').length === %d`, i+1))
		}
		titles := p.eval(`[...document.querySelectorAll('[data-role="stream-message"]')].map(li => JSON.parse(li.textContent).title).join(",")`)
		if titles != "First,Second" || !strings.Contains(p.eval(text("stream-state")), "open") {
			t.Errorf("the live stream shows %q (%s), want First,Second and open", titles, p.eval(text("stream-state")))
		}
		p.click(sel("stream-cancel"))
		p.wait("the cancel", text("stream-state")+`.includes("cancelled after 2 messages")`)

		// A stream that ends: its messages, then the reply.
		p.fill("params", `{"tags": ["post-live"]}`)
		reply := decodeJSON(t, p.send())
		if r, _ := reply["result"].(map[string]any); r["messages"] != 2.0 || !strings.Contains(p.eval(text("stream-state")), "ended over POST /: 2 messages") {
			t.Errorf("the ended stream shows %v (%s), want the reply of 2 messages", reply, p.eval(text("stream-state")))
		}
	})

	t.Run("client-stream", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.method("demo.v1.Notes.ImportNotes")
		if got := p.eval(`Array.isArray(JSON.parse(document.querySelector('` + sel("params") + `').value))`); got != "true" {
			t.Errorf("ImportNotes' example params are not an array")
		}
		p.fill("params", `[{"note": {"title": "Milk"}}, {"note": {"title": "Eggs"}}]`)
		p.send()
		p.wait("two sent", text("stream-state")+`.includes("2 sent")`)
		p.fill("params", `{"note": {"title": "Tea"}}`)
		p.click(sel("stream-send"))
		p.wait("one more sent", text("stream-state")+`.includes("1 sent")`)
		if n := p.eval(`document.querySelectorAll('[data-role="stream-message"]').length`); n != "0" {
			t.Errorf("a client stream answered before its close: %s messages", n)
		}
		p.click(sel("stream-close"))
		p.wait("the end", `document.querySelector('`+sel("stream-end")+`').textContent !== ""`)
		msg := decodeJSON(t, p.eval(`document.querySelector('[data-role="stream-message"]').textContent`))
		if msg["count"] != "3" {
			t.Errorf("ImportNotes answered %v, want 3 notes", msg)
		}
		if p.eval(`document.querySelector('`+sel("error")+`').hidden`) != "true" {
			t.Errorf("the client stream shows an error: %s", p.eval(text("error")))
		}

		// Bidirectional: the answer arrives while the stream is open.
		p.method("demo.v1.Notes.TagNotes")
		p.fill("params", `[{"id": "n1", "tag": "pinned"}]`)
		p.send()
		p.wait("the answer", `document.querySelectorAll('[data-role="stream-message"]').length === 1`)
		if !strings.Contains(p.eval(text("stream-state")), "open") {
			t.Errorf("the bidi stream is %q after one answer, want open", p.eval(text("stream-state")))
		}
		p.click(sel("stream-close"))
		p.wait("the end", `document.querySelector('`+sel("stream-end")+`').textContent !== ""`)
	})

	t.Run("curl", func(t *testing.T) {
		if _, err := exec.LookPath("curl"); err != nil {
			t.Skip("curl is not installed")
		}
		p := page{t: t, ctx: ctx}
		p.method("helloworld.Greeter.SayHello")
		p.fill("params", `{"name": "O'Hara"}`)
		p.fill("metadata", "tenant: t1")
		p.fill("timeout", "5s")
		// Sent from the page, the metadata and the timeout reach the backend.
		p.send()
		c := e.last()
		if c.method != "/helloworld.Greeter/SayHello" || strings.Join(c.md.Get("tenant"), ",") != "t1" || c.deadline <= 0 || c.deadline > 5*time.Second {
			t.Errorf("the backend saw %s with tenant %v and %s left, want SayHello, t1 and at most 5s", c.method, c.md.Get("tenant"), c.deadline)
		}
		p.click(sel("copy-curl"))
		cmd := p.eval(`document.querySelector('` + sel("curl") + `').value`)
		for _, want := range []string{"-H 'Grpc-Metadata-tenant: t1'", "-H 'Grpc-Timeout: 5S'", "-H 'Content-Type: application/json'", e.url + "/"} {
			if !strings.Contains(cmd, want) {
				t.Errorf("the curl command lacks %s:\n%s", want, cmd)
			}
		}
		sh := exec.Command("sh", "-c", cmd)
		sh.Env = []string{"PATH=" + os.Getenv("PATH")} // no proxy settings
		out, err := sh.Output()
		if err != nil {
			t.Fatalf("running %s: %v", cmd, err)
		}
		if r, _ := decodeJSON(t, string(out))["result"].(map[string]any); r["message"] != "Hello, O'Hara!" {
			t.Errorf("the curl command answered %s", out)
		}
		p.fill("metadata", "")
		p.fill("timeout", "")
	})

	t.Run("history", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.open(e.url) // a reload: the history is the browser's
		n := p.eval(`document.querySelectorAll('[data-role="history-entry"]').length`)
		if n == "0" {
			t.Fatal("no history after a reload")
		}
		stored := p.eval(`JSON.parse(localStorage.getItem("grpc-jsonrpc-bridge.explorer.history")).length`)
		if stored != n {
			t.Errorf("the page lists %s calls, localStorage holds %s", n, stored)
		}
		// Replay the greeting of Ada.
		idx := p.eval(`JSON.parse(localStorage.getItem("grpc-jsonrpc-bridge.explorer.history")).findIndex(e => e.params.includes("Ada"))`)
		if idx == "-1" {
			t.Fatal("the call of SayHello with Ada is not in the history")
		}
		p.eval(`document.querySelector('` + sel("reply") + `').textContent = "", ""`)
		p.click(`[data-role="history-entry"][data-index="` + idx + `"] [data-role="replay"]`)
		p.wait("the replayed reply", text("reply")+`.includes("Hello, Ada!")`)
		if got := p.eval(`document.querySelectorAll('[data-role="history-entry"]').length`); got == n && n != "50" {
			t.Errorf("the replay was not added to the history (%s entries)", got)
		}
		if strings.Contains(p.eval(`localStorage.getItem("grpc-jsonrpc-bridge.explorer.history")`), "token") {
			t.Error("the history stores tokens")
		}
	})

	t.Run("keyboard", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.method("helloworld.Greeter.SayHello")
		unlabelled := p.eval(`[...document.querySelectorAll("input, textarea, select")].filter(e => !e.labels.length && !e.getAttribute("aria-label")).map(e => e.dataset.role || e.id).join(",")`)
		if unlabelled != "" {
			t.Errorf("controls without a label: %s", unlabelled)
		}
		unnamed := p.eval(`[...document.querySelectorAll("button")].filter(b => !b.textContent.trim() && !b.getAttribute("aria-label")).length`)
		if unnamed != "0" {
			t.Errorf("%s buttons have no name", unnamed)
		}
		// Tab from the params reaches send.
		p.do(chromedp.Focus(chromedp.CSS(sel("params"))))
		reached := false
		for range 8 {
			p.do(chromedp.KeyEvent("\t"))
			if p.eval(`document.activeElement.dataset.role`) == "send" {
				reached = true
				break
			}
		}
		if !reached {
			t.Errorf("Tab from the params does not reach send (stopped at %s)", p.eval(`document.activeElement.outerHTML.slice(0, 80)`))
		}
		// Ctrl+Enter in the params sends.
		p.fill("params", `{"name": "Keys"}`)
		p.eval(`document.querySelector('` + sel("reply") + `').textContent = "", ""`)
		p.do(chromedp.Focus(chromedp.CSS(sel("params"))), chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
		p.wait("the reply to Ctrl+Enter", text("reply")+`.includes("Hello, Keys!")`)
		// Search and Enter pick a method.
		p.do(chromedp.Focus(chromedp.CSS(sel("search"))))
		p.fill("search", "GetCounter")
		p.do(chromedp.KeyEvent("\r"))
		p.wait("GetCounter", text("method-name")+` === "demo.v1.Notes.GetCounter"`)
		p.fill("search", "")
	})

	t.Run("csp", func(t *testing.T) {
		resp, err := http.Get(e.url + "/explorer")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		host := strings.TrimPrefix(e.url, "http://")
		want := "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self' ws://" + host +
			" wss://" + host + "; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
		if got := resp.Header.Get("Content-Security-Policy"); got != want {
			t.Errorf("Content-Security-Policy = %q, want %q", got, want)
		}
		tr.mu.Lock()
		console := append([]string(nil), tr.console...)
		tr.mu.Unlock()
		for _, c := range console {
			t.Errorf("the page logged: %s", c)
		}
	})

	a, err := bridge.NewAuth([]bridge.Identity{
		{Name: "admin", Tokens: []string{hashToken("admin-token-0123456789")}, Allow: []string{"*"}},
		{Name: "greeter", Tokens: []string{hashToken("greeter-token-0123456789")}, Allow: []string{"helloworld.*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	ea := newEnv(t, bridge.Options{Auth: a, Explorer: explorer.Handler()})

	t.Run("auth", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		p.open(ea.url)
		if s := p.eval(text("list-status")); !strings.Contains(s, "authentication is on") {
			t.Errorf("without a token the list says %q", s)
		}
		if n := p.eval(`document.querySelectorAll("[data-method]").length`); n != "0" {
			t.Errorf("without a token the list has %s methods", n)
		}
		load := func(token string) string {
			p.fill("token", token)
			p.eval(`document.querySelector('` + sel("list-status") + `').textContent = "Loading…", ""`)
			p.click(sel("load"))
			p.wait("the list", text("list-status")+` !== "Loading…"`)
			return p.eval(`[...document.querySelectorAll("[data-method]")].map(b => b.dataset.method).join(",")`)
		}
		if got := load("greeter-token-0123456789"); got != "helloworld.Greeter.SayHello" {
			t.Errorf("greeter's list is %q, want helloworld.Greeter.SayHello only", got)
		}
		p.method("helloworld.Greeter.SayHello")
		p.fill("params", `{"name": "Grace"}`)
		if r, _ := decodeJSON(t, p.send())["result"].(map[string]any); r["message"] != "Hello, Grace!" {
			t.Errorf("greeter's call: %s", p.eval(text("reply")))
		}
		if got := load("admin-token-0123456789"); !strings.Contains(got, "demo.v1.Notes.GetNote") || !strings.Contains(got, "test.v1.TestService.Echo") {
			t.Errorf("admin's list is %q, want every method", got)
		}
		// The token gates the calls: greeter may not call GetNote.
		p.method("demo.v1.Notes.GetNote")
		p.fill("params", `{"id": "n1"}`)
		p.fill("token", "greeter-token-0123456789")
		p.send()
		if c, s := p.eval(text("error-code")), p.eval(text("error-status")); c != "7" || s != "PERMISSION_DENIED" {
			t.Errorf("greeter calling GetNote shows %s %s, want 7 PERMISSION_DENIED", c, s)
		}
		p.fill("token", "wrong-token")
		p.send()
		if c, s, st := p.eval(text("error-code")), p.eval(text("error-status")), p.eval(text("status")); c != "16" || s != "UNAUTHENTICATED" || !strings.HasPrefix(st, "HTTP 401") {
			t.Errorf("a wrong token shows %s %s (%s), want 16 UNAUTHENTICATED, HTTP 401", c, s, st)
		}
		// With a token, streams go over the WebSocket: the page offers the
		// token as a subprotocol (a browser's WebSocket has no headers).
		p.fill("token", "admin-token-0123456789")
		p.method("demo.v1.Notes.WatchNotes")
		p.fill("params", `{"tags": ["intro"]}`)
		p.send()
		if n := p.eval(`document.querySelectorAll('[data-role="stream-message"]').length`); n != "1" {
			t.Errorf("WatchNotes with a token shows %s messages, want 1", n)
		}
		if help := p.eval(text("transport-help")); strings.Contains(help, "POST /") {
			t.Errorf("with a token alone the stream went over POST /: %q", help)
		}
		// The token gates streams too: greeter may not watch notes.
		p.fill("token", "greeter-token-0123456789")
		p.send()
		if c, s := p.eval(text("error-code")), p.eval(text("error-status")); c != "7" || s != "PERMISSION_DENIED" {
			t.Errorf("greeter watching notes shows %s %s, want 7 PERMISSION_DENIED", c, s)
		}
		// Metadata cannot go on a WebSocket: then the stream goes over
		// POST /, and the page says why.
		p.fill("token", "admin-token-0123456789")
		p.fill("metadata", "tenant: t1")
		p.send()
		if n := p.eval(`document.querySelectorAll('[data-role="stream-message"]').length`); n != "1" {
			t.Errorf("WatchNotes with metadata shows %s messages, want 1", n)
		}
		if !strings.Contains(p.eval(text("transport-help")), "POST /") {
			t.Errorf("the page does not say why the stream went over POST /: %q", p.eval(text("transport-help")))
		}
		// Refused before it opens, over POST /: one JSON reply, shown as any.
		p.fill("token", "greeter-token-0123456789")
		p.send()
		if c, st := p.eval(text("error-code")), p.eval(text("stream-state")); c != "7" || !strings.Contains(st, "not opened") {
			t.Errorf("greeter watching notes with metadata shows %s (%s), want 7, not opened", c, st)
		}
		p.fill("token", "admin-token-0123456789")
		p.fill("metadata", "")
		if got := load("wrong-token"); got != "" || !strings.Contains(p.eval(text("list-status")), "refused") {
			t.Errorf("a wrong token lists %q (%s)", got, p.eval(text("list-status")))
		}
	})

	t.Run("origins", func(t *testing.T) {
		requests, sockets, console, exceptions := tr.take()
		if len(requests) == 0 || len(sockets) == 0 {
			t.Fatalf("the test saw %d requests and %d WebSockets: the network events are not recorded", len(requests), len(sockets))
		}
		bridges := map[string]bool{e.url: true, ea.url: true}
		for _, r := range requests {
			if strings.HasPrefix(r.url, "data:") {
				continue
			}
			if origin(r.url) != origin(r.document) || !bridges[origin(r.url)] {
				t.Errorf("the page at %s requested %s", r.document, r.url)
			}
		}
		for _, s := range sockets {
			if !bridges[strings.Replace(origin(s), "ws://", "http://", 1)] {
				t.Errorf("the page opened a WebSocket to %s", s)
			}
		}
		for _, c := range console {
			if !strings.Contains(c, "401") { // the wrong token's replies
				t.Errorf("the page logged: %s", c)
			}
		}
		for _, x := range exceptions {
			t.Errorf("the page threw: %s", x)
		}
		// The browser enforces the policy: an inline script does not run.
		got := p.eval(`(() => { const s = document.createElement("script"); s.textContent = "window.inlineRan = true";
			document.body.append(s); return String(window.inlineRan === true); })()`)
		if got != "false" {
			t.Error("an inline script ran in the explorer")
		}
	})

	// A hosted playground (another origin) reads GET /openrpc.json once
	// cors_origins lists it; an unlisted origin cannot (docs/explorer.md).
	t.Run("playground", func(t *testing.T) {
		p := page{t: t, ctx: ctx}
		fetchDoc := `fetch("` + e.url + `/openrpc.json").then(r => r.json()).then(d => d.openrpc, e => "rejected")`
		for _, c := range []struct{ origin, want string }{{playground, "1.3.2"}, {elsewhere, "rejected"}} {
			p.do(chromedp.Navigate(c.origin + "/"))
			got, err := chromedp.Run(p.ctx, chromedp.Evaluate[string](fetchDoc, chromedp.EvalAwaitPromise))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Errorf("a page on %s fetching /openrpc.json got %q, want %q", c.origin, got, c.want)
			}
		}
	})
}

// pageServer serves an empty page on a loopback port: another origin.
func pageServer(t *testing.T) string {
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<!doctype html><title>elsewhere</title>")
	}))
	t.Cleanup(hs.Close)
	return hs.URL
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// hashToken is the digest of token in the form Identity.Tokens takes.
func hashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}
