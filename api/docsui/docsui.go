// Package docsui serves the API reference page at /docs with its renderer,
// Stoplight Elements, embedded in the binary: the page works offline and
// loads nothing from elsewhere.
//
// The assets are @stoplight/elements@9.0.25 from npm (web-components.min.js
// and styles.min.css, Apache-2.0, LICENSE alongside). To update them:
//
//	npm pack @stoplight/elements@<version> && tar xzf stoplight-elements-<version>.tgz
//	cp package/{web-components.min.js,web-components.min.js.LICENSE.txt,styles.min.css,LICENSE} api/docsui/assets/
//
// and change Version.
package docsui

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
)

// Version is the @stoplight/elements release embedded.
const Version = "9.0.25"

//go:embed assets
var assets embed.FS

var page = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="referrer" content="no-referrer">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>{{.Title}}</title>
    <link rel="stylesheet" href="{{.Prefix}}/assets/styles.min.css">
    <script src="{{.Prefix}}/assets/web-components.min.js"></script>
  </head>
  <body style="height: 100vh;">
    <elements-api apiDescriptionUrl="{{.SpecURL}}" router="hash" layout="sidebar" tryItCredentialsPolicy="same-origin"></elements-api>
  </body>
</html>
`))

// csp allows the page only its own scripts, styles and document.
const csp = "default-src 'none'; base-uri 'none'; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; " +
	"img-src 'self' data:; font-src 'self' data:; script-src 'self'; style-src 'self' 'unsafe-inline'"

// Register serves the reference page at prefix (/docs) and its assets under
// prefix/assets/, rendering the OpenAPI document at specURL.
func Register(mux *http.ServeMux, prefix, specURL, title string) {
	prefix = strings.TrimSuffix(prefix, "/")
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded folder is there at build time
	}
	files := http.StripPrefix(prefix+"/assets/", http.FileServerFS(sub))
	mux.Handle("GET "+prefix+"/assets/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The file names carry no version: revalidate rather than cache forever.
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	}))
	mux.HandleFunc("GET "+prefix, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", csp)
		_ = page.Execute(w, struct{ Title, Prefix, SpecURL string }{title, prefix, specURL})
	})
}
