package bridge_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/golang-jwt/jwt/v5"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// selectorIdentities are identities chosen by their tokens' claims.
var selectorIdentities = []bridge.Identity{
	{Name: "billing-bot", JWT: &auth.Selector{Subjects: []string{"svc-billing"}}, Allow: []string{"helloworld.*"}},
	{Name: "billing-admins", JWT: &auth.Selector{Claims: map[string]string{"groups": "billing-admins"}}, Allow: []string{"*"}},
	{Name: "writers", JWT: &auth.Selector{Claims: map[string]string{"scope": "bridge:write"}}, Allow: []string{"test.v1.TestService.Echo"}},
}

// TestJWTCallers: a verified token takes the first identity whose
// selector matches, with its allow list; its claims reach the backend as
// the metadata claims_metadata names (a client's own values dropped) and
// its token does not; one no selector matches may call nothing and sees
// no method in rpc.discover, GET /openrpc.json or MCP's tools/list.
func TestJWTCallers(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	key := newTestKey(t, "ES256")
	k.publish(key)
	b := newJWTBridge(t, idp.Options{Issuer: k.url, ClockSkew: time.Second}, selectorIdentities, bridge.Options{},
		map[string]string{"sub": "x-user-sub", "email": "x-user-email"})
	awaitLoaded(t, b.provider)

	echo := `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Echo","params":{"f_string":"x"}}`
	tests := []struct {
		name     string
		claims   jwt.MapClaims
		identity string
		hello    int // the JSON-RPC code of SayHello (0: a result)
		echo     int
	}{
		{"by subject", jwt.MapClaims{"email": "bot@example.com"}, "billing-bot", 0, 7},
		{"by an array claim", jwt.MapClaims{"sub": "alice", "groups": []string{"staff", "billing-admins"}}, "billing-admins", 0, 0},
		{"by a scope among others", jwt.MapClaims{"sub": "carol", "scope": "bridge:read bridge:write"}, "writers", 7, 0},
		{"the first that matches", jwt.MapClaims{"groups": []string{"billing-admins"}}, "billing-bot", 0, 7},
		{"none matches", jwt.MapClaims{"sub": "mallory", "groups": "billing-admins-not", "scope": "bridge:writer"}, auth.Unmatched, 7, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sub := "svc-billing"
			if s, ok := tt.claims["sub"].(string); ok {
				sub = s
			}
			token := sign(t, key, k.claims(sub, tt.claims), nil)
			for _, c := range []struct {
				body string
				want int
			}{{sayHello, tt.hello}, {echo, tt.echo}} {
				h := http.Header{"Content-Type": {"application/json"}, "Authorization": {"Bearer " + token},
					"Grpc-Metadata-X-User-Sub": {"forged"}, "Grpc-Metadata-X-Bridge-Identity": {"forged"}}
				resp, body := postAs(t, b.url, h, c.body)
				var reply struct {
					Error *struct{ Code int }
				}
				json.Unmarshal(body, &reply)
				got := 0
				if reply.Error != nil {
					got = reply.Error.Code
				}
				if resp.StatusCode != 200 || got != c.want {
					t.Errorf("%s: got HTTP %d %s, want code %d", c.body, resp.StatusCode, body, c.want)
				}
			}
			for _, call := range b.rec.take() {
				if got := call.md.Get("x-bridge-identity"); !slices.Equal(got, []string{tt.identity}) {
					t.Errorf("identity metadata %v, want %s", got, tt.identity)
				}
				if got := call.md.Get("x-user-sub"); !slices.Equal(got, []string{sub}) {
					t.Errorf("x-user-sub %v, want [%s]", got, sub)
				}
				if email, _ := tt.claims["email"].(string); email != "" && !slices.Equal(call.md.Get("x-user-email"), []string{email}) {
					t.Errorf("x-user-email %v, want [%s]", call.md.Get("x-user-email"), email)
				}
				if got := call.md.Get("authorization"); len(got) != 0 {
					t.Errorf("the token reached the backend: %v", got)
				}
			}
		})
	}

	// The caller no selector matches sees nothing.
	nobody := sign(t, key, k.claims("mallory", nil), nil)
	_, body := postToken(t, b.url, nobody, `{"jsonrpc":"2.0","id":1,"method":"rpc.discover"}`)
	var doc struct {
		Result struct{ Methods []any }
	}
	if err := json.Unmarshal(body, &doc); err != nil || len(doc.Result.Methods) != 0 {
		t.Errorf("rpc.discover of an unmatched token: %s, want no methods", body)
	}
	req, _ := http.NewRequest(http.MethodGet, b.url+"/openrpc.json", nil)
	req.Header.Set("Authorization", "Bearer "+nobody)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	doc.Result.Methods = nil
	json.NewDecoder(resp.Body).Decode(&doc.Result)
	resp.Body.Close()
	if resp.StatusCode != 200 || len(doc.Result.Methods) != 0 {
		t.Errorf("GET /openrpc.json of an unmatched token: %d with %d methods, want 200 with none", resp.StatusCode, len(doc.Result.Methods))
	}
	if names := toolNames(t, mustConnectMCP(t, b.url, nobody)); len(names) != 0 {
		t.Errorf("MCP tools/list of an unmatched token: %v, want none", names)
	}
	if names := toolNames(t, mustConnectMCP(t, b.url, sign(t, key, k.claims("svc-billing", nil), nil))); !slices.Equal(names, []string{toolHello}) {
		t.Errorf("MCP tools/list of billing-bot: %v, want [%s]", names, toolHello)
	}
	if !strings.Contains(b.log.String(), "identity=billing-bot") {
		t.Errorf("the access log does not name the identity of a token")
	}
}

