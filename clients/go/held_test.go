// What a holder does with a held lock: publish a value, downgrade it, hear a revoke request.

package lockstream_test

import (
	"context"
	"errors"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

func TestValueAndDowngrade(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	lock, err := client.Lock(ctx, name, lockstream.WithMode(lockstream.Write), lockstream.WithValue([]byte("10.0.0.7:8080")))
	if err != nil {
		t.Fatal(err)
	}
	if holders := describe(t, client, name).GetHolders(); string(holders[0].GetValue()) != "10.0.0.7:8080" {
		t.Fatalf("value %q", holders[0].GetValue())
	}
	if err := lock.SetValue(ctx, []byte("10.0.0.8:8080")); err != nil {
		t.Fatal(err)
	}
	if holders := describe(t, client, name).GetHolders(); string(holders[0].GetValue()) != "10.0.0.8:8080" {
		t.Fatalf("value %q after SetValue", holders[0].GetValue())
	}
	// A reader queued behind the writer is granted once it downgrades, while it still holds.
	option, isQueued := queued()
	granted := make(chan *lockstream.Lock, 1)
	go func() {
		reader, err := dial(t, shared.address).Lock(ctx, name, lockstream.WithMode(lockstream.Read), option)
		if err != nil {
			t.Error(err)
		}
		granted <- reader
	}()
	await(t, isQueued, "the reader queued")
	if err := lock.Downgrade(ctx); err != nil {
		t.Fatal(err)
	}
	if lock.Mode() != lockstream.Read {
		t.Fatalf("mode %v after Downgrade", lock.Mode())
	}
	reader := <-granted
	if reader == nil {
		t.Fatal("the reader was not granted")
	}
	if holders := describe(t, client, name).GetHolders(); len(holders) != 2 {
		t.Fatalf("holders %v, want the downgraded writer and the reader", holders)
	}
	_ = reader.Unlock(ctx)
	_ = lock.Unlock(ctx)

	// A read hold cannot be downgraded: the request ends with FAILED_PRECONDITION.
	read, err := client.Lock(ctx, name, lockstream.WithMode(lockstream.Read))
	if err != nil {
		t.Fatal(err)
	}
	if err := read.Downgrade(ctx); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("Downgrade of a read hold: %v, want FAILED_PRECONDITION", err)
	}
}

func TestRevokeEndsTheLocksContext(t *testing.T) {
	ctx, client, name := testContext(t), dial(t, shared.address), lockName(t)
	lock, err := client.Lock(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.RPC().RevokeLock(ctx, &pb.RevokeLockRequest{Name: name, Reason: "maintenance", ForceAfter: durationpb.New(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	await(t, lock.RevokeRequested(), "the revoke request")
	await(t, lock.Context().Done(), "the lock's context ending")
	if !errors.Is(context.Cause(lock.Context()), lockstream.ErrRevoked) || lock.Reason() != "maintenance" {
		t.Fatalf("cause %v, reason %q", context.Cause(lock.Context()), lock.Reason())
	}
	if err := lock.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
