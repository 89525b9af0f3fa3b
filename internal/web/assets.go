package web

import (
	"embed"
	"io/fs"
	"net/http"
)

// The dashboard: one page, its script and its style sheet, built into the
// binary (no build step, no CDN: compute clusters are often offline).
//
//go:embed assets
var assets embed.FS

func assetHandler() http.Handler {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree always has it
	}
	return http.StripPrefix("/assets/", http.FileServerFS(sub))
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	data, err := assets.ReadFile("assets/index.html")
	if err != nil {
		s.fail(w, http.StatusInternalServerError, err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = w.Write(data)
}