// TestJWTOverWebSocket: a token authenticates a WebSocket upgrade, in the
// Authorization header or as the subprotocol browsers use.
func TestJWTOverWebSocket(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	key := newTestKey(t, "EdDSA")
	k.publish(key)
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, selectorIdentities, bridge.Options{}, nil)
	awaitLoaded(t, b.provider)
	token := sign(t, key, k.claims("svc-billing", nil), nil)
	for _, opts := range []*websocket.DialOptions{
		{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}},
		{Subprotocols: []string{"jsonrpc", auth.WSTokenProtocol + b64(token)}},
	} {
		ws := dialWSWith(t, b.env, opts)
		ws.send(sayHello)
		if r := ws.recv(); r["result"] == nil {
			t.Errorf("SayHello over WebSocket: %v", r)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, resp, err := websocket.Dial(ctx, b.url+"/ws", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token + "x"}}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a bad token on the upgrade: got %v %v, want 401", resp, err)
	}
}

// TestKeysNotLoaded: with the identity provider down at start, /readyz
// answers 503 naming it, static tokens work and JWTs get 503 with
// Retry-After and error 14 (not 401: the token may be fine); once the
// provider is up they work, without a restart.
func TestKeysNotLoaded(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	key := newTestKey(t, "RS256")
	k.publish(key)
	k.down.Store(true)
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, selectorIdentities, bridge.Options{}, nil)
	await.Until(t, 10*time.Second, "a failed fetch", func() bool { return k.fetches.Load() > 0 || b.provider.Status().LastError != "" })

	status, body := b.do(t, http.MethodGet, "/readyz", "", "")
	if status != http.StatusServiceUnavailable || !strings.Contains(string(body), k.url) {
		t.Errorf("readyz before the keys: %d %s, want 503 naming %s", status, body, k.url)
	}
	if resp, body := postToken(t, b.url, callers[0].token, sayHello); resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) {
		t.Errorf("a static token before the keys: %d %s", resp.StatusCode, body)
	}
	token := sign(t, key, k.claims("svc-billing", nil), nil)
	resp, body := postToken(t, b.url, token, sayHello)
	var reply struct{ Error struct{ Code int } }
	json.Unmarshal(body, &reply)
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || reply.Error.Code != 14 {
		t.Errorf("a JWT before the keys: %d Retry-After %q %s, want 503 with Retry-After and error 14", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if got := b.counter(t, "jsonrpc_bridge_auth_failures_total", "keys_not_loaded"); got != 1 {
		t.Errorf("keys_not_loaded failures: %v, want 1", got)
	}
	if calls := b.rec.take(); len(calls) != 1 { // the static token's
		t.Errorf("backend calls: %d, want 1", len(calls))
	}

	k.down.Store(false)
	await.Until(t, 10*time.Second, "the keys loaded once the provider is up", b.provider.Loaded)
	if resp, body := postToken(t, b.url, token, sayHello); resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) {
		t.Errorf("the JWT once the keys loaded: %d %s", resp.StatusCode, body)
	}
	if status, body := b.do(t, http.MethodGet, "/readyz", "", ""); status != 200 {
		t.Errorf("readyz once the keys loaded: %d %s", status, body)
	}
}

