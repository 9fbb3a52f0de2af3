// Command hold takes one lock with the Go client and holds it until told to release it, for
// the cross-language tests (test/integration/interop.test.ts) and for trying the client out.
//
//	go run ./examples/hold --address 127.0.0.1:50051 --name reports/daily --mode write
//
// Prints "queued ahead=N", "acquired token=T", then reads commands on stdin: "describe" prints
// "holders tokens=T1,T2" (the lock's holders as the server describes them), "release" releases
// and prints "released"; end of input releases too. If the lock is lost it prints "lost ERROR"
// and exits 3. With --history FILE it appends "enter OWNER TOKEN" once granted and
// "exit OWNER TOKEN" before releasing: one file several holders append to shows who held when.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	lockstream "github.com/lockstream/lockstream/clients/go"
	pb "github.com/lockstream/lockstream/gen/go/lockstream/v1"
)

var modes = map[string]lockstream.Mode{
	"mutex": lockstream.Mutex, "read": lockstream.Read, "write": lockstream.Write,
}

func main() {
	address := flag.String("address", "127.0.0.1:50051", "lockstream server")
	name := flag.String("name", "", "lock name")
	mode := flag.String("mode", "mutex", "mutex, read or write")
	owner := flag.String("owner", "go", "owner shown to operators, and in the history")
	history := flag.String("history", "", "file to append enter/exit lines to")
	grace := flag.Duration("resume-grace", lockstream.DefaultResumeGrace, "resume grace")
	flag.Parse()
	if err := run(*address, *name, modes[*mode], *owner, *history, *grace); err != nil {
		fmt.Fprintln(os.Stderr, "error", err)
		os.Exit(1)
	}
}

func run(address, name string, mode lockstream.Mode, owner, history string, grace time.Duration) error {
	client, err := lockstream.Dial(address, lockstream.WithDefaultOwner(owner), lockstream.WithResumeGrace(grace))
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	lock, err := client.Lock(ctx, name, lockstream.WithMode(mode),
		lockstream.WithOnQueued(func(ahead int) { fmt.Printf("queued ahead=%d\n", ahead) }))
	if err != nil {
		return err
	}
	record(history, "enter", owner, lock.Token())
	fmt.Printf("acquired token=%d\n", lock.Token())
	go func() {
		<-lock.Lost()
		fmt.Println("lost", lock.Err())
		os.Exit(3)
	}()
	lines := bufio.NewScanner(os.Stdin)
	for lines.Scan() {
		switch strings.TrimSpace(lines.Text()) {
		case "describe":
			described, err := client.RPC().DescribeLock(ctx, &pb.DescribeLockRequest{Name: name})
			if err != nil {
				return err
			}
			var tokens []string
			for _, holder := range described.GetHolders() {
				tokens = append(tokens, fmt.Sprint(holder.GetFencingToken()))
			}
			fmt.Printf("holders tokens=%s\n", strings.Join(tokens, ","))
		case "release":
			return release(lock, history, owner)
		}
	}
	return release(lock, history, owner)
}

func release(lock *lockstream.Lock, history, owner string) error {
	record(history, "exit", owner, lock.Token())
	if err := lock.Unlock(context.Background()); err != nil {
		return err
	}
	fmt.Println("released")
	return nil
}

// record appends one line to the history file (O_APPEND: whole lines, in the order written).
func record(history, event, owner string, token uint64) {
	if history == "" {
		return
	}
	file, err := os.OpenFile(history, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, "error", err)
		os.Exit(1)
	}
	defer file.Close()
	fmt.Fprintf(file, "%s %s %d\n", event, owner, token)
}
