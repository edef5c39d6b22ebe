package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/xds-server/xds-server/internal/freeport"
	"github.com/xds-server/xds-server/internal/pause"
)

// proc is a process the benchmark started.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when it exited
	err     error         // its exit status, once done
}

// procs starts processes and stops every one of them, by pid.
type procs struct {
	mu      sync.Mutex
	list    []*proc
	log     *slog.Logger
	cleanup []func() // run by stopAll once every process has exited
}

// start runs path with args and extra env (on top of ours), its output
// in dir/name.log.
func (ps *procs) start(name, dir, path string, args, env []string) (*proc, error) {
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("rlsbench: %w", err)
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		out.Close()
		return nil, fmt.Errorf("rlsbench: start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		out.Close()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	ps.log.Info("started", "process", name, "pid", cmd.Process.Pid)
	return p, nil
}

// stopAll sends SIGTERM to every process still running, waits up to 5 s
// for each, then kills it.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := ps.list
	ps.list = nil
	ps.mu.Unlock()
	for _, p := range list {
		select {
		case <-p.done:
			continue
		default:
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range list {
		select {
		case <-p.done:
		case <-time.After(5 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	for _, f := range ps.cleanup {
		f()
	}
	ps.cleanup = nil
}

// exited returns an error with the tail of its log if p is no longer
// running, nil otherwise.
func (p *proc) exited() error {
	select {
	case <-p.done:
		return fmt.Errorf("rlsbench: %s exited (%v); its log ends:\n%s", p.name, p.err, tail(p.logPath, 20))
	default:
		return nil
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// freePort returns a TCP port free on 127.0.0.1 right now.
func freePort() (int, error) {
	ports, err := freeport.Loopback(1)
	if err != nil {
		return 0, fmt.Errorf("rlsbench: free port: %w", err)
	}
	return ports[0], nil
}

// waitFor calls ready every 50 ms until it returns nil, p exits, ctx is
// done or timeout passes.
func waitFor(ctx context.Context, p *proc, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		if err := p.exited(); err != nil {
			return err
		}
		err := ready(ctx)
		if err == nil {
			return nil
		}
		if !pause.For(ctx, 50*time.Millisecond) {
			return fmt.Errorf("rlsbench: %s not ready after %v: %w", p.name, timeout, err)
		}
	}
}

// redisDo sends one command to the Redis server at addr and returns its
// reply: the text of a status reply or the payload of a bulk string (a
// minimal RESP client, enough for PING, FLUSHALL, CLUSTER INFO and
// CLUSTER NODES); an error reply is an error.
func redisDo(ctx context.Context, addr string, args ...string) (string, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", fmt.Errorf("rlsbench: redis: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", fmt.Errorf("rlsbench: redis: %w", err)
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("rlsbench: redis: %w", err)
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case strings.HasPrefix(line, "-"):
		return "", fmt.Errorf("rlsbench: redis %s: %s", args[0], line[1:])
	case strings.HasPrefix(line, "$"):
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("rlsbench: redis %s: unexpected reply %q", args[0], line)
		}
		payload := make([]byte, n+2) // and its CRLF
		if _, err := io.ReadFull(r, payload); err != nil {
			return "", fmt.Errorf("rlsbench: redis: %w", err)
		}
		return string(payload[:n]), nil
	}
	return strings.TrimPrefix(line, "+"), nil
}

// cpuTime is the user plus system CPU time a process has used so far,
// from /proc/PID/stat (pid 0: this process).
func cpuTime(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("rlsbench: %w", err)
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("rlsbench: malformed " + path)
	}
	fields := strings.Fields(s[i+1:]) // from field 3 (state)
	if len(fields) < 13 {
		return 0, errors.New("rlsbench: malformed " + path)
	}
	utime, err1 := strconv.ParseUint(fields[11], 10, 64) // field 14
	stime, err2 := strconv.ParseUint(fields[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return 0, errors.New("rlsbench: malformed " + path)
	}
	const userHZ = 100 // USER_HZ: the clock ticks of /proc, 100 on Linux
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}
