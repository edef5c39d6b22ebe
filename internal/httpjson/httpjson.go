package httpjson

import (
	"encoding/json"
	"net/http"
)

// Write writes v as JSON indented by two spaces, with status code.
func Write(w http.ResponseWriter, code int, v any) {
	write(w, code, v, "  ")
}

// WriteCompact writes v as JSON on one line, with status code.
func WriteCompact(w http.ResponseWriter, code int, v any) {
	write(w, code, v, "")
}

func write(w http.ResponseWriter, code int, v any, indent string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", indent)
	_ = enc.Encode(v) // the client went away: nothing to do
}
