package main

import (
	"context"
	"sync"
	"time"

	orcaservice "github.com/cncf/xds/go/xds/service/orca/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

// reading is one ORCA report of a backend, as the backend measured it.
type reading struct {
	at   time.Time
	util float64 // CPU utilization reported: slot time in use, in [0, 1]
}

// sampler follows every backend's own ORCA reports (out of band, every
// second) for the whole lab, as xds-server does.
type sampler struct {
	mu       sync.Mutex
	readings [][]reading // by backend
	conns    []*grpc.ClientConn
	wg       sync.WaitGroup
}

// startSampler opens one ORCA stream per backend until ctx ends.
func startSampler(ctx context.Context, bs []*backend) (*sampler, error) {
	s := &sampler{readings: make([][]reading, len(bs))}
	for j, b := range bs {
		conn, err := grpc.NewClient(b.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			s.close()
			return nil, err
		}
		s.conns = append(s.conns, conn)
		s.wg.Go(func() { s.follow(ctx, j, orcaservice.NewOpenRcaServiceClient(conn)) })
	}
	return s, nil
}

// follow reads backend j's reports, reopening the stream if it breaks.
func (s *sampler) follow(ctx context.Context, j int, c orcaservice.OpenRcaServiceClient) {
	for ctx.Err() == nil {
		stream, err := c.StreamCoreMetrics(ctx, &orcaservice.OrcaLoadReportRequest{ReportInterval: durationpb.New(time.Second)},
			grpc.WaitForReady(true))
		if err != nil {
			continue
		}
		for {
			r, err := stream.Recv()
			if err != nil {
				break
			}
			s.mu.Lock()
			s.readings[j] = append(s.readings[j], reading{at: time.Now(), util: r.GetCpuUtilization()})
			s.mu.Unlock()
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond): // backoff before reopening
		}
	}
}

// window returns every backend's readings in [from, to), with times in
// seconds since from.
func (s *sampler) window(from, to time.Time) [][]sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]sample, len(s.readings))
	for j, rs := range s.readings {
		for _, r := range rs {
			if !r.at.Before(from) && r.at.Before(to) {
				out[j] = append(out[j], sample{At: r.at.Sub(from).Seconds(), Util: r.util})
			}
		}
	}
	return out
}

// close ends the connections and waits for the streams (ctx must be done).
func (s *sampler) close() {
	for _, c := range s.conns {
		c.Close()
	}
	s.wg.Wait()
}
