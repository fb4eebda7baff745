package main

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// seenCall is what the backend saw of one call.
type seenCall struct {
	md       metadata.MD
	deadline time.Duration // left when the call arrived
}

// recordingBackend records the metadata and deadline of every call, sends
// response headers and trailers, and reports Sleep calls starting and
// ending by cancellation.
type recordingBackend struct {
	mu        sync.Mutex
	calls     []seenCall
	sleeping  chan struct{}
	cancelled chan struct{}
}

func (b *recordingBackend) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	var left time.Duration
	if d, ok := ctx.Deadline(); ok {
		left = time.Until(d)
	}
	b.mu.Lock()
	b.calls = append(b.calls, seenCall{md: md.Copy(), deadline: left})
	b.mu.Unlock()
	_ = grpc.SetHeader(ctx, metadata.Pairs("x-be-h", "h1", "x-be-h", "h2", "x-internal", "no"))
	_ = grpc.SetTrailer(ctx, metadata.Pairs("x-be-t", "t1"))
	if !strings.HasSuffix(info.FullMethod, "/Sleep") {
		return h(ctx, req)
	}
	select {
	case b.sleeping <- struct{}{}:
	default:
	}
	resp, err := h(ctx, req)
	if errors.Is(ctx.Err(), context.Canceled) {
		select {
		case b.cancelled <- struct{}{}:
		default:
		}
	}
	return resp, err
}

func (b *recordingBackend) last(t *testing.T) seenCall {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.calls) == 0 {
		t.Fatal("the backend saw no call")
	}
	return b.calls[len(b.calls)-1]
}

// TestServeMetadataAndDeadlines runs serve in front of a real gRPC server
// on loopback: allowlisted headers (every value of a repeated one) and
// Grpc-Metadata-* reach it and others do not; its allowlisted response
// headers and trailers come back; Grpc-Timeout and X-Request-Timeout
// shorten the deadline it sees and a slow call gets code 4; a client that
// goes away cancels the call it started.
func TestServeMetadataAndDeadlines(t *testing.T) {
	be := &recordingBackend{sleeping: make(chan struct{}, 1), cancelled: make(chan struct{}, 1)}
	backend := startBackend(t, be.intercept)
	p, addr := startBridge(t, "--backend", backend, "--call-timeout", "20s",
		"--metadata-request-headers", "x-foo,authorization",
		"--metadata-response-headers", "x-be-h,x-be-t")
	url := "http://" + addr + "/"

	t.Run("metadata", func(t *testing.T) {
		h := http.Header{}
		h.Add("X-Foo", "a")
		h.Add("X-Foo", "b")
		h.Add("Authorization", "Bearer t")
		h.Add("Grpc-Metadata-Tenant", "acme")
		h.Add("Grpc-Metadata-Trace-Bin", base64.StdEncoding.EncodeToString([]byte{0, 0xff}))
		h.Add("X-Other", "no")
		status, r, rh := rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"), h)
		if status != 200 || code(r) != 0 {
			t.Fatalf("got %d %v, want a result", status, r)
		}
		md := be.last(t).md
		for key, want := range map[string]string{"x-foo": "a|b", "authorization": "Bearer t", "tenant": "acme", "trace-bin": "\x00\xff"} {
			if got := strings.Join(md.Get(key), "|"); got != want {
				t.Errorf("backend metadata %s: got %q, want %q", key, got, want)
			}
		}
		for _, key := range []string{"x-other", "grpc-metadata-tenant"} {
			if got := md.Get(key); len(got) != 0 {
				t.Errorf("backend metadata %s: got %q, want it not forwarded", key, got)
			}
		}
		if got := strings.Join(rh.Values("X-Be-H"), "|"); got != "h1|h2" {
			t.Errorf("response header X-Be-H: got %q, want h1|h2", got)
		}
		if got := rh.Get("X-Be-T"); got != "t1" {
			t.Errorf("response header X-Be-T (a trailer): got %q, want t1", got)
		}
		if got := rh.Get("X-Internal"); got != "" {
			t.Errorf("response header X-Internal: got %q, want it not returned", got)
		}
	})

	for _, tt := range []struct{ header, value string }{
		{"Grpc-Timeout", "300m"},
		{"X-Request-Timeout", "300ms"},
	} {
		t.Run(tt.header, func(t *testing.T) {
			start := time.Now()
			status, r, _ := rpc(t, http.DefaultClient, url,
				`{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Sleep","params":{"duration":"10s"}}`,
				http.Header{tt.header: {tt.value}})
			if took := time.Since(start); status != 200 || code(r) != 4 || took > 5*time.Second {
				t.Errorf("got %d %v after %s, want code 4 after about 300ms", status, r, took)
			}
			if left := be.last(t).deadline; left <= 0 || left > 300*time.Millisecond {
				t.Errorf("the backend's deadline: got %s left, want at most 300ms", left)
			}
		})
	}

	t.Run("client disconnect", func(t *testing.T) {
		for len(be.sleeping) > 0 { // the calls above
			<-be.sleeping
		}
		for len(be.cancelled) > 0 {
			<-be.cancelled
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url,
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"test.v1.TestService.Sleep","params":{"duration":"15s"}}`))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		select {
		case <-be.sleeping:
		case <-time.After(10 * time.Second):
			t.Fatal("the backend saw no Sleep call")
		}
		cancel()
		<-done
		select {
		case <-be.cancelled:
		case <-time.After(5 * time.Second):
			t.Fatal("the backend's call was not cancelled when the client went away")
		}
	})

	if code := p.stop(t); code != exitOK {
		t.Errorf("got exit code %d, want 0; stderr:\n%s", code, p.stderr.rest())
	}
}

// TestServeMaxMetadataBytes: --max-metadata-bytes reaches the bridge: a
// request forwarding more metadata gets HTTP 431 and never reaches the
// backend; one within it does.
func TestServeMaxMetadataBytes(t *testing.T) {
	be := &recordingBackend{sleeping: make(chan struct{}, 1), cancelled: make(chan struct{}, 1)}
	backend := startBackend(t, be.intercept)
	_, addr := startBridge(t, "--backend", backend, "--max-metadata-bytes", "300")
	url := "http://" + addr + "/"
	// x-request-id: 12 + 5 + 32; x-forwarded-for: 15 + 9 + 32 (127.0.0.1);
	// big: 3 + n + 32, so 160 fits and 161 does not.
	for _, tt := range []struct {
		n      int
		status int
	}{{160, 200}, {161, 431}} {
		h := http.Header{"X-Request-Id": {"rid-1"}, "Grpc-Metadata-Big": {strings.Repeat("x", tt.n)}}
		status, r, _ := rpc(t, http.DefaultClient, url, call("helloworld.Greeter.SayHello"), h)
		if status != tt.status {
			t.Errorf("metadata of %d bytes: got HTTP %d %v, want %d", 105+35+tt.n, status, r, tt.status)
		}
		if tt.status == 431 && code(r) != -32600 {
			t.Errorf("over the limit: got %v, want -32600", r)
		}
	}
	be.mu.Lock()
	defer be.mu.Unlock()
	if len(be.calls) != 1 {
		t.Errorf("the backend saw %d calls, want 1 (the one within the limit)", len(be.calls))
	}
}
