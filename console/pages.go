package console

import (
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"time"
)

//go:embed assets
var assets embed.FS

// pages are the server-rendered pages, one template set each.
var pages = func() map[string]*template.Template {
	funcs := template.FuncMap{"pct": func(x float64) float64 { return 100 * x }}
	out := map[string]*template.Template{}
	for _, p := range []string{"fleet", "service", "drains", "ratelimit"} {
		out[p] = template.Must(template.New("").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/"+p+".html"))
	}
	return out
}()

// page is what a page template gets.
type page struct {
	Title, Page, Service string
	TokenRequired        bool
	At                   string
	Data                 any
}

// csp allows only the console's own script and styles.
const csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'"

// Handlers adds the console to an admin mux: / (a redirect to /ui/), the
// pages under /ui/, /ui/static/ and the JSON API under /ui/api/.
func (c *Console) Handlers(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusFound)
	})
	static, _ := fs.Sub(assets, "assets") // cannot fail: a valid, embedded directory
	files := http.StripPrefix("/ui/static/", http.FileServerFS(static))
	mux.HandleFunc("GET /ui/static/", func(w http.ResponseWriter, r *http.Request) {
		c.m.requests.WithLabelValues("asset").Inc()
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, http.StatusOK, page{Title: "Fleet", Page: "fleet"}, func() any { return c.fleet() })
	})
	mux.HandleFunc("GET /ui/services/{name}", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		if err := checkInput(name, ""); err != nil {
			c.m.requests.WithLabelValues("error").Inc()
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		code, data := http.StatusOK, func() any { return nil }
		if !c.cfg.TokenRequired { // with a token the page has no data, and does not say whether the service exists
			v, ok := c.service(name, "")
			if !ok {
				code = http.StatusNotFound
			}
			data = func() any { return v }
		}
		c.render(w, code, page{Title: name, Page: "service", Service: name}, data)
	})
	mux.HandleFunc("GET /ui/drains", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, http.StatusOK, page{Title: "Drains", Page: "drains"}, func() any { return c.drains() })
	})
	mux.HandleFunc("GET /ui/ratelimit", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, http.StatusOK, page{Title: "Rate limits", Page: "ratelimit"}, func() any { return c.rateLimits() })
	})
	c.api(mux)
}

// render writes page p; data is read only when the pages may show data
// (no admin token).
func (c *Console) render(w http.ResponseWriter, code int, p page, data func() any) {
	c.m.requests.WithLabelValues("page").Inc()
	p.TokenRequired, p.At = c.cfg.TokenRequired, c.cfg.Now().UTC().Format(time.TimeOnly)
	if !p.TokenRequired {
		p.Data = data()
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Security-Policy", csp)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := pages[p.Page].ExecuteTemplate(w, "layout", p); err != nil {
		c.log.Warn("rendering a console page failed", "page", p.Page, "error", err)
	}
}
