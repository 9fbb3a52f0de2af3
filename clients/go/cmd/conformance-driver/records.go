// Records: the driver's guarded-record commands (put-record, get-record, delete-record,
// update-record) and the observations they make.

package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	lockstream "github.com/lockstream/lockstream/clients/go"
)

// records performs the guarded-record commands.
func (d *driver) records(c command) {
	ctx := context.Background()
	if c.Op == "get-record" {
		record, found, err := d.client.GetRecord(ctx, c.Name, c.Key)
		if err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		// None: found false, value '' and revision '0' (the zero Record).
		say("record", map[string]any{
			"id": c.ID, "found": found, "value": string(record.Value), "revision": strconv.FormatUint(record.Revision, 10),
		})
		return
	}
	records := d.client.Records(c.Name, decimal("token", c.Token))
	var options []lockstream.RecordOption
	if c.ExpectedRevision != nil {
		options = append(options, lockstream.WithExpectedRevision(decimal("expectedRevision", *c.ExpectedRevision)))
	}
	var written lockstream.Record
	var err error
	switch c.Op {
	case "delete-record":
		deleted, err := records.Delete(ctx, c.Key, options...)
		if err != nil {
			sayFailure("error", c.ID, err)
			return
		}
		say("record-deleted", map[string]any{"id": c.ID, "deleted": deleted})
		return
	case "put-record":
		if c.Value != nil {
			written.Value = []byte(*c.Value)
		}
		written.Revision, err = records.Put(ctx, c.Key, written.Value, options...)
	case "update-record":
		// The value read as a decimal number (none: 0), plus add.
		written, err = records.Update(ctx, c.Key, func(current []byte, _ bool) []byte {
			n, _ := strconv.ParseInt(string(current), 10, 64)
			return []byte(strconv.FormatInt(n+c.Add, 10))
		})
	}
	if err != nil {
		sayFailure("error", c.ID, err)
		return
	}
	say("record-written", map[string]any{
		"id": c.ID, "revision": strconv.FormatUint(written.Revision, 10), "value": string(written.Value),
	})
}

// decimal is a command's decimal field (a token, a revision); the driver stops on a bad one.
func decimal(field, text string) uint64 {
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "driver: bad %s: %v\n", field, err)
		os.Exit(2)
	}
	return n
}
