// Package browsertest starts the headless Chromium that the browser tests
// of the bridge and of its explorer drive with chromedp: a fresh profile,
// and nothing of the browser's own on the network (these machines have
// none). It is for tests only.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Package is the Debian package of the browser, which .ci/run installs.
const Package = "chromium"

// Start starts a headless Chromium for t, with extra options after the
// common ones, and returns a context of one of its tabs, which ends within
// timeout or with the test. Without Chromium the test fails under CI (CI
// set) and is skipped otherwise.
func Start(t testing.TB, timeout time.Duration, extra ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	var exe string
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("headless Chromium is not installed: CI must install the Debian package %s (apt-get install -y %s)", Package, Package)
		}
		t.Skipf("headless Chromium is not installed: install the Debian package %s (apt-get install -y %s)", Package, Package)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		// The network is closed: without these Chromium keeps trying to
		// reach its own services.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-proxy-server", true),
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, append(opts, extra...)...)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	if err := chromedp.Do(bctx); err != nil { // starts the browser
		t.Fatalf("cannot start %s: %v", exe, err)
	}
	return bctx
}
