package reflect

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"

	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/await"
	"github.com/grpc-jsonrpc-bridge/grpc-jsonrpc-bridge/proto/testpb/testserver"
)

// serviceBackend serves the services register adds, with reflection, on
// addr until stop is called or the test ends.
func serviceBackend(t *testing.T, addr string, register ...testserver.Service) (stop func()) {
	t.Helper()
	return testserver.Start(t, testserver.Options{Addr: addr, Services: register, NoConn: true}).Stop
}

// fastDial dials addr with a reconnect backoff short enough for tests.
func fastDial(t *testing.T, addr string) *grpc.ClientConn {
	return dialTCP(t, addr, grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           grpcbackoff.Config{BaseDelay: 10 * time.Millisecond, Multiplier: 1.6, MaxDelay: 100 * time.Millisecond},
		MinConnectTimeout: time.Second,
	}))
}

func catalogServices(c *Catalog) []string {
	var names []string
	for _, sd := range c.Services() {
		names = append(names, string(sd.FullName()))
	}
	return names
}

func TestFilter(t *testing.T) {
	reg, err := Discover(t.Context(), dialBufconn(t, reflectionBoth))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name             string
		include, exclude []string
		want             []string
	}{
		{name: "everything", want: wantServices},
		{name: "include by package", include: []string{"demo.*", "helloworld.*"}, want: []string{"demo.v1.Notes", "helloworld.Greeter"}},
		{name: "star crosses dots", include: []string{"*.Greeter"}, want: []string{"helloworld.Greeter"}},
		{name: "exclude", exclude: []string{"test.*", "rpc.ops.Ops"}, want: []string{"demo.v1.Notes", "helloworld.Greeter"}},
		{name: "exclude wins", include: []string{"*"}, exclude: []string{"*.Notes"}, want: []string{"helloworld.Greeter", "rpc.ops.Ops", "test.v1.TestService"}},
		{name: "nothing matches", include: []string{"nope.*"}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := reg.Filter(tt.include, tt.exclude)
			if err != nil {
				t.Fatal(err)
			}
			if names := serviceNames(got); !slices.Equal(names, tt.want) {
				t.Errorf("got services %v, want %v", names, tt.want)
			}
			for _, md := range got.Methods() {
				if !slices.Contains(tt.want, string(md.Parent().FullName())) {
					t.Errorf("got method %s of a filtered-out service", md.FullName())
				}
			}
		})
	}
	if _, err := reg.Filter([]string{"[a-"}, nil); err == nil || !strings.Contains(err.Error(), "[a-") {
		t.Errorf("got %v, want an error naming the bad pattern", err)
	}
}

func TestMerge(t *testing.T) {
	a, b := dialBufconn(t, reflectionBoth), dialBufconn(t, reflectionBoth)
	regA, err := Discover(t.Context(), a)
	if err != nil {
		t.Fatal(err)
	}
	regB, err := Discover(t.Context(), b)
	if err != nil {
		t.Fatal(err)
	}
	onlyA, _ := regA.Filter([]string{"helloworld.*", "test.*"}, nil)
	onlyB, _ := regB.Filter(nil, []string{"helloworld.*", "test.*"})
	cat, err := Merge([]Part{{Name: "a", Conn: a, Registry: onlyA}, {Name: "b", Conn: b, Registry: onlyB}})
	if err != nil {
		t.Fatal(err)
	}
	if got := catalogServices(cat); !slices.Equal(got, wantServices) {
		t.Errorf("got services %v, want %v", got, wantServices)
	}
	var names []string
	for _, md := range cat.Methods() {
		names = append(names, string(md.FullName()))
		want := grpc.ClientConnInterface(b)
		if s := string(md.Parent().FullName()); strings.HasPrefix(s, "helloworld.") || strings.HasPrefix(s, "test.") {
			want = a
		}
		if cat.Conn(md) != want {
			t.Errorf("method %s routed to the wrong backend", md.FullName())
		}
	}
	if want := methodNames(regA); !slices.Equal(names, want) {
		t.Errorf("got methods %v, want %v", names, want)
	}
	if _, err := cat.Types().FindMessageByName("google.protobuf.Empty"); err != nil {
		t.Errorf("shared type google.protobuf.Empty: %v", err)
	}

	_, err = Merge([]Part{{Name: "a", Conn: a, Registry: regA}, {Name: "b", Conn: b, Registry: onlyB}})
	var dup *DuplicateServiceError
	if !errors.As(err, &dup) {
		t.Fatalf("got %v, want a *DuplicateServiceError", err)
	}
	for _, want := range []string{"demo.v1.Notes", `"a"`, `"b"`, "exclude"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("got %q, want it to mention %s", err, want)
		}
	}
}

