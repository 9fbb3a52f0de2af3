// The tests' harness: the server most tests share, started by TestMain, and the helpers they
// dial, wait and look with.

package lockstream_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
)

// shared is the server most tests use; tests that kill or cut theirs start their own.
var shared *server

func TestMain(m *testing.M) {
	var err error
	shared, err = launch()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	shared.stop()
	os.Exit(code)
}

// patience bounds every wait for an event, so that a broken promise fails instead of hanging.
const patience = 20 * time.Second

func dial(t *testing.T, address string, opts ...lockstream.ClientOption) *lockstream.Client {
	t.Helper()
	client, err := lockstream.Dial(address, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	return client
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	t.Cleanup(cancel)
	return ctx
}

func lockName(t *testing.T) string { return "go-client/" + t.Name() }

// await fails the test if ch is not closed within patience.
func await(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("%s did not happen within %s", what, patience)
	}
}

// queued returns an option that closes the channel when the request is queued.
func queued() (lockstream.LockOption, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	return lockstream.WithOnQueued(func(int) { once.Do(func() { close(ch) }) }), ch
}

func describe(t *testing.T, client *lockstream.Client, name string) *pb.DescribeLockResponse {
	t.Helper()
	described, err := client.RPC().DescribeLock(testContext(t), &pb.DescribeLockRequest{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return described
}
