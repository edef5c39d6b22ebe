package consulstate

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestConsulTokenFileRotates: a Consul client made with a token file sends
// the file's token, and after the file is rewritten (and the check period
// has passed on the injected clock) the new one, with no new client; an
// emptied file keeps the last token.
func TestConsulTokenFileRotates(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get(tokenHeader))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`"127.0.0.1:8300"`))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "token")
	write := func(s string) {
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("first-token\n")
	clock := time.Unix(1000, 0)
	c := ClientConfig{Address: srv.URL, TokenFile: path, Now: func() time.Time { return clock }}
	client, err := NewClient(c)
	if err != nil {
		t.Fatal(err)
	}
	ask := func() string {
		t.Helper()
		if _, err := client.Status().Leader(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		return seen[len(seen)-1]
	}
	if got := ask(); got != "first-token" {
		t.Fatalf("token %q, want first-token", got)
	}
	write("second-token-rotated\n") // another size: a change even within the file system's time resolution
	clock = clock.Add(2 * time.Second)
	if got := ask(); got != "second-token-rotated" {
		t.Fatalf("after rotation: token %q, want second-token-rotated", got)
	}
	write("")
	clock = clock.Add(2 * time.Second)
	if got := ask(); got != "second-token-rotated" {
		t.Fatalf("emptied file: token %q, want the last one kept", got)
	}
}

// TestConsulExplicitTokenWins: Token set means the file is not followed.
func TestConsulExplicitTokenWins(t *testing.T) {
	got := make(chan string, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Get(tokenHeader)
		_, _ = w.Write([]byte(`""`))
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte("from-file"), 0o600); err != nil {
		t.Fatal(err)
	}
	client, err := NewClient(ClientConfig{Address: srv.URL, Token: "explicit", TokenFile: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Status().Leader(); err != nil {
		t.Fatal(err)
	}
	if tok := <-got; tok != "explicit" {
		t.Errorf("token %q, want explicit", tok)
	}
}
