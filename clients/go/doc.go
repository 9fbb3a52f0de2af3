// Package lockstream is the Go client of lockstream, a gRPC lock server on ZooKeeper.
//
// A lock is held from the moment Lock returns until Unlock, or until it is lost: the server
// cannot vouch for it any more (its ZooKeeper session expired, it was revoked, or this client
// could not reach it within the resume grace). Lost() says so, and Context() is cancelled then,
// so work done under a lock can stop when the lock does. Pass Token() to the resources the lock
// protects: it grows with every holder, so they can refuse a holder whose lock was lost.
//
//	client, err := lockstream.Dial("127.0.0.1:50051")
//	if err != nil { return err }
//	defer client.Close()
//	lock, err := client.Lock(ctx, "reports/daily", lockstream.WithMode(lockstream.Write))
//	if err != nil { return err }
//	defer lock.Unlock(context.Background())
//	return runReport(lock.Context(), lock.Token())
//
// All locks of a Client travel on one Session stream, opened on the first Lock. The stream
// carries heartbeats; when it breaks, the client takes the session over on a new stream within
// the resume grace, and the locks stay held with the same tokens.
package lockstream
