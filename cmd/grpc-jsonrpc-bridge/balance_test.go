package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/fleet"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
)

// TestLoadBalancing: the bridge in front of 4 pods named by DNS spreads
// a batch of 100 over all 4 on both call paths, lists the addresses in
// /readyz and counts them in /metrics, and logs the set when it changes.
func TestLoadBalancing(t *testing.T) {
	for _, direct := range []string{"true", "false"} {
		t.Run("direct_calls="+direct, func(t *testing.T) {
			f := fleet.Start(t, 4)
			p, addr := startBridge(t, "--backend", f.Target(), "--balance", "round_robin",
				"--resolve-interval", "500ms", "--direct-calls="+direct)
			url := "http://" + addr
			await.Until(t, 10*time.Second, "4 ready addresses", func() bool {
				return strings.Count(get(t, url+"/readyz"), `"state":"ready","in_flight"`) == 4
			})
			var batch []string
			for i := range 100 {
				batch = append(batch, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"helloworld.Greeter.SayHello","params":{}}`, i))
			}
			resp, err := http.Post(url, "application/json", strings.NewReader("["+strings.Join(batch, ",")+"]"))
			if err != nil {
				t.Fatal(err)
			}
			var replies []struct {
				Result struct{ Message string }
				Error  any
			}
			err = json.NewDecoder(resp.Body).Decode(&replies)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			served := map[string]int{}
			for _, r := range replies {
				if r.Error != nil {
					t.Fatalf("a member failed: %v", r.Error)
				}
				served[r.Result.Message]++
			}
			if len(served) != 4 || len(replies) != 100 {
				t.Fatalf("the batch of 100 reached %v, want all 4 addresses", served)
			}

			var ready struct {
				Details struct {
					Backends []struct {
						Name      string
						Addresses []struct {
							Address  string
							State    string
							InFlight *int `json:"in_flight"`
						}
					}
				}
			}
			if err := json.Unmarshal([]byte(get(t, url+"/readyz")), &ready); err != nil {
				t.Fatal(err)
			}
			if b := ready.Details.Backends; len(b) != 1 || len(b[0].Addresses) != 4 || b[0].Addresses[0].Address != f.Addr(fleet.IP(0)) ||
				b[0].Addresses[0].InFlight == nil {
				t.Fatalf("/readyz backends %+v, want the 4 addresses with their state and calls in flight", b)
			}

			metrics := get(t, url+"/metrics")
			for _, want := range []string{
				`jsonrpc_bridge_backend_addresses{backend="default",state="ready"} 4`,
				`jsonrpc_bridge_backend_addresses{backend="default",state="down"} 0`,
			} {
				if !strings.Contains(metrics, want) {
					t.Errorf("/metrics has no %s", want)
				}
			}
			for i := range 4 {
				re := regexp.MustCompile(`jsonrpc_bridge_backend_address_calls_total\{address="` + regexp.QuoteMeta(f.Addr(fleet.IP(i))) + `",backend="default"\} (\d+)`)
				m := re.FindStringSubmatch(metrics)
				if m == nil {
					t.Fatalf("/metrics counts no calls of %s", f.Addr(fleet.IP(i)))
				}
				if n, _ := strconv.Atoi(m[1]); n < served[f.Addr(fleet.IP(i))] {
					t.Errorf("/metrics counts %d calls of %s, which served %d", n, f.Addr(fleet.IP(i)), served[f.Addr(fleet.IP(i))])
				}
			}

			f.Remove(fleet.IP(3))
			p.stderr.until(t, "the change logged", func(l string) bool {
				return strings.Contains(l, `"msg":"backend addresses changed"`) && strings.Contains(l, `"removed":["`+f.Addr(fleet.IP(3))+`"]`)
			})
			f.StopDNS()
			await.Until(t, 10*time.Second, "resolve_error in /readyz", func() bool {
				return strings.Contains(get(t, url+"/readyz"), `"resolve_error":`)
			})
			if code, r, _ := rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"), nil); code != 200 || r["error"] != nil {
				t.Fatalf("a call with DNS down got %d %v", code, r)
			}
		})
	}
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestBadLBSettings: an unknown balance, or a status code in
// outlier_codes that is none, exits 2 at start, naming the key and what it
// takes, from a flag, a variable and a backends entry.
func TestBadLBSettings(t *testing.T) {
	for _, setting := range []struct {
		key, value, inFile string
		want               []string
	}{
		{"balance", "random", "random", []string{"least_request", "round_robin", "pick_first", `"random"`}},
		{"outlier_codes", "UNAVAILABLE,SOMETIMES", "[14, SOMETIMES]", []string{`"SOMETIMES"`, "UNAVAILABLE"}},
	} {
		for _, from := range []string{"flag", "env", "file"} {
			t.Run(setting.key+"/"+from, func(t *testing.T) {
				clearEnv(t)
				args, key := []string{"--backend", "127.0.0.1:1"}, setting.key
				switch from {
				case "flag":
					args = append(args, "--"+strings.ReplaceAll(setting.key, "_", "-"), setting.value)
				case "env":
					t.Setenv("BRIDGE_"+strings.ToUpper(setting.key), setting.value)
				case "file":
					args = []string{"--config", writeConfig(t, "backends:\n  - address: 127.0.0.1:1\n    plaintext: true\n    "+setting.key+": "+setting.inFile+"\n")}
					key = "backends[0]." + setting.key
				}
				var stdout, stderr strings.Builder
				code := run(t.Context(), append([]string{"serve", "--listen", "127.0.0.1:0"}, args...), &stdout, &stderr)
				if code != 2 {
					t.Fatalf("got exit code %d, want 2; stderr:\n%s", code, stderr.String())
				}
				for _, want := range append([]string{key}, setting.want...) {
					if !strings.Contains(stderr.String(), want) {
						t.Errorf("stderr %q does not name %s", stderr.String(), want)
					}
				}
			})
		}
	}
}
