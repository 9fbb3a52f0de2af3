// Examples for the package's documentation: take a lock and work under it; TryLock's answer
// when the lock is held; lead an election, and observe one; a holder's guarded records.

package lockstream_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strconv"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
)

func Example() {
	client, err := lockstream.Dial(shared.address) // "127.0.0.1:50051"
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	lock, err := client.Lock(context.Background(), "reports/daily", lockstream.WithMode(lockstream.Write))
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(context.Background())
	// Work under lock.Context(): it ends if the lock is lost. Hand lock.Token() to storage.
	fmt.Println("holding", lock.Name(), "as", lock.Mode(), "with a token:", lock.Token() > 0)
	// Output: holding reports/daily as write with a token: true
}

func ExampleClient_TryLock() {
	client, err := lockstream.Dial(shared.address)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	rebuild, err := client.TryLock(ctx, "examples/cache-rebuild")
	switch {
	case errors.Is(err, lockstream.ErrLocked):
		fmt.Println("someone else is rebuilding the cache")
	case err != nil:
		log.Fatal(err)
	default:
		defer rebuild.Unlock(ctx)
		fmt.Println("rebuilding the cache")
	}
	// Output: rebuilding the cache
}

func ExampleElection() {
	client, err := lockstream.Dial(shared.address)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	election := client.Election("examples/scheduler")
	// Waits until this candidate leads; others campaigning meanwhile are elected after it.
	leadership, err := election.Campaign(ctx, []byte("10.0.0.7:8080"))
	if err != nil {
		log.Fatal(err)
	}
	// Work under leadership.Context(): it ends if the term is lost (leadership.Done()). Hand
	// leadership.Term() to storage: it grows with every leader, as a fencing token.
	leader, err := election.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leading:", leader.Term == leadership.Term(), string(leader.Value))
	if err := leadership.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = election.Leader(ctx)
	fmt.Println("after resigning, nobody leads:", errors.Is(err, lockstream.ErrNoLeader))
	// Output:
	// leading: true 10.0.0.7:8080
	// after resigning, nobody leads: true
}

func ExampleElection_Observe() {
	client, err := lockstream.Dial(shared.address)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx, stop := context.WithTimeout(context.Background(), time.Minute)
	defer stop()
	election := client.Election("examples/observed")
	events := election.Observe(ctx) // the current state first, then every term in order
	campaign := func() {
		leadership, err := election.Campaign(ctx, []byte("10.0.0.8:8080"))
		if err != nil {
			log.Fatal(err)
		}
		_ = leadership.Proclaim(ctx, []byte("10.0.0.8:9090"))
		_ = leadership.Resign(ctx)
	}
	for event := range events {
		switch event.Kind {
		case lockstream.EventVacant:
			fmt.Println("nobody leads")
			if event.AfterTerm != 0 {
				stop() // the leader has come and gone: the channel is closed next
				continue
			}
			go campaign()
		case lockstream.EventTerm:
			fmt.Println("a leader, at", string(event.Value))
		case lockstream.EventProclaimed:
			fmt.Println("the leader moved to", string(event.Value))
		case lockstream.EventFailed:
			log.Fatal(event.Err())
		}
	}
	// Output:
	// nobody leads
	// a leader, at 10.0.0.8:8080
	// the leader moved to 10.0.0.8:9090
	// nobody leads
}

func ExampleHolderRecords_Update() {
	client, err := lockstream.Dial(shared.address)
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close()
	ctx := context.Background()
	lock, err := client.Lock(ctx, "examples/nightly-export")
	if err != nil {
		log.Fatal(err)
	}
	defer lock.Unlock(ctx)
	// The lock's records, written as this holder: once it has lost the lock, every write is
	// refused (ErrNotHeld), even before it has heard of the loss.
	records := client.Records(lock.Name(), lock.Token())
	for _, batch := range []int{100, 250} {
		// Read the offset where the last holder stopped, move it on, write it back; read and
		// move it again if someone wrote it in between.
		next, err := records.Update(ctx, "offset", func(current []byte, found bool) []byte {
			offset, _ := strconv.Atoi(string(current)) // 0 when not found
			return []byte(strconv.Itoa(offset + batch))
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println("exported up to", string(next.Value))
	}
	// Records outlive their writer's hold: anyone who may see the lock reads them.
	record, found, err := client.GetRecord(ctx, "examples/nightly-export", "offset")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the next holder starts at", string(record.Value), found)
	// The export is done: the next one starts from the beginning.
	if _, err := records.Delete(ctx, "offset"); err != nil {
		log.Fatal(err)
	}
	// Output:
	// exported up to 100
	// exported up to 350
	// the next holder starts at 350 true
}
