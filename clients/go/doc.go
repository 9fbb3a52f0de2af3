// Package lockstream is the Go client of lockstream, a gRPC lock server on ZooKeeper.
//
// A lock is held from the moment Lock returns until Unlock, or until it is lost: the server
// cannot vouch for it any more (its ZooKeeper session expired, it was revoked, or this client
// could not hear from it for nearly the resume grace). Lost() says so, and Context() is
// cancelled then, so work done under a lock can stop when the lock does. Pass Token() to the
// resources the lock protects: it grows with every holder, so they can refuse a holder whose
// lock was lost.
//
//	client, err := lockstream.Dial("127.0.0.1:50051")
//	if err != nil { return err }
//	defer client.Close()
//	lock, err := client.Lock(ctx, "reports/daily", lockstream.WithMode(lockstream.Write))
//	if err != nil { return err }
//	defer lock.Unlock(context.Background())
//	return runReport(lock.Context(), lock.Token())
//
// TryLock answers "not acquired" with ErrLocked, as etcd's concurrency package does. Client.Done
// is closed when the session carrying the client's locks is gone (every lock lost) or the client
// is closed.
//
// # Errors
//
// Every error is an *Error: the lock's (or election's) name, the gRPC code, and a message that
// names it once. It matches exactly one kind with errors.Is (ErrInvalidArgument, ErrLocked,
// ErrTimeout, ErrCanceled, ErrLost, ErrRevoked, ErrPermissionDenied, ErrUnavailable, ErrClosed,
// ErrNotHeld, ErrRevisionConflict, ErrNoLeader, ErrNotLeader, ErrFailed). A request the server
// would refuse is found before it is sent (ErrInvalidArgument), so it fails alone: the client's
// other locks are not touched.
//
// # Elections
//
// Client.Election gives an election of the server's ElectionService, shaped like etcd's
// concurrency.Election: candidates Campaign and lead one at a time, in the order they joined,
// and the term (the leader's fencing token) grows with every leader.
//
//	election := client.Election("scheduler")
//	leadership, err := election.Campaign(ctx, []byte("10.0.0.7:8080")) // waits until elected
//	if err != nil { return err }
//	defer leadership.Resign(context.Background())
//	return schedule(leadership.Context(), leadership.Term()) // ends if the term is lost
//
// Leadership.Done is closed when the term is over, and Err says why: ErrLost when it was lost
// or taken away (Election.Resign naming the term, through any instance; a revocation's deadline;
// a path to the server silent for nearly the resume grace), nil after Leadership.Resign. A
// deposed leader is Done before the next candidate is elected. Observe sends every term in
// order on a channel (EventTerm, EventProclaimed, EventVacant; EventHistoryGone and EventSkipped
// for gaps; FromTerm replays the history), closed when its context ends, after an EventFailed
// whose Err says why when the stream fails. Leader answers ErrNoLeader when nobody leads;
// Proclaim and Resign name a term, and answer ErrNotLeader when it is not the current one.
//
// Each candidate has a Campaign stream of its own (not the Session stream of the client's
// locks), with the client's endpoints, credentials, heartbeats and resume grace: a broken or
// silent stream is resumed, on the next endpoint in turn, with the same term, and the
// leadership is given up a tenth of the grace before the grace (counted from the last message
// heard) is over, as a lock is. Close resigns every leadership and withdraws every candidate.
//
// # Guarded records
//
// A lock's guarded records are small keyed values under its name (a checkpoint, an offset, a
// configuration) that only a current holder writes, and that outlive it. Client.Records binds
// them to a holder's fencing token (a Lock's Token, a Leadership's Term); the server checks the
// token in the same step as the write, so a holder that has lost the lock writes nothing, even
// before it has heard of the loss (ErrNotHeld). Every write gives the lock's records the next
// revision; WithExpectedRevision conditions a write on the revision read (ErrRevisionConflict
// otherwise), and Update is the read-modify-write built on it:
//
//	records := client.Records(lock.Name(), lock.Token())
//	next, err := records.Update(ctx, "offset", func(current []byte, found bool) []byte {
//		offset, _ := strconv.Atoi(string(current)) // 0 when not found
//		return []byte(strconv.Itoa(offset + batch))
//	})
//
// Client.GetRecord reads a record as anyone who may see the lock. Keys follow the rule of lock
// names, to MaxRecordKeyBytes; values are at most MaxRecordValueBytes; both are checked before
// sending (ErrInvalidArgument). A call that ends UNAVAILABLE is tried on the next endpoint; a Put
// carries a request id that makes it at most once, and one refused after such a try is
// ErrUnavailable (its outcome unknown) rather than the refusal.
//
// # Sessions, partitions and the resume grace
//
// All locks of a Client travel on one Session stream, opened on the first Lock. Both sides send
// heartbeats (every second by default). When the stream breaks, or the server has said nothing
// for two heartbeat intervals, held locks are in doubt (InDoubt, WithOnInDoubt) and the client
// takes the session over on a new stream; if that succeeds within the resume grace, the locks
// are confirmed with the same tokens. The grace is counted from the last message heard from the
// server, and the locks are reported lost a tenth of it before it is over: the server cannot
// notice a dead path before it sent that message, and keeps the locks for the whole grace after
// it notices, so a cut-off holder hears "lost" before anyone else can be granted its lock. With
// the defaults (heartbeat 1s, grace 5s) a holder behind a frozen network path is in doubt 2s and
// lost 4.5s after the last message it heard; the server frees the lock 7s after it at the
// earliest.
//
// # Endpoints and failover
//
// Dial takes one endpoint; DialEndpoints takes several, for the instances of one lockstream
// deployment (or one instance behind several proxies):
//
//	client, err := lockstream.DialEndpoints([]string{"10.0.0.1:50051", "10.0.0.2:50051"})
//
// The client talks to one endpoint at a time, the first to begin with. When the session stream
// breaks or falls silent, it resumes the session on the next endpoint, and goes round the list
// while an endpoint refuses, fails or does not answer within its attempt's limit (1s, and at
// most a third of the grace left), until one takes the session or the grace, counted from the
// last message heard as above, runs out. Held locks are in doubt meanwhile and confirmed with
// the same tokens; they are lost when the grace runs out, or at once when an instance answers
// that it does not know the session (NOT_FOUND). Any instance on the same ZooKeeper and root
// takes the session over, so failing over keeps every lock and token (on the embedded store
// and the addon client only the instance that issued the session has it).
// Lock calls made meanwhile wait for the session. A DNS name with several addresses needs no
// list: gRPC's resolver moves between its addresses on one connection.
package lockstream
