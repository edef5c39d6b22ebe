package main

import (
	"context"
	"time"
)

// shutdown runs the lame-duck shutdown sequence:
//
//  1. enter lame duck: the ORCA lame-duck metric, then Consul maintenance;
//  2. keep serving, new RPCs included, for the drain delay;
//  3. stop accepting: graceful stop of the gRPC server (in-flight RPCs
//     finish) within the shutdown timeout, then a hard stop; HTTP shutdown;
//  4. deregister from Consul.
//
// Without drain (a server failed), steps 1 and 2 are skipped. A close of
// force (a second signal) cuts steps 2 and 3 short. Consul errors are
// logged and the sequence goes on.
func (b *backend) shutdown(drain bool, force <-chan struct{}) {
	begin := time.Now()
	if drain {
		b.enterLameDuck(begin)
		b.log.Info("step 2/4: draining, still serving", "drain_delay", b.cfg.DrainDelay)
		timer := time.NewTimer(b.cfg.DrainDelay)
		select {
		case <-timer.C:
		case <-force:
			timer.Stop()
			b.log.Warn("drain cut short by a second signal", "elapsed", time.Since(begin))
		}
	}
	b.stopServing(force)
	step := time.Now()
	if err := b.registry.deregister(); err != nil {
		b.log.Error("step 4/4: deregistration failed; Consul removes the service after its check is critical long enough",
			"error", err, "deregister_critical_after", b.cfg.DeregisterCriticalAfter, "took", time.Since(step))
	} else {
		b.log.Info("step 4/4: deregistered from Consul", "took", time.Since(step))
	}
	b.log.Info("shutdown complete", "elapsed", time.Since(begin))
}

// enterLameDuck reports the lame-duck metric over ORCA (streams send it at
// once) and puts the service in Consul maintenance.
func (b *backend) enterLameDuck(begin time.Time) {
	b.metrics.lameDuck.Store(true)
	close(b.lameDuck)
	if err := b.registry.maintenance("lame duck: shutting down"); err != nil {
		b.log.Error("step 1/4: lame duck entered, but not Consul maintenance", "error", err,
			"orca_metric", b.cfg.LameDuckMetric, "took", time.Since(begin))
		return
	}
	b.log.Info("step 1/4: lame duck entered: Consul maintenance and ORCA metric",
		"orca_metric", b.cfg.LameDuckMetric, "took", time.Since(begin))
}

// stopServing stops both servers: the gRPC server gracefully within the
// shutdown timeout (or until force is closed), then hard; the HTTP server
// within the shutdown timeout.
func (b *backend) stopServing(force <-chan struct{}) {
	begin := time.Now()
	b.log.Info("step 3/4: stopping: no new connections, in-flight RPCs finish",
		"shutdown_timeout", b.cfg.ShutdownTimeout)
	close(b.stopping) // ends the ORCA streams, which would hold up GracefulStop
	b.health.Shutdown()
	stopped := make(chan struct{})
	go func() {
		b.grpc.GracefulStop()
		close(stopped)
	}()
	timer := time.NewTimer(b.cfg.ShutdownTimeout)
	defer timer.Stop()
	graceful := true
	select {
	case <-stopped:
	case <-timer.C:
		graceful = false
	case <-force:
		graceful = false
	}
	if !graceful {
		b.grpc.Stop() // cancels the RPCs still in flight
		<-stopped
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.cfg.ShutdownTimeout)
	defer cancel()
	if err := b.http.Shutdown(ctx); err != nil {
		b.http.Close()
		b.log.Warn("http server did not stop gracefully", "error", err)
	}
	b.stopLoad()
	b.log.Info("step 3/4: stopped serving", "graceful", graceful, "took", time.Since(begin))
}
