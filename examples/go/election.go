package main

// The ElectionService through the Go client (clients/go): campaign, lead, resign.
//
//	go run . --election --name examples/scheduler --value 10.0.0.7:8080 --lead-ms 2000
//
// Prints "queued ahead=N" while other candidates are ahead, "elected term=T" once it leads,
// "proclaimed" after replacing its value with --proclaim, "leader term=T value=V" (the leader as
// anyone asking sees it), then "resigned". If the leadership is lost meanwhile it prints "lost",
// then "error: ABORTED: <details>" on stderr, and exits 1. Credentials as for a lock: --ca,
// --cert, --key and LOCKSTREAM_TOKEN.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
)

var (
	electionMode = flag.Bool("election", false, "campaign in the election --name instead (election.go)")
	value        = flag.String("value", "10.0.0.7:8080", "with --election: the candidate's value")
	proclaim     = flag.String("proclaim", "10.0.0.7:9443", "with --election: the value to proclaim once elected")
	leadMs       = flag.Int("lead-ms", 1000, "with --election: how long to lead, in ms")
	leadUntilEOF = flag.Bool("lead-until-eof", false, "with --election: lead until stdin reaches EOF instead")
)

func runElection(transport credentials.TransportCredentials) error {
	options := []lockstream.ClientOption{
		lockstream.WithDefaultOwner(*owner), lockstream.WithTransportCredentials(transport),
	}
	if token := os.Getenv("LOCKSTREAM_TOKEN"); token != "" {
		options = append(options, lockstream.WithDialOptions(grpc.WithPerRPCCredentials(bearer(token))))
	}
	client, err := lockstream.Dial(*address, options...)
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()

	// [docs:elections]
	election := client.Election(*name)
	// Waits until elected: candidates are elected one at a time, in the order they joined.
	leadership, err := election.Campaign(ctx, []byte(*value),
		lockstream.WithOnCampaignQueued(func(ahead int) { fmt.Printf("queued ahead=%d\n", ahead) }))
	if err != nil {
		return err
	}
	// The term is the leader's fencing token: larger for every later leader.
	fmt.Printf("elected term=%d\n", leadership.Term())

	if err := leadership.Proclaim(ctx, []byte(*proclaim)); err != nil { // observers are told
		return err
	}
	fmt.Println("proclaimed")
	leader, err := election.Leader(ctx) // anyone can ask; ErrNoLeader when nobody leads
	if err != nil {
		return err
	}
	fmt.Printf("leader term=%d value=%s\n", leader.Term, leader.Value)

	// Lead (under leadership.Context(), passing the term on) until done, or until lost.
	select {
	case <-leading():
	case <-leadership.Done():
		fmt.Println("lost")
		return leadership.Err() // matches lockstream.ErrLost
	}
	if err := leadership.Resign(ctx); err != nil { // the next candidate is elected
		return err
	}
	fmt.Println("resigned")
	// [/docs:elections]
	return nil
}

// leading is closed when the leader is done: after --lead-ms, or with --lead-until-eof at the
// end of stdin.
func leading() <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if *leadUntilEOF {
			_, _ = io.Copy(io.Discard, os.Stdin)
		} else {
			time.Sleep(time.Duration(*leadMs) * time.Millisecond)
		}
	}()
	return done
}

// bearer sends LOCKSTREAM_TOKEN with every call.
type bearer string

func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

func (bearer) RequireTransportSecurity() bool { return false }
