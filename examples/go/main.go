// Command lockstream-example-go takes a lockstream lock, holds it while it "works",
// and releases it.
//
//	go run . --name examples/report --mode write --work-ms 2000
//
// The lock is an open Acquire stream: send `start`, read `queued` until `acquired`, do the work,
// then half-close the stream; the server answers `released` and ends the call with OK.
// Prints "queued ahead=N", "acquired token=T", "in doubt"/"confirmed" and "released" on stdout; on a failing status,
// "error: <CODE>: <details>" on stderr, and exits 1.
//
// With --session and one --name per lock, it takes several locks over one Session stream
// instead (see session.go); with --election it campaigns in the election --name with the Go
// client instead (see election.go).
//
// Credentials, as in the other examples: --ca ca.crt for TLS (with --cert and --key for a server
// that wants a client certificate), and a bearer token in LOCKSTREAM_TOKEN.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	lockstreamv1 "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/genproto/googleapis/rpc/code"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

var (
	address      = flag.String("address", "127.0.0.1:50051", "lockstream server, host:port")
	name         = new(string) // --name: the lock name (repeatable with --session)
	mode         = flag.String("mode", "mutex", "lock mode: mutex, read or write")
	owner        = flag.String("owner", "example-go", "who is asking, for operators' eyes")
	workMs       = flag.Int("work-ms", 1000, "simulated work while holding the lock, in ms")
	holdUntilEOF = flag.Bool("hold-until-eof", false, "hold the lock until stdin reaches EOF instead")
	caFile       = flag.String("ca", "", "PEM CA certificates to trust: use TLS")
	certFile     = flag.String("cert", "", "PEM client certificate (with --key), for mTLS")
	keyFile      = flag.String("key", "", "PEM private key of --cert")
	session      = flag.Bool("session", false, "take every --name on one Session stream")
	waitTimeout  *durationpb.Duration // --wait-timeout-ms; nil (absent): wait as long as it takes
	sessionNames names                // --name, repeated, with --session
)

var modes = map[string]lockstreamv1.LockMode{
	"mutex": lockstreamv1.LockMode_LOCK_MODE_MUTEX,
	"read":  lockstreamv1.LockMode_LOCK_MODE_READ,
	"write": lockstreamv1.LockMode_LOCK_MODE_WRITE,
}

func main() {
	usage := "give up queuing after this many ms (0: only if free now)"
	flag.Func("wait-timeout-ms", usage, func(s string) error {
		ms, err := strconv.ParseInt(s, 10, 64)
		waitTimeout = durationpb.New(time.Duration(ms) * time.Millisecond)
		return err
	})
	flag.Func("name", "lock name (with --session: repeat it, one per lock)", func(s string) error {
		*name = s
		return sessionNames.Set(s)
	})
	flag.Parse()
	if len(sessionNames) == 0 {
		*name = "examples/report"
		if *electionMode {
			*name = "examples/scheduler"
		}
		sessionNames = names{*name}
	}
	if _, ok := modes[*mode]; !ok {
		fmt.Fprintf(os.Stderr, "invalid --mode %q: want mutex, read or write\n", *mode)
		os.Exit(2)
	}
	if err := run(); err != nil {
		st := status.Convert(err)
		// code.Code names codes the canonical way (DEADLINE_EXCEEDED), unlike codes.Code.String().
		fmt.Fprintf(os.Stderr, "error: %s: %s\n", code.Code(st.Code()), st.Message())
		os.Exit(1)
	}
}

func run() error {
	transport, err := transportCredentials()
	if err != nil {
		return err
	}
	if *electionMode {
		return runElection(transport)
	}
	conn, err := grpc.NewClient(*address, grpc.WithTransportCredentials(transport))
	if err != nil {
		return err
	}
	defer conn.Close()
	// Returning early cancels the call, and the server then frees whatever it held or queued.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if token := os.Getenv("LOCKSTREAM_TOKEN"); token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	if *session {
		return runSession(ctx, conn, sessionNames)
	}
	stream, err := lockstreamv1.NewLockServiceClient(conn).Acquire(ctx)
	if err != nil {
		return err
	}
	start := &lockstreamv1.AcquireStart{
		Name: *name, Mode: modes[*mode], WaitTimeout: waitTimeout, Owner: *owner,
	}
	// Send returns io.EOF if the call already ended; Recv below then returns its status.
	if err := stream.Send(&lockstreamv1.AcquireRequest{
		Kind: &lockstreamv1.AcquireRequest_Start{Start: start},
	}); err != nil && err != io.EOF {
		return err
	}

	// Wait in the queue until the lock is ours.
	for acquired := false; !acquired; {
		resp, err := stream.Recv()
		if err == io.EOF {
			return status.Error(codes.Internal, "the call ended before the lock was acquired")
		} else if err != nil {
			return err // e.g. DEADLINE_EXCEEDED when --wait-timeout-ms ran out
		}
		if q := resp.GetQueued(); q != nil {
			fmt.Printf("queued ahead=%d\n", q.Ahead)
		} else if a := resp.GetAcquired(); a != nil {
			fmt.Printf("acquired token=%d\n", a.FencingToken) // pass the token to what the lock guards
			acquired = true
		}
	}

	// Hold the lock while working, and keep reading the stream: if the call ends meanwhile
	// (ABORTED: the lock was lost), stop at once, as the work is no longer protected.
	ended := make(chan error, 1)
	go func() { ended <- awaitReleased(stream) }()
	workDone := make(chan struct{})
	go func() {
		defer close(workDone)
		if *holdUntilEOF {
			_, _ = io.Copy(io.Discard, os.Stdin)
		} else {
			time.Sleep(time.Duration(*workMs) * time.Millisecond)
		}
	}()
	select {
	case <-workDone:
	case err := <-ended:
		if err == nil {
			err = status.Error(codes.Internal, "released before the client asked")
		}
		return err
	}

	// Release: half-close our side; the server answers `released` and ends the call with OK.
	if err := stream.CloseSend(); err != nil {
		return err
	}
	if err := <-ended; err != nil {
		return err
	}
	fmt.Println("released")
	return nil
}

// awaitReleased reads the rest of the call: nil once `released` came and the call ended with OK.
func awaitReleased(stream lockstreamv1.LockService_AcquireClient) error {
	released := false
	for {
		resp, err := stream.Recv()
		switch {
		case err == io.EOF && released:
			return nil
		case err == io.EOF:
			return status.Error(codes.Internal, "the call ended without `released`")
		case err != nil:
			return err
		}
		switch {
		case resp.GetInDoubt() != nil:
			// The server lost contact with ZooKeeper: pause writes to what the lock guards.
			fmt.Println("in doubt")
		case resp.GetConfirmed() != nil:
			fmt.Println("confirmed")
		case resp.GetReleased() != nil:
			released = true
		}
	}
}

// transportCredentials is plaintext, or TLS trusting --ca, with a client certificate if --cert
// and --key are given.
func transportCredentials() (credentials.TransportCredentials, error) {
	if *caFile == "" {
		return insecure.NewCredentials(), nil
	}
	pem, err := os.ReadFile(*caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--ca %s: no PEM certificate in it", *caFile)
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	if *certFile != "" {
		pair, err := tls.LoadX509KeyPair(*certFile, *keyFile)
		if err != nil {
			return nil, err
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return credentials.NewTLS(config), nil
}
