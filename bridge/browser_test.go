package bridge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/internal/browsertest"
)

// browser starts a headless Chromium for the test and returns a context
// of one of its tabs (see browsertest.Start).
func browser(t *testing.T) context.Context {
	t.Helper()
	return browsertest.Start(t, 2*time.Minute)
}

// pageServer serves an empty HTML page at / on a loopback port: the
// origin of the scripts a test runs in the browser.
func pageServer(t *testing.T, title string) string {
	t.Helper()
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, "<!doctype html><title>%s</title><iframe name=sink></iframe>", title)
	}))
	t.Cleanup(hs.Close)
	return hs.URL // http://127.0.0.1:PORT
}

// inPage opens the page at origin in the tab of ctx and runs the script,
// an async function body, there, returning its result as JSON.
func inPage(t *testing.T, ctx context.Context, origin, script string) string {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(origin+"/")); err != nil {
		t.Fatalf("opening %s: %v", origin, err)
	}
	out, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(async () => {
		try { return JSON.stringify(await (async () => {`+script+`})()); }
		catch (e) { return JSON.stringify({rejected: String(e)}); } })()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("running a script on %s: %v", origin, err)
	}
	return out
}

// pageResult is what the scripts return.
type pageResult struct {
	Status   int    `json:"status"`
	Body     string `json:"body"`
	Type     string `json:"type"`
	Rejected string `json:"rejected"`
}

func parsePageResult(t *testing.T, s string) pageResult {
	t.Helper()
	var r pageResult
	if err := json.Unmarshal([]byte(s), &r); err != nil {
		t.Fatalf("the page returned %q: %v", s, err)
	}
	return r
}

// jsonPost is a script that calls url with a JSON POST carrying token.
func jsonPost(url, token, body string) string {
	return fmt.Sprintf(`const r = await fetch(%q, {method: "POST", body: %q,
		headers: {"Content-Type": "application/json", "Authorization": "Bearer " + %q, "Grpc-Metadata-Tenant": "t1"}});
		return {status: r.status, body: await r.text()};`, url, body, token)
}