// TestProviderDownMidRun: an outage after the keys loaded keeps them:
// tokens (new ones too) still verify, /readyz stays 200, and the
// provider's status says the keys are stale.
func TestProviderDownMidRun(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	key := newTestKey(t, "ES384")
	k.publish(key)
	b := newJWTBridge(t, idp.Options{Issuer: k.url, Refresh: 20 * time.Millisecond}, selectorIdentities, bridge.Options{}, nil)
	awaitLoaded(t, b.provider)
	k.down.Store(true)
	await.Until(t, 10*time.Second, "a failed refresh", func() bool { return b.provider.Status().State == "stale" })
	for i := range 3 {
		token := sign(t, key, k.claims("svc-billing", jwt.MapClaims{"jti": i}), nil)
		if resp, body := postToken(t, b.url, token, sayHello); resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) {
			t.Errorf("a new token during the outage: %d %s", resp.StatusCode, body)
		}
	}
	if status, body := b.do(t, http.MethodGet, "/readyz", "", ""); status != 200 {
		t.Errorf("readyz during the outage: %d %s, want 200", status, body)
	}
	if st := b.provider.Status(); st.LastError == "" || st.KeyCount != 1 {
		t.Errorf("status during the outage: %+v, want the error and the last key", st)
	}
}

// TestUnknownKeyFlood: 1,000 tokens of random key ids, at once, reach
// the provider with one fetch at most (one per 30 s); each is refused
// unknown_key within the 2 s a call waits for that fetch.
func TestUnknownKeyFlood(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	key := newTestKey(t, "ES256")
	k.publish(key)
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, selectorIdentities, bridge.Options{}, nil)
	awaitLoaded(t, b.provider)
	before := k.fetches.Load()
	attacker := newTestKey(t, "ES256")
	const n, workers = 1000, 32
	tokens := make(chan string, n)
	for range n {
		attacker.kid = "random-" + rand.Text()
		tokens <- sign(t, attacker, k.claims("svc-billing", nil), nil)
	}
	close(tokens)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var slowest time.Duration
	refused := 0
	for range workers {
		wg.Go(func() {
			for tok := range tokens {
				start := time.Now()
				resp, _ := postToken(t, b.url, tok, sayHello)
				d := time.Since(start)
				mu.Lock()
				slowest = max(slowest, d)
				if resp.StatusCode == 401 && challengeParam(resp.Header.Get("WWW-Authenticate"), "error_description") == "the token is signed with an unknown key" {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if refused != n {
		t.Errorf("%d of %d refused as unknown_key", refused, n)
	}
	if got := k.fetches.Load() - before; got > 1 {
		t.Errorf("the flood made %d fetches of the key set, want at most 1", got)
	}
	if slowest > 5*time.Second {
		t.Errorf("the slowest call took %s: calls wait at most 2 s for a refetch", slowest)
	}
	if calls := b.rec.take(); len(calls) != 0 {
		t.Errorf("the backend was called %d times", len(calls))
	}
}

// TestKeyRotation: a token of a key the provider has just published
// verifies at once (one refetch), and a key the key set no longer lists
// stops verifying at the next refresh, even for a token verified (and
// cached) before.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	old := newTestKey(t, "PS256")
	k.publish(old)
	b := newJWTBridge(t, idp.Options{Issuer: k.url, Refresh: time.Hour, RefetchInterval: time.Hour}, selectorIdentities, bridge.Options{}, nil)
	awaitLoaded(t, b.provider)
	oldToken := sign(t, old, k.claims("svc-billing", nil), nil)
	if resp, body := postToken(t, b.url, oldToken, sayHello); resp.StatusCode != 200 {
		t.Fatalf("the old key's token: %d %s", resp.StatusCode, body)
	}
	next := newTestKey(t, "ES256")
	k.rotate(next) // the old key is dropped
	before := k.fetches.Load()
	newToken := sign(t, next, k.claims("svc-billing", nil), nil)
	if resp, body := postToken(t, b.url, newToken, sayHello); resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) {
		t.Errorf("the new key's token: %d %s", resp.StatusCode, body)
	}
	if got := k.fetches.Load() - before; got != 1 {
		t.Errorf("fetches for the new key: %d, want 1", got)
	}
	resp, _ := postToken(t, b.url, oldToken, sayHello)
	if resp.StatusCode != 401 || challengeParam(resp.Header.Get("WWW-Authenticate"), "error_description") != "the token is signed with an unknown key" {
		t.Errorf("the cached token of a dropped key: got %d %q, want 401 unknown key", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}

// TestDroppedKeyAtRefresh: the periodic refresh that drops a key ends
// the cached tokens of that key.
func TestDroppedKeyAtRefresh(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	old, next := newTestKey(t, "RS256"), newTestKey(t, "RS256")
	k.publish(old, next)
	b := newJWTBridge(t, idp.Options{Issuer: k.url, Refresh: 20 * time.Millisecond, RefetchInterval: time.Hour}, selectorIdentities, bridge.Options{}, nil)
	awaitLoaded(t, b.provider)
	token := sign(t, old, k.claims("svc-billing", nil), nil)
	if resp, body := postToken(t, b.url, token, sayHello); resp.StatusCode != 200 {
		t.Fatalf("before the drop: %d %s", resp.StatusCode, body)
	}
	k.rotate(next)
	await.Until(t, 10*time.Second, "the cached token of the dropped key refused", func() bool {
		resp, _ := postToken(t, b.url, token, sayHello)
		return resp.StatusCode == 401
	})
	if resp, _ := postToken(t, b.url, sign(t, next, k.claims("svc-billing", nil), nil), sayHello); resp.StatusCode != 200 {
		t.Errorf("the kept key's token: %d", resp.StatusCode)
	}
}

// closeStatus reads from ws until it closes and returns the close status
// and reason, or fails after within.
func closeStatus(t *testing.T, ws *wsClient, within time.Duration) (websocket.StatusCode, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	for {
		_, _, err := ws.c.Read(ctx)
		if err == nil {
			continue
		}
		var ce websocket.CloseError
		if errors.As(err, &ce) {
			return ce.Code, ce.Reason
		}
		t.Fatalf("the connection did not close within %s: %v", within, err)
	}
}

// TestWebSocketClosesWhenTokenExpires: an open WebSocket whose JWT
// expires is closed with 1008 within 5 s of it.
func TestWebSocketClosesWhenTokenExpires(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	key := newTestKey(t, "ES256")
	k.publish(key)
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, selectorIdentities, bridge.Options{}, nil) // no clock skew
	awaitLoaded(t, b.provider)
	exp := time.Now().Add(2 * time.Second).Truncate(time.Second)
	token := sign(t, key, k.claims("svc-billing", jwt.MapClaims{"exp": exp.Unix()}), nil)
	ws := dialWSWith(t, b.env, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	ws.send(sayHello)
	if r := ws.recv(); r["result"] == nil {
		t.Fatalf("SayHello: %v", r)
	}
	code, reason := closeStatus(t, ws, time.Until(exp)+5*time.Second)
	if code != websocket.StatusPolicyViolation || reason != "the token has expired" {
		t.Errorf("got close %d %q, want 1008 with the reason", code, reason)
	}
	if late := time.Since(exp); late > 5*time.Second {
		t.Errorf("closed %s after the token expired", late)
	}
}

// TestReloadEndsConnections: after a reload without their identity, an
// open WebSocket closes with 1008 and an MCP session ends, within 5 s; a
// new identity's token works at once and the removed one is refused.
func TestReloadEndsConnections(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, nil, bridge.Options{}, nil)
	greeter := callers[1]
	ws := dialWSWith(t, b.env, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + greeter.token}}})
	ws.send(sayHello)
	if r := ws.recv(); r["result"] == nil {
		t.Fatalf("SayHello: %v", r)
	}
	mc := mustConnectMCP(t, b.url, greeter.token)
	if names := toolNames(t, mc); !slices.Contains(names, toolHello) {
		t.Fatalf("tools of greeter: %v", names)
	}
	// An unrelated change keeps both.
	keep := []bridge.Identity{}
	for _, c := range callers {
		keep = append(keep, bridge.Identity{Name: c.name, Tokens: []string{hashToken(c.token)}, Allow: c.allow})
	}
	if err := b.auth.Reload(append(keep, bridge.Identity{Name: "newcomer", Tokens: []string{hashToken("newcomer-token-0123456789")}, Allow: []string{"*"}})); err != nil {
		t.Fatal(err)
	}
	ws.send(sayHello)
	if r := ws.recv(); r["result"] == nil {
		t.Fatalf("SayHello after an unrelated reload: %v", r)
	}
	if resp, _ := postToken(t, b.url, "newcomer-token-0123456789", sayHello); resp.StatusCode != 200 {
		t.Errorf("a token the reload added: %d", resp.StatusCode)
	}

	reloaded := time.Now()
	without := slices.DeleteFunc(slices.Clone(keep), func(id bridge.Identity) bool { return id.Name == greeter.name })
	if err := b.auth.Reload(without); err != nil {
		t.Fatal(err)
	}
	code, reason := closeStatus(t, ws, 5*time.Second)
	if code != websocket.StatusPolicyViolation || reason != "the credentials are not valid" {
		t.Errorf("got close %d %q, want 1008", code, reason)
	}
	await.Until(t, 10*time.Second, "the MCP session ended", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := mc.ListTools(ctx, nil)
		return err != nil
	})
	if d := time.Since(reloaded); d > 5*time.Second {
		t.Errorf("the connections ended %s after the reload", d)
	}
	if resp, _ := postToken(t, b.url, greeter.token, sayHello); resp.StatusCode != 401 {
		t.Errorf("a removed token: %d, want 401", resp.StatusCode)
	}
	if err := b.auth.Reload([]bridge.Identity{{Name: "dup"}, {Name: "dup"}}); err == nil {
		t.Errorf("a bad reload was accepted")
	}
	if resp, _ := postToken(t, b.url, callers[0].token, sayHello); resp.StatusCode != 200 {
		t.Errorf("after a bad reload the last good identities serve: %d", resp.StatusCode)
	}
}

