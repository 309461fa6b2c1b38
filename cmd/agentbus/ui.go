package main

import (
	"net/http"

	"github.com/agentbus/agentbus/ui"
)

// withUI serves the dashboard at /ui beside the API; everything else goes
// to the API.
func withUI(apiHandler http.Handler) http.Handler {
	mux := http.NewServeMux()
	dashboard := ui.Handler()
	mux.Handle("/ui", dashboard)
	mux.Handle(ui.Path, dashboard)
	mux.Handle("/", apiHandler)
	return mux
}
