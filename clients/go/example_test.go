// Examples for the package's documentation: take a lock and work under it; TryLock's answer
// when the lock is held.

package lockstream_test

import (
	"context"
	"errors"
	"fmt"
	"log"

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