// TestResourceMetadata: with JWTs on, the protected resource metadata
// (RFC 9728) is served to anyone at the well-known path and its /mcp
// form, cacheable, and every 401 of POST / and /mcp names it; with JWTs
// off it is not there.
func TestResourceMetadata(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, nil, bridge.Options{Scopes: []string{"bridge:call"}}, nil)
	for _, path := range []string{"/.well-known/oauth-protected-resource", "/.well-known/oauth-protected-resource/mcp"} {
		resp, err := testClient.Get(b.url + path)
		if err != nil {
			t.Fatal(err)
		}
		var doc map[string]any
		json.NewDecoder(resp.Body).Decode(&doc)
		resp.Body.Close()
		want := map[string]any{"resource": testAudience, "authorization_servers": []any{k.url},
			"bearer_methods_supported": []any{"header"}, "scopes_supported": []any{"bridge:call"}, "resource_name": "grpc-jsonrpc-bridge"}
		if resp.StatusCode != 200 || !sameJSON(t, doc, want) {
			t.Errorf("GET %s: %d %v, want %v", path, resp.StatusCode, doc, want)
		}
		if cc := resp.Header.Get("Cache-Control"); !strings.Contains(cc, "max-age=") || !strings.Contains(cc, "public") {
			t.Errorf("GET %s: Cache-Control %q, want it cacheable", path, cc)
		}
	}
	for _, path := range []string{"/", "/mcp"} {
		resp, _ := postToken(t, b.url+path, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
		ch := resp.Header.Get("WWW-Authenticate")
		if resp.StatusCode != 401 || challengeParam(ch, "resource_metadata") != "https://bridge.test/.well-known/oauth-protected-resource" {
			t.Errorf("POST %s without a token: %d %q, want 401 naming the metadata", path, resp.StatusCode, ch)
		}
		if strings.Contains(ch, "error=") {
			t.Errorf("POST %s without a token: %q, want no error code (RFC 6750 section 3.1)", path, ch)
		}
		// MCP 2025-11-25: the scopes to ask for, in the challenge.
		if got := challengeParam(ch, "scope"); got != "bridge:call" {
			t.Errorf("POST %s without a token: scope %q in %q, want bridge:call", path, got, ch)
		}
	}
	// A page's preflight (browsers' MCP clients send MCP-Protocol-Version)
	// is answered; the document itself only on GET and HEAD.
	pre, _ := http.NewRequest(http.MethodOptions, b.url+"/.well-known/oauth-protected-resource/mcp", nil)
	pre.Header.Set("Origin", "http://localhost:6274")
	pre.Header.Set("Access-Control-Request-Method", "GET")
	pre.Header.Set("Access-Control-Request-Headers", "mcp-protocol-version")
	resp, err := testClient.Do(pre)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if h := resp.Header; resp.StatusCode != 204 || h.Get("Access-Control-Allow-Origin") != "*" ||
		!strings.Contains(strings.ToLower(h.Get("Access-Control-Allow-Headers")), "mcp-protocol-version") || !strings.Contains(h.Get("Access-Control-Allow-Methods"), "GET") {
		t.Errorf("preflight of the metadata: %d %v, want 204 letting any page GET it with MCP-Protocol-Version", resp.StatusCode, resp.Header)
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions} {
		if status, _ := b.do(t, m, "/.well-known/oauth-protected-resource", "", ""); status != 405 {
			t.Errorf("%s of the metadata: %d, want 405", m, status)
		}
	}
	if resp, err := testClient.Head(b.url + "/.well-known/oauth-protected-resource"); err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("HEAD of the metadata: %v %v, want 200 application/json", resp, err)
	}
	static := newEnv(t, bridge.Options{Auth: newAuth(t)})
	if status, _ := static.do(t, http.MethodGet, "/.well-known/oauth-protected-resource", "", ""); status != 404 {
		t.Errorf("the metadata without JWTs: %d, want 404", status)
	}
}

