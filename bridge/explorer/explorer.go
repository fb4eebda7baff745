// Package explorer serves the API explorer: a page, embedded in the
// binary, from which a browser lists the methods of the bridge's OpenRPC
// document, calls them over POST / and streams them over GET /ws. It
// fetches nothing from any other origin. See docs/explorer.md.
package explorer

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
)

//go:embed assets
var assets embed.FS

// Path is where the page is served; its assets are under Path + "/".
const Path = "/explorer"

// policy is the Content-Security-Policy of every reply: scripts, styles
// and connections only from the bridge itself, no frames, no inline code.
const policy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'%s; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file ready to serve, as it is and gzipped.
type asset struct {
	body, gzipped []byte
	contentType   string
	etag          string
}

// Handler serves the page at Path and its assets below it. Anything else
// under Path is 404; methods other than GET and HEAD are 405. Mount it
// with bridge.Options.Explorer.
func Handler() http.Handler {
	h := &handler{files: map[string]asset{}}
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embed is part of the binary
	}
	err = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		var gz bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
		zw.Write(b)
		zw.Close()
		h.files[name] = asset{body: b, gzipped: gz.Bytes(), contentType: contentTypes[path.Ext(name)], etag: hex.EncodeToString(sum[:8])}
		return nil
	})
	if err != nil {
		panic(err)
	}
	return h
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

type handler struct {
	files map[string]asset
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := ""
	switch p := r.URL.Path; {
	case p == Path:
		name = "index.html"
	case p == Path+"/":
		// The page's relative URLs resolve against Path, without the
		// slash. The Location is relative too, so that a proxy serving the
		// bridge under a prefix keeps it.
		w.Header().Set("Location", "../explorer")
		w.WriteHeader(http.StatusMovedPermanently)
		return
	case strings.HasPrefix(p, Path+"/"):
		name = p[len(Path)+1:]
	}
	a, ok := h.files[name]
	if !ok || name == "" || strings.Contains(name, "/") {
		reply(w, http.StatusNotFound, "not found: the explorer is served at GET "+Path)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		reply(w, http.StatusMethodNotAllowed, "method not allowed")
		return
	}
	hd := w.Header()
	hd.Set("Content-Security-Policy", CSP(r.Host))
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
	hd.Set("Cache-Control", "no-cache") // revalidated by ETag: a new binary serves new assets
	hd.Set("Vary", "Accept-Encoding")
	body, etag := a.body, `"`+a.etag+`"`
	if acceptsGzip(r.Header.Values("Accept-Encoding")) {
		body, etag = a.gzipped, `"`+a.etag+`-gzip"`
		hd.Set("Content-Encoding", "gzip")
	}
	hd.Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hd.Set("Content-Type", a.contentType)
	hd.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// CSP is the Content-Security-Policy of the page served to a request for
// host. CSP level 3 browsers match ws: and wss: URLs of the page's own
// host with 'self'; older ones need them listed, which is done for a host
// made of the characters a host name, IP address and port have.
func CSP(host string) string {
	extra := ""
	if host != "" && validHost(host) {
		extra = " ws://" + host + " wss://" + host
	}
	return strings.Replace(policy, "%s", extra, 1)
}

func validHost(h string) bool {
	if len(h) > 255 {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}

// acceptsGzip reports whether Accept-Encoding values allow gzip: listed
// (or "*") without q=0.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			name, params, _ := strings.Cut(item, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "*" {
				continue
			}
			q := strings.ReplaceAll(strings.ToLower(params), " ", "")
			if q == "q=0" || strings.HasPrefix(q, "q=0.") && strings.Trim(q[4:], "0") == "" {
				return false
			}
			return true
		}
	}
	return false
}

func reply(w http.ResponseWriter, code int, msg string) {
	body := `{"error":` + strconv.Quote(msg) + `}`
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(code)
	w.Write([]byte(body))
}
