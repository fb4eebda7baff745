package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/config"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestJWTConfigErrorsExit2: the settings of identity providers are
// checked at start, each error naming its key.
func TestJWTConfigErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"an issuer without audiences", []string{"--auth-jwt-issuer", "https://idp.example.com"}, []string{`"auth.jwt.audiences"`, "required"}},
		{"audiences without an issuer", []string{"--auth-jwt-audiences", "https://bridge.example.com"}, []string{`"auth.jwt.audiences"`, "auth.jwt.issuer is not"}},
		{"HS256", []string{"--auth-jwt-issuer", "https://idp.example.com", "--auth-jwt-audiences", "a", "--auth-jwt-algorithms", "RS256,HS256"}, []string{`"auth.jwt.algorithms"`, "never accepted"}},
		{"none", []string{"--auth-jwt-issuer", "https://idp.example.com", "--auth-jwt-audiences", "a", "--auth-jwt-algorithms", "none"}, []string{`"auth.jwt.algorithms"`}},
		{"a missing key set file", []string{"--auth-jwt-issuer", "https://idp.example.com", "--auth-jwt-audiences", "a", "--auth-jwt-jwks-file", dir + "/none.json"}, []string{`"auth.jwt.jwks_file"`, "none.json"}},
		{"a key set file with no key", []string{"--auth-jwt-issuer", "https://idp.example.com", "--auth-jwt-audiences", "a", "--auth-jwt-jwks-file", writeFile(t, dir, "empty.json", `{"keys":[]}`)}, []string{`"auth.jwt.jwks_file"`, "no usable signing key"}},
		{"an issuer to discover that is no URL", []string{"--auth-jwt-issuer", "kubernetes/serviceaccount", "--auth-jwt-audiences", "a"}, []string{`"auth.jwt.issuer"`, "jwks_url or jwks_file"}},
		{"a claim to a key of the bridge", []string{"--auth-jwt-issuer", "https://idp.example.com", "--auth-jwt-audiences", "a", "--auth-jwt-claims-metadata", "sub=x-bridge-identity"}, []string{`"auth.jwt.claims_metadata"`}},
		{"a selector of no issuer", []string{"--auth-jwt-issuer", "https://idp.example.com", "--auth-jwt-audiences", "a", "--auth-file",
			writeFile(t, dir, "ids.yaml", "identities:\n  - name: x\n    jwt: {issuer: https://other.example.com}\n    allow: ['*']\n")}, []string{`"auth.file"`, "https://other.example.com"}},
		{"a selector without JWTs", []string{"--auth-file", writeFile(t, dir, "ids2.yaml", "identities:\n  - name: x\n    jwt: {subjects: [a]}\n    allow: ['*']\n")}, []string{`"auth.file"`, "auth.jwt.issuer"}},
		{"a resource that is no URL", []string{"--auth-jwt-issuer", "https://idp.example.com", "--auth-jwt-audiences", "a", "--auth-resource", "bridge"}, []string{`"auth.resource"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := runSync(t, append([]string{"serve", "--backend", "127.0.0.1:1", "--listen", "127.0.0.1:0"}, tt.args...)...)
			if code != exitUsage {
				t.Errorf("got exit code %d, want 2; stderr:\n%s", code, stderr)
			}
			for _, want := range tt.want {
				if !strings.Contains(stderr, want) {
					t.Errorf("stderr %q lacks %q", stderr, want)
				}
			}
		})
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// secretDir is a directory laid out as the kubelet lays out a mounted
// Secret: the files are symlinks through ..data to a timestamped
// directory, and an update swaps ..data in one rename.
type secretDir struct {
	t   *testing.T
	dir string
	n   int
}

func newSecretDir(t *testing.T, files map[string]string) *secretDir {
	s := &secretDir{t: t, dir: t.TempDir()}
	s.update(files)
	for name := range files {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(s.dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// update writes files into a new timestamped directory and swaps ..data
// to it, as the kubelet's atomic writer does.
func (s *secretDir) update(files map[string]string) {
	s.t.Helper()
	s.n++
	ts := filepath.Join(s.dir, "..2026_01_01_00_00_0"+string(rune('0'+s.n)))
	if err := os.Mkdir(ts, 0o700); err != nil {
		s.t.Fatal(err)
	}
	for name, content := range files {
		writeFile(s.t, ts, name, content)
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
}

func (s *secretDir) path(name string) string { return filepath.Join(s.dir, name) }

func identitiesYAML(tokens map[string]string) string {
	var b strings.Builder
	b.WriteString("identities:\n")
	for name, token := range tokens {
		b.WriteString("  - name: " + name + "\n    tokens: [\"" + hashToken(token) + "\"]\n    allow: [\"*\"]\n")
	}
	return b.String()
}

// TestAuthFileReload: auth.file mounted as a Kubernetes Secret is reread
// when the kubelet swaps it: a new token works and a removed one is
// refused within 5 s; a broken file keeps the last good identities
// (logged at Error, counted, shown in /readyz, still ready); SIGHUP
// rereads it too.
func TestAuthFileReload(t *testing.T) {
	backend := startBackend(t, nil)
	secret := newSecretDir(t, map[string]string{"identities.yaml": identitiesYAML(map[string]string{"old": "old-token-0123456789"})})
	p, addr := startBridge(t, "--backend", backend, "--auth-file", secret.path("identities.yaml"))
	url := "http://" + addr
	client := &http.Client{Transport: &http.Transport{}, Timeout: waitLimit}
	t.Cleanup(client.CloseIdleConnections)
	status := func(token string) int {
		s, _, _ := rpc(t, client, url+"/", call("helloworld.Greeter.SayHello"), http.Header{"Authorization": {"Bearer " + token}})
		return s
	}
	if got := status("old-token-0123456789"); got != 200 {
		t.Fatalf("the first token: %d", got)
	}

	secret.update(map[string]string{"identities.yaml": identitiesYAML(map[string]string{"new": "new-token-0123456789"})})
	if took := await.Until(t, 5*time.Second, "the new token works", func() bool { return status("new-token-0123456789") == 200 }); took > 5*time.Second {
		t.Errorf("the new token worked after %s", took)
	}
	if got := status("old-token-0123456789"); got != 401 {
		t.Errorf("the removed token: %d, want 401", got)
	}

	secret.update(map[string]string{"identities.yaml": "identities:\n  - name: broken\n    tokens: [\"sha256:nothex\"]\n"})
	p.stderr.until(t, "the reload error", func(l string) bool {
		return strings.Contains(l, `"level":"ERROR"`) && strings.Contains(l, "cannot reload the identities")
	})
	if got := status("new-token-0123456789"); got != 200 {
		t.Errorf("the last good token after a broken file: %d, want 200", got)
	}
	code, body := do(t, url+"/readyz", "")
	if code != 200 || !strings.Contains(body, `"reload_errors":1`) || !strings.Contains(body, "sha256") {
		t.Errorf("readyz after a broken file: %d %s, want 200 with the error", code, body)
	}
	if _, metrics := do(t, url+"/metrics", ""); !strings.Contains(metrics, "jsonrpc_bridge_auth_reload_errors_total 1") {
		t.Errorf("metrics lack jsonrpc_bridge_auth_reload_errors_total 1")
	}

	// Written in place, without a swap event the watcher could miss:
	// SIGHUP rereads it anyway.
	target, _ := filepath.EvalSymlinks(secret.path("identities.yaml"))
	writeFile(t, filepath.Dir(target), filepath.Base(target), identitiesYAML(map[string]string{"hup": "hup-token-0123456789"}))
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	await.Until(t, 5*time.Second, "the token of the file SIGHUP read", func() bool { return status("hup-token-0123456789") == 200 })
}

// TestJWKSFileReload: a key set file is reread when it changes: a token
// of a key added works, one of a key removed is refused (cached or not),
// and a bad file keeps the last good keys.
func TestJWKSFileReload(t *testing.T) {
	backend := startBackend(t, nil)
	const issuer, audience = "https://idp.example.com", "https://bridge.example.com"
	k1, k2 := ecKey(t, "k1"), ecKey(t, "k2")
	dir := t.TempDir()
	jwks := writeFile(t, dir, "jwks.json", keySet(t, k1))
	ids := writeFile(t, dir, "ids.yaml", "identities:\n  - name: any\n    jwt: {}\n    allow: ['*']\n")
	p, addr := startBridge(t, "--backend", backend, "--auth-file", ids, "--auth-jwt-issuer", issuer,
		"--auth-jwt-audiences", audience, "--auth-jwt-jwks-file", jwks)
	url := "http://" + addr
	client := &http.Client{Transport: &http.Transport{}, Timeout: waitLimit}
	t.Cleanup(client.CloseIdleConnections)
	status := func(k *signer) int {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": issuer, "aud": audience, "sub": "s", "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = k.kid
		s, err := tok.SignedString(k.key)
		if err != nil {
			t.Fatal(err)
		}
		st, _, _ := rpc(t, client, url+"/", call("helloworld.Greeter.SayHello"), http.Header{"Authorization": {"Bearer " + s}})
		return st
	}
	if got := status(k1); got != 200 {
		t.Fatalf("a token of the file's key: %d", got)
	}
	if got := status(k2); got != 401 {
		t.Fatalf("a token of another key: %d", got)
	}
	// Written as editors and kubectl cp do: a new file renamed over.
	writeFile(t, dir, "jwks.json.new", keySet(t, k2))
	if err := os.Rename(filepath.Join(dir, "jwks.json.new"), jwks); err != nil {
		t.Fatal(err)
	}
	await.Until(t, 5*time.Second, "the new key verifies", func() bool { return status(k2) == 200 })
	if got := status(k1); got != 401 {
		t.Errorf("a token of the removed key: %d, want 401", got)
	}
	writeFile(t, dir, "jwks.json", `{"keys": [`)
	p.stderr.until(t, "the reload error", func(l string) bool { return strings.Contains(l, "cannot reload a key set file") })
	if got := status(k2); got != 200 {
		t.Errorf("the last good key after a broken file: %d, want 200", got)
	}
}

type signer struct {
	kid string
	key *ecdsa.PrivateKey
}

func ecKey(t *testing.T, kid string) *signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return &signer{kid: kid, key: k}
}

func keySet(t *testing.T, keys ...*signer) string {
	t.Helper()
	var set jwkset.JWKSMarshal
	for _, k := range keys {
		j, err := jwkset.NewJWKFromKey(&k.key.PublicKey, jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: k.kid, ALG: jwkset.AlgES256, USE: jwkset.UseSig}})
		if err != nil {
			t.Fatal(err)
		}
		set.Keys = append(set.Keys, j.Marshal())
	}
	b, err := json.Marshal(set)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJWKSRefreshFloor: a jwks_refresh under a minute is taken as a
// minute, and said so.
func TestJWKSRefreshFloor(t *testing.T) {
	var log strings.Builder
	p, err := newProvider(config.JWT{Issuer: "https://idp.example.com", Audiences: []string{"a"}, JWKSRefresh: time.Second},
		"auth.jwt.", slog.New(slog.NewTextHandler(&log, nil)), func() {})
	if err != nil {
		t.Fatal(err)
	}
	if p.Refresh() != time.Minute || !strings.Contains(log.String(), "jwks_refresh") {
		t.Errorf("refresh %s, log %q: want 1m0s and a warning", p.Refresh(), log.String())
	}
}