// TestResourceMetadataAtItsPath: the metadata of a resource with a path
// is served where RFC 9728 section 3.1 puts it, the well-known path
// inserted before the resource's path, and that is what every 401
// names, whether the resource is auth.resource or, without it, the first
// audience; its resource is the resource identifier (section 3.3).
func TestResourceMetadataAtItsPath(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	for _, tt := range []struct {
		name      string
		audiences []string
		resource  string // Options.Resource
		want      string // the resource identifier
	}{
		{"the first audience", []string{"https://bridge.test/api/mcp", testAudience}, "", "https://bridge.test/api/mcp"},
		{"auth.resource", []string{testAudience}, "https://bridge.test/v1/mcp", "https://bridge.test/v1/mcp"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := newJWTBridge(t, idp.Options{Issuer: k.url, Audiences: tt.audiences}, nil, bridge.Options{Resource: tt.resource}, nil)
			resp, _ := postToken(t, b.url+"/mcp", "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
			named := challengeParam(resp.Header.Get("WWW-Authenticate"), "resource_metadata")
			wantURL := strings.Replace(tt.want, "https://bridge.test/", "https://bridge.test/.well-known/oauth-protected-resource/", 1)
			if resp.StatusCode != 401 || named != wantURL {
				t.Fatalf("POST /mcp without a token: %d, resource_metadata %q, want 401 naming %q", resp.StatusCode, named, wantURL)
			}
			path := strings.TrimPrefix(named, "https://bridge.test")
			got, err := testClient.Get(b.url + path)
			if err != nil {
				t.Fatal(err)
			}
			var doc struct{ Resource string }
			json.NewDecoder(got.Body).Decode(&doc)
			got.Body.Close()
			if got.StatusCode != 200 || doc.Resource != tt.want {
				t.Errorf("GET %s: %d, resource %q, want 200 and %q", path, got.StatusCode, doc.Resource, tt.want)
			}
		})
	}
}

