package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run runs the backend until SIGTERM or SIGINT and its shutdown sequence;
// it returns the exit code: 0 after a signal, 1 when the backend failed,
// 2 for bad flags.
func run(args []string, stdout, stderr io.Writer) int {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2 // parseConfig wrote the error
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: cfg.LogLevel})).
		With("component", "backend")
	// Caught from the start: a signal during startup shuts down once ready.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	b, err := start(cfg, log)
	if err != nil {
		log.Error("backend did not start", "error", err)
		return 1
	}
	fmt.Fprintln(stdout, b.readyLine())
	b.log.Info("ready", "grpc", b.grpcLis.Addr().String(), "http", b.httpLis.Addr().String(),
		"service", cfg.Service)

	code := 0
	select {
	case sig := <-sigs:
		b.log.Info("signal received, shutting down", "signal", sig.String())
	case err := <-b.failed:
		b.log.Error("server failed, shutting down", "error", err)
		code = 1
	}
	force := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case sig := <-sigs:
			b.log.Warn("second signal: stopping now", "signal", sig.String())
			close(force)
		case <-done:
		}
	}()
	b.shutdown(code == 0, force)
	return code
}
