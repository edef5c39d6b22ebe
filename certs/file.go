package certs

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"os"
	"sync"
	"time"
)

// DefaultCheckEvery is how often, at most, files are checked for changes
// when nothing else is configured: a rotated file is in use within this
// time (on the next handshake or read after it).
const DefaultCheckEvery = time.Second

// stamp identifies a version of a file: its modification time, size and
// content hash. The hash is needed: the kernel stamps a write with a
// coarse clock (a few ms), so a file rewritten at once with content of the
// same size (a rotated PEM) keeps its time and size.
type stamp struct {
	mod  time.Time
	size int64
	sum  [sha256.Size]byte
}

// maxStampBytes bounds what stampOf reads: certificate, key and token
// files are a few KiB; past it only time and size tell versions apart.
const maxStampBytes = 1 << 20

func stampOf(path string) (stamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return stamp{}, err
	}
	st := stamp{mod: fi.ModTime(), size: fi.Size()}
	if fi.Size() <= maxStampBytes {
		data, err := os.ReadFile(path)
		if err != nil {
			return stamp{}, err
		}
		st.sum = sha256.Sum256(data)
	}
	return st, nil
}

// File is a small secret file (a bearer token), read again when it
// changes. Its content is never logged or printed.
type File struct {
	path  string
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	checked time.Time
	st      stamp
	data    []byte // trimmed of surrounding white space
}

// NewFile reads path at once. every is the longest time a change goes
// unnoticed (0: DefaultCheckEvery); now is the clock (nil: time.Now).
func NewFile(path string, every time.Duration, now func() time.Time) (*File, error) {
	if every <= 0 {
		every = DefaultCheckEvery
	}
	if now == nil {
		now = time.Now
	}
	f := &File{path: path, every: every, now: now}
	st, data, err := f.read()
	if err != nil {
		return nil, err
	}
	f.st, f.data, f.checked = st, data, now()
	return f, nil
}

func (f *File) read() (stamp, []byte, error) {
	st, err := stampOf(f.path)
	if err != nil {
		return stamp{}, nil, fmt.Errorf("certs: %w", err)
	}
	data, err := os.ReadFile(f.path)
	if err != nil {
		return stamp{}, nil, fmt.Errorf("certs: %w", err)
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return stamp{}, nil, fmt.Errorf("certs: %s is empty", f.path)
	}
	return st, data, nil
}

// Bytes returns the file's content, read again if the file changed since
// the last check (checked at most once per every). A file that became
// unreadable or empty keeps its last content. The caller must not modify
// the result.
func (f *File) Bytes() []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now := f.now(); now.Sub(f.checked) >= f.every {
		f.checked = now
		if st, err := stampOf(f.path); err == nil && st != f.st {
			if st, data, err := f.read(); err == nil {
				f.st, f.data = st, data
			}
		}
	}
	return f.data
}
