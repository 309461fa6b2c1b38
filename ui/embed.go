// Package ui serves the dashboard: the built single-page app of web/,
// embedded in the binary so it works offline and needs no Node.js to run.
// `make ui` rebuilds dist from web/.
package ui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed dist
var dist embed.FS

// Path is where the dashboard is served.
const Path = "/ui/"

// Handler serves the dashboard under Path; /ui redirects there.
func Handler() http.Handler {
	files, err := fs.Sub(dist, "dist")
	if err != nil {
		panic("ui: " + err.Error()) // the embedded tree always has dist
	}
	static := http.StripPrefix(Path, http.FileServerFS(files))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/ui" {
			http.Redirect(w, r, Path, http.StatusMovedPermanently)
			return
		}
		// The app's own routes are in the fragment, so every file is
		// static; the assets change with the binary, not while it runs.
		w.Header().Set("Cache-Control", "no-cache")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		static.ServeHTTP(w, r)
	})
}
