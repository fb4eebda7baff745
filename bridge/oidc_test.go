package bridge_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/bridge/auth/idp"
)

// oidcDir is the npm project of the OpenID provider the tests run
// (oidc-provider, locked): npm ci --prefix bridge/testdata/oidc.
const oidcDir = "testdata/oidc"

// oidcProvider is a real OpenID provider on loopback: oidc-provider,
// run by testdata/oidc/provider.mjs.
type oidcProvider struct {
	issuer string
	cmd    *exec.Cmd
}

// startOIDC starts the provider on a free port; stop (or the test's end)
// ends it. Without node or the npm package the test is skipped, and
// fails when CI is set.
func startOIDC(t *testing.T) *oidcProvider {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(oidcDir, "node_modules", "oidc-provider", "package.json"))
	}
	if err != nil {
		msg := "node or oidc-provider is missing (npm ci --prefix bridge/" + oidcDir + "): " + err.Error()
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	cmd := exec.Command(node, "provider.mjs", "0")
	cmd.Dir = oidcDir
	stderr := &syncBuffer{}
	cmd.Stderr = stderr // its warnings: a development adapter, Node 20
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("provider.mjs:\n%s", stderr)
		}
	})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &oidcProvider{cmd: cmd}
	t.Cleanup(p.stop)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		var hello struct{ Issuer string }
		if err := json.Unmarshal([]byte(l), &hello); err != nil || hello.Issuer == "" {
			t.Fatalf("provider.mjs said %q", l)
		}
		p.issuer = hello.Issuer
	case <-time.After(30 * time.Second):
		t.Fatal("provider.mjs did not start within 30 s")
	}
	return p
}

// stop ends the provider's process, by its pid.
func (p *oidcProvider) stop() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

// token gets an access token for resource by the client credentials
// grant, as client.
func (p *oidcProvider) token(t *testing.T, client, secret, resource string) string {
	t.Helper()
	form := url.Values{"grant_type": {"client_credentials"}, "resource": {resource}, "scope": {"bridge:call"}}
	req, _ := http.NewRequest(http.MethodPost, p.issuer+"/token", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, secret)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error_description"`
	}
	json.NewDecoder(resp.Body).Decode(&tok)
	if resp.StatusCode != 200 || tok.AccessToken == "" {
		t.Fatalf("token for %s: HTTP %d %s", client, resp.StatusCode, tok.Error)
	}
	return tok.AccessToken
}

// control posts to a control endpoint of provider.mjs, or gets stats.
func (p *oidcProvider) control(t *testing.T, method, path string, into any) {
	t.Helper()
	req, _ := http.NewRequest(method, p.issuer+path, nil)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("%s %s: HTTP %d", method, path, resp.StatusCode)
	}
	if into != nil {
		json.NewDecoder(resp.Body).Decode(into)
	}
}

func (p *oidcProvider) jwksFetches(t *testing.T) int {
	t.Helper()
	var st struct{ JWKS int }
	p.control(t, http.MethodGet, "/control/stats", &st)
	return st.JWKS
}

// TestOIDCProvider: JWT access tokens from a real OpenID provider
// (oidc-provider: client credentials grant, resource indicators) call
// the bridge, which found the keys by OIDC discovery, over POST /,
// WebSocket and /mcp (the MCP TypeScript SDK); the provider's keys
// rotated while the bridge runs: tokens of the new key work without a
// restart, the bridge having fetched the keys at most twice for it; the
// provider gone, the last keys still verify new tokens.
func TestOIDCProvider(t *testing.T) {
	t.Parallel()
	node := nodeWith(t, "@modelcontextprotocol/sdk")
	op := startOIDC(t)
	const resource = "urn:grpc-jsonrpc-bridge:test"
	b := newJWTBridge(t, idp.Options{Issuer: op.issuer, Audiences: []string{resource}, ClockSkew: 5 * time.Second},
		[]bridge.Identity{{Name: "ci", JWT: &auth.Selector{Subjects: []string{"bridge-ci"}, Claims: map[string]string{"scope": "bridge:call"}}, Allow: []string{"*"}}},
		bridge.Options{}, map[string]string{"client_id": "x-client-id"})
	awaitLoaded(t, b.provider)

	token := op.token(t, "bridge-ci", "ci-secret", resource)
	if resp, body := postToken(t, b.url, token, sayHello); resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) {
		t.Fatalf("POST / with the provider's token: %d %s", resp.StatusCode, body)
	}
	for _, c := range b.rec.take() {
		if got := c.md.Get("x-client-id"); len(got) != 1 || got[0] != "bridge-ci" || c.md.Get("x-bridge-identity")[0] != "ci" {
			t.Errorf("metadata of the call: %v", c.md)
		}
	}
	// Another client's token is for the bridge too, but no identity's.
	other := op.token(t, "other-client", "other-secret", resource)
	if _, body := postToken(t, b.url, other, sayHello); !strings.Contains(string(body), `"code":7`) {
		t.Errorf("another client's token: %s, want error 7", body)
	}

	ws := dialWSWith(t, b.env, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	ws.send(sayHello)
	if r := ws.recv(); r["result"] == nil {
		t.Errorf("SayHello over WebSocket: %v", r)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "--test-reporter=spec", "mcp_token.mjs")
	cmd.Dir = nodeClients
	cmd.Env = append(os.Environ(), "NO_COLOR=1", "MCP_URL="+b.url+"/mcp", "MCP_TOKEN="+token)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("node --test mcp_token.mjs: %v\n%s", err, out)
	}

	// Rotation: the provider signs with a new key from now on.
	before := op.jwksFetches(t)
	var rotated struct{ Kid string }
	op.control(t, http.MethodPost, "/control/rotate", &rotated)
	fresh := op.token(t, "bridge-ci", "ci-secret", resource)
	if iss, kid := idp.Peek(fresh); kid != rotated.Kid || iss != op.issuer {
		t.Fatalf("the new token names kid %q of %q, want %q", kid, iss, rotated.Kid)
	}
	for range 5 {
		if resp, body := postToken(t, b.url, fresh, sayHello); resp.StatusCode != 200 || !strings.Contains(string(body), `"result"`) {
			t.Fatalf("the new key's token: %d %s", resp.StatusCode, body)
		}
	}
	if n := op.jwksFetches(t) - before; n < 1 || n > 2 {
		t.Errorf("the bridge fetched the keys %d times for the new key, want 1 or 2", n)
	}

	// The provider gone: the keys loaded still verify a token not seen yet.
	unseen := op.token(t, "bridge-ci", "ci-secret", resource)
	op.stop()
	if resp, body := postToken(t, b.url, unseen, sayHello); resp.StatusCode != 200 {
		t.Errorf("a new token with the provider gone: %d %s", resp.StatusCode, body)
	}
}
