package app

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/astrabox/astrabox/client"
	"github.com/astrabox/astrabox/sandbox"
)

// renewAtLeast is `sandbox renew`: it moves the expiry of sandbox id to at
// unless that would shorten the box's life. A box that never expires
// keeps no expiry, and one that already expires at or after at keeps its
// expiry; either way a note on errOut says so, and nothing is changed. It
// prints the expiry the box has afterwards on out ("never" for none), so
// the printed time is never earlier than the box's expiry before.
//
// The server refuses an expiry that is not after the current one; a
// refusal because another client renewed the box further meanwhile is
// reported the same way as a box that already outlived at.
func renewAtLeast(ctx context.Context, c *client.Client, id string, at time.Time, out, errOut io.Writer) error {
	kept := func() (bool, error) {
		sb, err := c.Get(ctx, id)
		if err != nil {
			return false, err
		}
		switch {
		case sb.ExpiresAt == nil:
			fmt.Fprintf(errOut, "sandbox %s never expires; renewing would give it an expiry, so it is left as is\n", id)
			fmt.Fprintln(out, "never")
			return true, nil
		case !at.After(*sb.ExpiresAt):
			fmt.Fprintf(errOut, "sandbox %s already expires at %s, after the requested %s; left as is\n",
				id, sb.ExpiresAt.Local().Format(time.RFC3339), at.Local().Format(time.RFC3339))
			fmt.Fprintln(out, sb.ExpiresAt.Local().Format(time.RFC3339))
			return true, nil
		}
		return false, nil
	}
	if done, err := kept(); done || err != nil {
		return err
	}
	got, err := c.Renew(ctx, id, at, client.CreateOptions{})
	if client.CodeOf(err) == sandbox.CodeInvalidRequest {
		if done, gerr := kept(); done || gerr != nil {
			return gerr
		}
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(out, got.Local().Format(time.RFC3339))
	return nil
}
