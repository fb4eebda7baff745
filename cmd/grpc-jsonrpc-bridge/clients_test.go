package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestServeHTTP2PriorKnowledge: the plain listener speaks HTTP/2 with
// prior knowledge (h2c) beside HTTP/1.1.
func TestServeHTTP2PriorKnowledge(t *testing.T) {
	_, addr := startBridge(t, "--backend", startBackend(t, nil))
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	h2c := &http.Client{Transport: &http.Transport{Protocols: protocols}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/", strings.NewReader(call("helloworld.Greeter.SayHello")))
	resp, err := h2c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || !strings.Contains(b.String(), `"result"`) {
		t.Errorf("h2c: %s %d %s, want HTTP/2 200 with a result", resp.Proto, resp.StatusCode, b.String())
	}
	status, r, _ := rpc(t, http.DefaultClient, "http://"+addr+"/", call("helloworld.Greeter.SayHello"), nil)
	if status != 200 || r["result"] == nil {
		t.Errorf("HTTP/1.1 beside it: %d %v", status, r)
	}
}

// TestCurl runs curl, where it is installed, as the README's users do:
// --compressed (a gzip reply it decodes) and --http2-prior-knowledge.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("curl is not installed")
		}
		t.Skip("curl is not installed")
	}
	_, addr := startBridge(t, "--backend", startBackend(t, nil))
	url := "http://" + addr + "/"
	big := `{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Echo","params":{"fString":"` + strings.Repeat("x", 4000) + `"}}`
	for _, tt := range []struct {
		name string
		args []string
		want []string // in curl's output (-i: headers, then the body)
	}{
		{"compressed", []string{"-s", "-i", "--compressed", url, "-d", big}, []string{"Content-Encoding: gzip", `"result"`, strings.Repeat("x", 4000)}},
		{"compressed document", []string{"-s", "-i", "--compressed", "http://" + addr + "/openrpc.json"}, []string{"Content-Encoding: gzip", `"openrpc"`}},
		{"http2 prior knowledge", []string{"-s", "-i", "--http2-prior-knowledge", url, "-d", call("helloworld.Greeter.SayHello")}, []string{"HTTP/2 200", `"result"`}},
	} {
		out, err := exec.Command(curl, tt.args...).CombinedOutput()
		if err != nil {
			t.Errorf("%s: curl %v: %v\n%s", tt.name, tt.args, err, out)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(strings.ReplaceAll(string(out), "content-encoding", "Content-Encoding"), w) {
				t.Errorf("%s: curl's output lacks %q:\n%.600s", tt.name, w, out)
			}
		}
	}
}
