package main

// The Session RPC: several locks over one stream, each request tagged with an id we choose.
//
//	go run . --session --name examples/a --name examples/b --mode write --work-ms 2000
//
// Prints "queued NAME ahead=N", "acquired NAME token=T" and "released NAME"; a request that
// fails prints "error: NAME: CODE: message" on stderr (the others are still released), and the
// program exits 1.

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	lockstreamv1 "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// names collects repeated --name flags in session mode.
type names []string

func (n *names) String() string     { return fmt.Sprint(*n) }
func (n *names) Set(s string) error { *n = append(*n, s); return nil }

// runSession takes every lock in `locks` on one Session stream, holds them for --work-ms, and
// releases each. Request i has id i+1.
func runSession(ctx context.Context, conn *grpc.ClientConn, locks []string) error {
	stream, err := lockstreamv1.NewLockServiceClient(conn).Session(ctx)
	if err != nil {
		return err
	}
	send := func(req *lockstreamv1.SessionRequest) error {
		// io.EOF: the call already ended; Recv then returns its status.
		if err := stream.Send(req); err != nil && err != io.EOF {
			return err
		}
		return nil
	}
	// `open` first; the acquires can follow at once, without waiting for `opened`.
	if err := send(&lockstreamv1.SessionRequest{
		Kind: &lockstreamv1.SessionRequest_Open{Open: &lockstreamv1.SessionOpen{}},
	}); err != nil {
		return err
	}
	for i, lock := range locks {
		acquire := &lockstreamv1.SessionAcquire{
			RequestId: uint32(i + 1), Name: lock, Mode: modes[*mode], WaitTimeout: waitTimeout, Owner: *owner,
		}
		if err := send(&lockstreamv1.SessionRequest{
			Kind: &lockstreamv1.SessionRequest_Acquire{Acquire: acquire},
		}); err != nil {
			return err
		}
	}

	// Read until every request is acquired or has ended.
	nameOf := func(id uint32) string { return locks[id-1] }
	held := map[uint32]bool{}
	failed := false
	for open := len(locks); open > 0; {
		resp, err := recvSession(stream)
		if err != nil {
			return err
		}
		id := resp.GetRequestId()
		switch {
		case resp.GetQueued() != nil:
			fmt.Printf("queued %s ahead=%d\n", nameOf(id), resp.GetQueued().Ahead)
		case resp.GetAcquired() != nil:
			fmt.Printf("acquired %s token=%d\n", nameOf(id), resp.GetAcquired().FencingToken)
			held[id] = true
			open--
		case resp.GetEnded() != nil:
			// Ended before it was granted: this request failed alone; the session goes on.
			reportEnded(nameOf(id), resp.GetEnded())
			failed = true
			open--
		}
	}

	// Work while holding every lock that was granted, then release each one.
	if !failed {
		time.Sleep(time.Duration(*workMs) * time.Millisecond)
	}
	for id := uint32(1); int(id) <= len(locks); id++ {
		if !held[id] {
			continue
		}
		if err := send(&lockstreamv1.SessionRequest{
			Kind: &lockstreamv1.SessionRequest_Release{Release: &lockstreamv1.SessionRelease{RequestId: id}},
		}); err != nil {
			return err
		}
	}
	for len(held) > 0 {
		resp, err := recvSession(stream)
		if err != nil {
			return err
		}
		id := resp.GetRequestId()
		if ended := resp.GetEnded(); ended != nil && held[id] {
			delete(held, id)
			if codes.Code(ended.Code) == codes.OK {
				fmt.Printf("released %s\n", nameOf(id))
			} else {
				// e.g. ABORTED: the lock was lost while we held it.
				reportEnded(nameOf(id), ended)
				failed = true
			}
		}
	}

	// Nothing is held any more: half-close, and the server ends the call with OK.
	if err := stream.CloseSend(); err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
	}
	if failed {
		os.Exit(1)
	}
	return nil
}

// recvSession reads the next message; the end of the call before we are done is an error.
func recvSession(stream lockstreamv1.LockService_SessionClient) (*lockstreamv1.SessionResponse, error) {
	resp, err := stream.Recv()
	if err == io.EOF {
		return nil, status.Error(codes.Internal, "the session ended before its requests did")
	}
	return resp, err
}

func reportEnded(lock string, ended *lockstreamv1.SessionRequestEnded) {
	fmt.Fprintf(os.Stderr, "error: %s: %s: %s\n", lock, code.Code(ended.Code), ended.Message)
}
