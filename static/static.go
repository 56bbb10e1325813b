// Package static holds the desk's front-end files, embedded in the binary:
// the style sheet, the small script, and the vendored htmx with its
// websocket extension (scripts/vendor.sh, pinned in vendor/VERSIONS).
//
// Every file is served under a content-hashed name (app.css →
// /static/app.3f2a9c1b.css) with a year-long immutable cache lifetime, so
// a deploy changes the URL and browsers never see a stale file.
//
// It imports nothing of the project.
package static

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
)

//go:embed app.css app.js jsoncheck.js favicon.svg vendor/*.js
var files embed.FS

// Prefix is where the files are served.
const Prefix = "/static/"

// asset is one file as served.
type asset struct {
	name        string // logical name, e.g. "app.css"
	hashed      string // served name, e.g. "app.3f2a9c1b.css"
	contentType string
	body        []byte
	gz          []byte // nil when compression does not pay
	etag        string
}

// Assets serves the embedded files under their hashed names.
type Assets struct {
	byLogical map[string]*asset
	byHashed  map[string]*asset
}

// Load reads and hashes the embedded files.
func Load() (*Assets, error) {
	a := &Assets{byLogical: map[string]*asset{}, byHashed: map[string]*asset{}}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		h := hex.EncodeToString(sum[:])[:12]
		ext := path.Ext(p)
		as := &asset{name: p, hashed: strings.TrimSuffix(p, ext) + "." + h + ext, body: body, etag: `"` + h + `"`}
		as.contentType = mime.TypeByExtension(ext)
		if ext == ".js" {
			as.contentType = "text/javascript; charset=utf-8"
		}
		if as.contentType == "" {
			as.contentType = "application/octet-stream"
		}
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(body)
		_ = zw.Close()
		if buf.Len() < len(body)*9/10 {
			as.gz = buf.Bytes()
		}
		a.byLogical[p] = as
		a.byHashed[as.hashed] = as
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("static: %w", err)
	}
	return a, nil
}

// MustLoad is Load for program start: the files are compiled in, so an
// error is a build bug.
func MustLoad() *Assets {
	a, err := Load()
	if err != nil {
		panic(err)
	}
	return a
}

// URL returns the hashed URL of a logical file name ("app.css",
// "vendor/htmx.min.js"). It panics on a name that is not embedded: the
// templates name files that exist.
func (a *Assets) URL(name string) string {
	as, ok := a.byLogical[name]
	if !ok {
		panic("static: no embedded file " + name)
	}
	return Prefix + as.hashed
}

// ServeHTTP serves a file by its hashed name below Prefix; anything else is
// 404 (an old hash included: it is gone with the deploy that had it).
func (a *Assets) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, Prefix)
	as, ok := a.byHashed[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", as.contentType)
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("ETag", as.etag)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Add("Vary", "Accept-Encoding")
	if match := r.Header.Get("If-None-Match"); match != "" && strings.Contains(match, as.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := as.body
	if as.gz != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body = as.gz
	}
	h.Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(body)
	}
}

func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		enc, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(enc), "gzip") && strings.ReplaceAll(q, " ", "") != "q=0" {
			return true
		}
	}
	return false
}
