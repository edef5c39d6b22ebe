package main

import (
	"context"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/orca"
	"google.golang.org/grpc/status"
)

// delayKey is the request metadata key that makes a long-running call: the
// call waits that many milliseconds, in [0, 600000], before it answers.
const delayKey = "x-delay-ms"

// testService is grpc.testing.TestService: UnaryCall and EmptyCall, the
// calls the e2e clients make.
type testService struct {
	testgrpc.UnimplementedTestServiceServer
	id       string // Consul service id, answered in server_id
	hostname string
	load     *load
	slots    *slots // nil: a call takes only its x-delay-ms
}

// UnaryCall answers with the backend's id in server_id and its hostname.
func (s *testService) UnaryCall(ctx context.Context, _ *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	if err := s.serve(ctx); err != nil {
		return nil, err
	}
	return &testgrpc.SimpleResponse{ServerId: s.id, Hostname: s.hostname}, nil
}

// EmptyCall answers nothing.
func (s *testService) EmptyCall(ctx context.Context, _ *testgrpc.Empty) (*testgrpc.Empty, error) {
	if err := s.serve(ctx); err != nil {
		return nil, err
	}
	return &testgrpc.Empty{}, nil
}

// serve does the work of a call and records its load: it waits for the
// delay the call asks for, if any, after sending the response headers so
// that the client can tell that the call has started. The call's ORCA
// trailer carries the server metrics and the request cost delay_ms.
func (s *testService) serve(ctx context.Context) (err error) {
	s.load.begin(time.Now())
	defer func() { s.load.end(time.Now(), err != nil) }()
	delay, err := callDelay(ctx)
	if err != nil {
		return err
	}
	if rec := orca.CallMetricsRecorderFromContext(ctx); rec != nil {
		rec.SetRequestCost("delay_ms", float64(delay.Milliseconds()))
	}
	if s.slots != nil {
		return s.slots.hold(ctx, delay)
	}
	if delay == 0 {
		return nil
	}
	if err := grpc.SendHeader(ctx, metadata.MD{}); err != nil {
		return status.Errorf(codes.Internal, "backend: send header: %v", err)
	}
	timer := time.NewTimer(delay)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
}

// callDelay is the delay asked for by the call's x-delay-ms metadata; 0
// without it.
func callDelay(ctx context.Context) (time.Duration, error) {
	vals := metadata.ValueFromIncomingContext(ctx, delayKey)
	if len(vals) == 0 {
		return 0, nil
	}
	ms, err := strconv.ParseInt(vals[0], 10, 64)
	if err != nil || ms < 0 || time.Duration(ms)*time.Millisecond > maxDelay {
		return 0, status.Errorf(codes.InvalidArgument, "backend: %s %q: want milliseconds in [0, %d]",
			delayKey, vals[0], maxDelay.Milliseconds())
	}
	return time.Duration(ms) * time.Millisecond, nil
}
