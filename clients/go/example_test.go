package lockstream_test

import (
	"context"
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