// TestChallengeSyntax: the challenge is RFC 9110 syntax whatever the
// realm (a quote and a backslash escaped, a control left out), and its
// scope attribute lists the scopes, space-delimited.
func TestChallengeSyntax(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, nil,
		bridge.Options{AuthRealm: "ops \"prod\" \\ eu\x01", Scopes: []string{"bridge:call", "billing.read"}}, nil)
	resp, _ := postToken(t, b.url, "not-a-token", sayHello)
	ch := resp.Header.Get("WWW-Authenticate")
	want := `Bearer realm="ops \"prod\" \\ eu", error="invalid_token", error_description="the credentials are not valid", ` +
		`scope="bridge:call billing.read", resource_metadata="https://bridge.test/.well-known/oauth-protected-resource"`
	if ch != want {
		t.Errorf("got WWW-Authenticate\n%s\nwant\n%s", ch, want)
	}
}

// TestMCPSessionOfAnotherCaller: an MCP session answers only the caller
// that opened it (MCP's security best practices: bind a session to its
// user): another caller sending its id, even one of the same identity
// with a token of another subject, gets 404 as for a session that does
// not exist, on POST, GET and DELETE; its owner goes on using it.
func TestMCPSessionOfAnotherCaller(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	key := newTestKey(t, "ES256")
	k.publish(key)
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, []bridge.Identity{{Name: "staff", JWT: &auth.Selector{}, Allow: []string{"*"}}}, bridge.Options{}, nil)
	awaitLoaded(t, b.provider)
	alice, bob := sign(t, key, k.claims("alice", nil), nil), sign(t, key, k.claims("bob", nil), nil)
	do := func(method, token, session, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, b.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := testClient.Do(req.WithContext(ctx))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf [512]byte
		n, _ := resp.Body.Read(buf[:]) // a GET's stream stays open: its start is enough
		return resp, string(buf[:n])
	}
	resp, body := do(http.MethodPost, alice, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != 200 || session == "" {
		t.Fatalf("initialize: %d %s, want 200 and a session", resp.StatusCode, body)
	}
	if resp, body := do(http.MethodPost, alice, session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); resp.StatusCode != 202 {
		t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, body)
	}
	list := `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`
	for _, m := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		if resp, body := do(m, bob, session, list); resp.StatusCode != 404 {
			t.Errorf("%s with another caller's session: %d %s, want 404", m, resp.StatusCode, body)
		}
	}
	if resp, body := do(http.MethodPost, alice, session, list); resp.StatusCode != 200 || !strings.Contains(body, `"tools"`) {
		t.Errorf("tools/list of the session's owner: %d %s", resp.StatusCode, body)
	}
}

