package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a child process: its output goes to a log file.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string // path of its log file
	exited chan struct{}
	err    error // of Wait, once exited is closed
}

// startProc starts bin with args, its output to dir/name.log; stdout, if
// not nil, also receives each line of its standard output.
func startProc(dir, name, bin string, args []string, stdout chan<- string) (*proc, error) {
	path := filepath.Join(dir, name+".log")
	logf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = procAttr()
	cmd.Stderr = logf
	var out io.ReadCloser
	if stdout != nil {
		if out, err = cmd.StdoutPipe(); err != nil {
			logf.Close()
			return nil, fmt.Errorf("lab: %s: %w", name, err)
		}
	} else {
		cmd.Stdout = logf
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("lab: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: path, exited: make(chan struct{})}
	if out != nil {
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				fmt.Fprintln(logf, sc.Text())
				select {
				case stdout <- sc.Text():
				default:
				}
			}
		}()
	}
	go func() { p.err = cmd.Wait(); logf.Close(); close(p.exited) }()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after grace, and waits.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// cpuSeconds is the CPU time (user + system) the process has used so far;
// 0 where /proc is missing. Clock ticks are taken as 100 per second
// (USER_HZ on Linux).
func (p *proc) cpuSeconds() float64 { return procCPU(p.cmd.Process.Pid) }

// procCPU reads utime + stime of pid from /proc/<pid>/stat.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may hold spaces: fields
	// count from after the last ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

// selfCPU is this process's CPU time so far (the clients and samplers).
func selfCPU() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("lab: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// freeAddr is "127.0.0.1:<free port>".
func freeAddr() (string, error) {
	p, err := freePort()
	return "127.0.0.1:" + strconv.Itoa(p), err
}

// build builds the binaries the lab runs into dir: xds-server, the
// example backend and the weight simulator. root is the module root.
func build(ctx context.Context, root, dir string) (map[string]string, error) {
	out := map[string]string{}
	for name, pkg := range map[string]string{"xds-server": "./cmd/xds-server", "backend": "./examples/backend",
		"weightsim": "./bench/weightsim"} {
		out[name] = filepath.Join(dir, name)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out[name], pkg)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("lab: go build %s: %w\n%s", pkg, err, b)
		}
	}
	return out, nil
}

// moduleRoot finds the directory of go.mod from the working directory up.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("lab: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("lab: no go.mod here or above: run the lab from the repository")
		}
		dir = parent
	}
}

// awaitHTTP polls url until it answers 200, the process exits or the
// timeout passes: the process is another one, there is no event to await.
func awaitHTTP(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = errors.New(resp.Status)
		}
		select {
		case <-p.exited:
			return fmt.Errorf("lab: %s exited (%v); see %s", p.name, p.err, p.log)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("lab: %s: %s not ready after %v: %v; see %s", p.name, url, timeout, err, p.log)
		}
	}
}