// runWatcher runs w in the background and returns the catalogs it
// installs; cleanup stops it.
func runWatcher(t *testing.T, w *Watcher) (<-chan *Catalog, <-chan error) {
	t.Helper()
	installed := make(chan *Catalog, 100)
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { done <- w.Run(ctx, func(c *Catalog) { installed <- c }) })
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	return installed, done
}

func next(t *testing.T, installed <-chan *Catalog) *Catalog {
	t.Helper()
	select {
	case c := <-installed:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("no catalog installed within 20s")
		return nil
	}
}

func TestWatcherDuplicateAtStart(t *testing.T) {
	a, b := dialBufconn(t, reflectionBoth), dialBufconn(t, reflectionBoth)
	w := NewWatcher([]Source{{Name: "a", Conn: a}, {Name: "b", Conn: b, Include: []string{"helloworld.*"}}}, WatchOptions{})
	installed, done := runWatcher(t, w)
	var dup *DuplicateServiceError
	if err := <-done; !errors.As(err, &dup) || dup.Service != "helloworld.Greeter" {
		t.Fatalf("got %v, want a duplicate helloworld.Greeter", err)
	}
	if len(installed) != 0 {
		t.Errorf("got a catalog installed, want none")
	}
	if st := w.Status(); !strings.Contains(st.LastError, "helloworld.Greeter") {
		t.Errorf("got status %+v, want the duplicate in last_error", st)
	}
}

func TestWatcherRefreshes(t *testing.T) {
	addr := closedAddr(t)
	stop := serviceBackend(t, addr, greeterService)
	other := dialBufconn(t, reflectionBoth)
	w := NewWatcher([]Source{
		{Name: "moving", Conn: fastDial(t, addr)},
		{Name: "steady", Conn: other, Include: []string{"demo.*"}},
	}, WatchOptions{Retry: RetryOptions{MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}})
	installed, _ := runWatcher(t, w)
	if got, want := catalogServices(next(t, installed)), []string{"demo.v1.Notes", "helloworld.Greeter"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}

	// Redeployed on the same port with other services: the reconnection
	// alone triggers a refresh.
	stop()
	stop = serviceBackend(t, addr, testServices)
	if got, want := catalogServices(next(t, installed)), []string{"demo.v1.Notes", "test.v1.TestService"}; !slices.Equal(got, want) {
		t.Fatalf("after the redeploy: got %v, want %v", got, want)
	}

	// A refresh that fails keeps the last good registry and says why.
	stop()
	w.Refresh()
	await.Until(t, 20*time.Second, "the backend moving stale", func() bool { return w.Status().Backends[0].State == StateStale })
	st := w.Status()
	if st.Backends[0].LastError == "" || st.Backends[0].Services != 1 || st.Backends[1].State != StateReady {
		t.Errorf("got status %+v, want moving stale with an error and its last registry", st)
	}
	// /readyz shows the status to anyone: the error is the bridge's own
	// words, not grpc-go's (rpc error: code = ... desc = ... dial tcp ...).
	if e := st.Backends[0].LastError; !strings.HasPrefix(e, "reflect: the reflection call failed with code 14 (Unavailable)") ||
		strings.Contains(e, "rpc error") || strings.Contains(e, "dial") || strings.Contains(e, "desc") {
		t.Errorf("last_error %q, want the bridge's own text naming code 14", e)
	}
	// The merge still succeeded with the last good registry.
	if got := catalogServices(next(t, installed)); !slices.Equal(got, []string{"demo.v1.Notes", "test.v1.TestService"}) {
		t.Errorf("after a failed refresh: got %v, want the last good services", got)
	}
}

func TestWatcherRefreshWithDuplicateKeepsCatalog(t *testing.T) {
	addr := closedAddr(t)
	stop := serviceBackend(t, addr, greeterService)
	w := NewWatcher([]Source{
		{Name: "moving", Conn: fastDial(t, addr)},
		{Name: "steady", Conn: dialBufconn(t, reflectionBoth), Include: []string{"demo.*"}},
	}, WatchOptions{Retry: RetryOptions{MinBackoff: 10 * time.Millisecond}})
	installed, _ := runWatcher(t, w)
	first := next(t, installed)
	stop()
	serviceBackend(t, addr, greeterService, notes) // now clashes with steady
	await.Until(t, 20*time.Second, "the clash in last_error", func() bool { return strings.Contains(w.Status().LastError, "demo.v1.Notes") })
	if len(installed) != 0 {
		t.Errorf("a refused merge replaced the catalog %p", first)
	}
}