// TestMCPInsufficientScope: a token that matches no identity, but would
// with more scopes, gets 403 on an MCP tools/call with
// error="insufficient_scope" and the scopes to ask for, its own
// included (RFC 6750 section 3.1; MCP 2025-11-25, runtime insufficient
// scope), the same for an unknown tool (it tells nothing of which
// exist); tools/list still lists nothing. A token that more scopes would
// not help (another subject), and one with the scopes, are served as
// before.
func TestMCPInsufficientScope(t *testing.T) {
	t.Parallel()
	k := newKeyIssuer(t)
	key := newTestKey(t, "ES256")
	k.publish(key)
	ids := []bridge.Identity{
		{Name: "ops", JWT: &auth.Selector{Subjects: []string{"ops-bot"}, Claims: map[string]string{"scope": "bridge:admin"}}, Allow: []string{"*"}},
		{Name: "callers", JWT: &auth.Selector{Claims: map[string]string{"scope": "bridge:call", "groups": "staff"}}, Allow: []string{"helloworld.*"}},
	}
	b := newJWTBridge(t, idp.Options{Issuer: k.url}, ids, bridge.Options{}, nil)
	awaitLoaded(t, b.provider)
	call := func(token, tool string) (*http.Response, string) {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"name":"s"}}}`
		req, _ := http.NewRequest(http.MethodPost, b.url+"/mcp", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out strings.Builder
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		out.Write(buf[:n])
		return resp, out.String()
	}
	for _, tt := range []struct {
		name, scope, want string
	}{
		{"no scope", "", "bridge:call"},
		{"other scopes", "openid profile", "openid profile bridge:call"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			token := sign(t, key, k.claims("carol", jwt.MapClaims{"scope": tt.scope, "groups": []string{"staff"}}), nil)
			for _, tool := range []string{toolHello, "no_such_tool"} {
				resp, body := call(token, tool)
				ch := resp.Header.Get("WWW-Authenticate")
				if resp.StatusCode != 403 || challengeParam(ch, "error") != "insufficient_scope" || challengeParam(ch, "scope") != tt.want ||
					challengeParam(ch, "resource_metadata") != "https://bridge.test/.well-known/oauth-protected-resource" {
					t.Errorf("tools/call %s: %d %q %s, want 403 insufficient_scope with scope %q", tool, resp.StatusCode, ch, body, tt.want)
				}
				if !strings.Contains(body, `"id":7`) || !strings.Contains(body, `"error"`) {
					t.Errorf("tools/call %s: body %s, want a JSON-RPC error of id 7", tool, body)
				}
			}
			if names := toolNames(t, mustConnectMCP(t, b.url, token)); len(names) != 0 {
				t.Errorf("tools/list: %v, want none", names)
			}
		})
	}
	// Scopes would not make mallory ops-bot, nor one of staff: refused as
	// before, in a result.
	other := mustConnectMCP(t, b.url, sign(t, key, k.claims("mallory", jwt.MapClaims{"scope": "bridge:admin-not"}), nil))
	if r, err := callTool(t, other, toolHello, `{"name":"m"}`); err != nil || !r.IsError || !strings.Contains(resultText(r), "PERMISSION_DENIED") {
		t.Errorf("a token that scopes would not help: %v %+v, want the refusal of a call", err, r)
	}
	granted := mustConnectMCP(t, b.url, sign(t, key, k.claims("carol", jwt.MapClaims{"scope": "bridge:call", "groups": []string{"staff"}}), nil))
	if r, err := callTool(t, granted, toolHello, `{"name":"c"}`); err != nil || r.IsError {
		t.Errorf("a token with the scope: %v %+v, want the result", err, r)
	}
}

// TestResourceMetadataAuthorizationServers: authorization_servers lists
// the issuers that are authorization servers' identifiers, URLs (RFC
// 8414 section 2), not one that is no URL (Kubernetes' older
// kubernetes/serviceaccount), which an MCP client taking the first would
// fail on.
func TestResourceMetadataAuthorizationServers(t *testing.T) {
	t.Parallel()
	key := newTestKey(t, "RS256")
	set, _ := json.Marshal(map[string]any{"keys": []any{publicJWK(key)}})
	file := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(file, set, 0o600); err != nil {
		t.Fatal(err)
	}
	k8s, err := idp.New(idp.Options{Issuer: "kubernetes/serviceaccount", Audiences: []string{testAudience}, JWKSFile: file})
	if err != nil {
		t.Fatal(err)
	}
	k := newKeyIssuer(t)
	idpURL, err := idp.New(idp.Options{Issuer: k.url, Audiences: []string{testAudience}})
	if err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(nil, &auth.Provider{Provider: k8s}, &auth.Provider{Provider: idpURL})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, bridge.Options{Auth: a})
	status, body := e.do(t, http.MethodGet, "/.well-known/oauth-protected-resource", "", "")
	var doc struct {
		AuthorizationServers []string `json:"authorization_servers"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || status != 200 || !slices.Equal(doc.AuthorizationServers, []string{k.url}) {
		t.Errorf("metadata: %d %s, want authorization_servers [%s]", status, body, k.url)
	}
}