// TestBrowser runs the browser's side of the front door in headless
// Chromium: pages on 127.0.0.1 ports call a bridge at localhost (another
// origin). A page on a listed origin calls it with a JSON POST carrying
// Authorization (after a preflight) and reads the result and the OpenRPC
// document; a page on another origin gets a rejected fetch and runs
// nothing; and with authentication off, a cross-site form or no-cors
// POST (text/plain, no preflight) from that page runs nothing either.
func TestBrowser(t *testing.T) {
	t.Parallel()
	ctx := browser(t)
	app, evil := pageServer(t, "app"), pageServer(t, "evil")
	opts := bridge.Options{CORSOrigins: []string{app}, AllowedHosts: loopbackHosts}

	t.Run("auth", func(t *testing.T) {
		o := opts
		o.Auth = newAuth(t)
		rec := new(recorder)
		e := newEnv(t, o, recording(rec))
		url := "http://localhost:" + e.port(t) + "/"
		call := `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Count","params":{"key":"browser"}}`

		r := parsePageResult(t, inPage(t, ctx, app, jsonPost(url, callers[0].token, call)))
		if r.Status != http.StatusOK || r.Body != `{"jsonrpc":"2.0","id":1,"result":{"count":"1"}}` {
			t.Errorf("allowed origin: got %+v, want the result", r)
		}
		r = parsePageResult(t, inPage(t, ctx, app, fmt.Sprintf(`const r = await fetch(%q, {headers: {"Authorization": "Bearer " + %q}});
			return {status: r.status, body: await r.text()};`, url+"openrpc.json", callers[0].token)))
		var doc struct{ OpenRPC string }
		if r.Status != http.StatusOK || json.Unmarshal([]byte(r.Body), &doc) != nil || doc.OpenRPC != "1.3.2" {
			t.Errorf("allowed origin, GET /openrpc.json: got HTTP %d %.200s, want the document", r.Status, r.Body)
		}
		r = parsePageResult(t, inPage(t, ctx, app, jsonPost(url, "wrong-token", call)))
		if r.Status != http.StatusUnauthorized {
			t.Errorf("allowed origin, wrong token: got %+v, want a readable 401", r)
		}
		seen := rec.take()
		if len(seen) != 1 || seen[0].md.Get("tenant")[0] != "t1" || seen[0].md.Get("x-bridge-identity")[0] != callers[0].name {
			t.Errorf("the backend saw %v, want one call with tenant t1 from %s", seen, callers[0].name)
		}

		evilCall := `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Count","params":{"key":"evil"}}`
		r = parsePageResult(t, inPage(t, ctx, evil, jsonPost(url, callers[0].token, evilCall)))
		if !strings.Contains(r.Rejected, "Failed to fetch") {
			t.Errorf("other origin: got %+v, want fetch to reject", r)
		}
		r = parsePageResult(t, inPage(t, ctx, evil, fmt.Sprintf(`const r = await fetch(%q); return {status: r.status};`, url+"openrpc.json")))
		if !strings.Contains(r.Rejected, "Failed to fetch") {
			t.Errorf("other origin, GET /openrpc.json: got %+v, want fetch to reject", r)
		}
		if seen := rec.take(); len(seen) != 0 || e.backend.Calls("evil") != 0 {
			t.Errorf("the backend ran %v for the other origin", seen)
		}
	})

	// An MCP client in a page on a listed origin keeps a session: it sends
	// MCP's headers (after their preflight), reads Mcp-Session-Id, and ends
	// the session with DELETE.
	t.Run("mcp", func(t *testing.T) {
		e := newEnv(t, opts)
		url := "http://localhost:" + e.port(t) + "/mcp"
		script := fmt.Sprintf(`const post = async (body, sid) => {
			const h = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"};
			if (sid) { h["Mcp-Session-Id"] = sid; h["Mcp-Protocol-Version"] = "2025-11-25"; }
			return fetch(%[1]q, {method: "POST", headers: h, body: JSON.stringify(body)});
		};
		const init = await post({jsonrpc: "2.0", id: 1, method: "initialize", params: {protocolVersion: "2025-11-25",
			capabilities: {}, clientInfo: {name: "page", version: "1"}}});
		const sid = init.headers.get("Mcp-Session-Id");
		await init.text();
		await (await post({jsonrpc: "2.0", method: "notifications/initialized"}, sid)).text();
		const list = await post({jsonrpc: "2.0", id: 2, method: "tools/list"}, sid);
		const tools = await list.text();
		const del = await fetch(%[1]q, {method: "DELETE", headers: {"Mcp-Session-Id": sid, "Mcp-Protocol-Version": "2025-11-25"}});
		return {status: del.status, body: (sid ? "session " : "no session ") + tools};`, url)
		r := parsePageResult(t, inPage(t, ctx, app, script))
		if r.Rejected != "" || !strings.HasPrefix(r.Body, "session ") || !strings.Contains(r.Body, "helloworld.Greeter.SayHello") ||
			r.Status >= 300 {
			t.Errorf("an MCP session from the listed origin: got %+v, want its id read, the tools listed and DELETE accepted", r)
		}
	})

	t.Run("csrf", func(t *testing.T) {
		e := newEnv(t, opts) // authentication off, as in demo
		url := "http://localhost:" + e.port(t) + "/"
		increment := `{"jsonrpc":"2.0","method":"demo.v1.Notes.Increment","params":{"delta":1}}`
		counter := func() string {
			t.Helper()
			r := e.call(t, `{"jsonrpc":"2.0","id":1,"method":"demo.v1.Notes.GetCounter"}`)
			b, _ := json.Marshal(r["result"])
			return string(b)
		}
		noCORS := fmt.Sprintf(`const r = await fetch(%q, {method: "POST", mode: "no-cors",
			headers: {"Content-Type": "text/plain"}, body: %q}); return {type: r.type};`, url, increment)
		// The classic form: its text/plain body name=value is the JSON
		// request, the = falling inside the id.
		form := fmt.Sprintf(`const f = document.createElement("form");
			f.method = "POST"; f.action = %q; f.enctype = "text/plain"; f.target = "sink";
			const i = document.createElement("input");
			i.name = '{"jsonrpc":"2.0","method":"demo.v1.Notes.Increment","params":{"delta":1},"id":"';
			i.value = 'x"}';
			f.appendChild(i); document.body.appendChild(f);
			const sink = document.querySelector("iframe");
			const loaded = new Promise(ok => sink.onload = ok);
			f.submit(); await loaded;
			return {type: "form"};`, url)

		attacks := []struct{ name, script string }{{"no-cors fetch", noCORS}, {"form", form}}
		for _, a := range attacks {
			name, script := a.name, a.script
			r := parsePageResult(t, inPage(t, ctx, evil, script))
			if r.Rejected != "" {
				t.Errorf("%s: got %+v, want it sent", name, r)
			}
			if c := counter(); c != `{}` {
				t.Fatalf("%s from another origin ran Increment: the counter is %s", name, c)
			}
		}
		// The same requests from the listed origin do run: the attack
		// reaches the bridge, and only the Origin check stops it.
		for _, a := range attacks {
			before := counter()
			parsePageResult(t, inPage(t, ctx, app, a.script))
			if after := counter(); after == before {
				t.Errorf("%s from the listed origin: the counter stayed %s", a.name, after)
			}
		}
	})
}
