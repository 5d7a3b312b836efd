package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/astrabox/astrabox/client"
)

// runSession is `astrabox session ls|show|send|follow|rm`.
func runSession(ctx context.Context, args []string, stdio IO, env Env) error {
	if len(args) == 0 {
		return errors.New("usage: astrabox session ls|show|send|follow|rm [flags]")
	}
	return userError(runSessionVerb(ctx, args[0], args[1:], stdio, env))
}

func runSessionVerb(ctx context.Context, verb string, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("session "+verb, stdio, env, &conn)
	asJSON := fs.Bool("json", false, "print JSON")
	var (
		agentRef, cmid string
		after          int64
		messages       bool
	)
	switch verb {
	case "ls":
		fs.StringVar(&agentRef, "agent", "", "only the Sessions of this Agent (an id or a name)")
	case "show":
		fs.BoolVar(&messages, "messages", false, "print the conversation instead of the record")
	case "send":
		fs.StringVar(&agentRef, "agent", "", "open a new Session with this Agent instead of naming one")
		fs.StringVar(&cmid, "client-message-id", "", "makes the send safe to retry (default: a random one)")
	case "follow":
		fs.Int64Var(&after, "after", 0, "print the events after this seq (0: from the start)")
	}
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	out := stdio.Stdout
	oneID := func(usage string) (string, error) {
		if len(rest) != 1 {
			return "", errors.New("usage: astrabox session " + usage)
		}
		return rest[0], nil
	}
	switch verb {
	case "ls":
		return listSessions(ctx, c, agentRef, *asJSON, stdio)
	case "show":
		id, err := oneID("show SESSION [--messages]")
		if err != nil {
			return err
		}
		if !messages {
			s, err := c.GetSession(ctx, id)
			if err != nil {
				return err
			}
			return printJSON(out, s)
		}
		tr, err := c.Messages(ctx, id)
		if err != nil {
			return err
		}
		if *asJSON {
			return printJSON(out, tr)
		}
		printTranscript(out, tr)
		return nil
	case "send":
		return sendInput(ctx, c, agentRef, cmid, rest, stdio, env)
	case "follow":
		id, err := oneID("follow SESSION [--after SEQ]")
		if err != nil {
			return err
		}
		err = c.Follow(ctx, id, after, func(e client.Event) error {
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s\n", visibleJSON(b))
			return err
		}, client.OnReconnect(reconnectNotice(stdio)))
		if ctx.Err() != nil {
			return nil // stopped by the user
		}
		return err
	case "rm":
		if len(rest) == 0 {
			return errors.New("usage: astrabox session rm SESSION [MORE]")
		}
		for _, id := range rest {
			if err := c.DeleteSession(ctx, id); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown session command %q", verb)
}

func listSessions(ctx context.Context, c *client.Client, agentRef string, asJSON bool, stdio IO) error {
	agentID := ""
	if agentRef != "" {
		a, err := resolveAgent(ctx, c, agentRef)
		if err != nil {
			return err
		}
		agentID = a.ID
	}
	all, err := allPages(ctx, func(ctx context.Context, page client.PageOptions) (client.Page[client.Session], error) {
		return c.ListSessions(ctx, agentID, page)
	})
	if err != nil {
		return err
	}
	if asJSON {
		return printJSON(stdio.Stdout, all)
	}
	tw := tabwriter.NewWriter(stdio.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tAGENT\tSTATE\tTITLE\tLAST SEQ\tUPDATED")
	for _, s := range all {
		state := s.State
		if s.PendingInteraction != nil {
			state += " (waiting for an answer)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.ID, s.AgentID, state, visibleField(bound(s.Title, 40, 1)), s.LastSeq, s.UpdatedAt.Local().Format(time.DateTime))
	}
	return tw.Flush()
}

// sendInput is `session send`: one input, then its reply followed to its
// end. It fails when the reply fails or is interrupted, and stops when
// the reply waits for an approval, naming how to give it.
func sendInput(ctx context.Context, c *client.Client, agentRef, cmid string, rest []string, stdio IO, env Env) error {
	var sid string
	if agentRef == "" {
		if len(rest) == 0 {
			return errors.New("usage: astrabox session send (SESSION | --agent AGENT) TEXT (none or -: read stdin)")
		}
		sid, rest = rest[0], rest[1:]
	}
	text, err := readText(rest, stdio.Stdin)
	if err != nil {
		return err
	}
	if strings.TrimSpace(text) == "" {
		return errors.New("nothing to send")
	}
	if agentRef != "" {
		a, err := resolveAgent(ctx, c, agentRef)
		if err != nil {
			return err
		}
		conv, err := c.CreateConversation(ctx, a.ID, client.ConversationOptions{Title: bound(text, 60, 1)})
		if err != nil {
			return err
		}
		sid = conv.SessionID
		fmt.Fprintf(stdio.Stderr, "session %s\n", sid)
	}
	if cmid == "" {
		cmid = newClientMessageID()
	}
	rc, err := c.SendInput(ctx, sid, text, cmid)
	if err != nil {
		return err
	}
	view := &replyView{w: stdio.Stdout, color: useColor(stdio, env)}
	var (
		end  turnEnd
		ask  *client.Interaction
		done bool
	)
	err = c.Follow(ctx, sid, rc.Seq, func(e client.Event) error {
		if e.TurnID != rc.TurnID {
			return nil // another input's reply
		}
		view.show(e)
		if ia, ok := interactionOf(e); ok {
			ask = ia
			return client.ErrStop
		}
		end, done = replyEnd(e)
		if done {
			return client.ErrStop
		}
		return nil
	}, client.OnReconnect(reconnectNotice(stdio)))
	view.lineStart()
	switch {
	case err != nil:
		return err
	case ask != nil:
		return fmt.Errorf("the reply waits for an answer to %s %s (interaction %s): give it with astrabox chat --session %s",
			ask.ToolName, bound(compactJSON(ask.Input), maxToolInput, 1), ask.ID, sid)
	case end.Outcome == "interrupted":
		return errors.New("the reply was interrupted")
	case end.Outcome == "failed":
		return fmt.Errorf("the reply failed: %s %s", end.ErrorCode, end.Message)
	}
	return nil
}

// reconnectNotice tells the user on stderr that the event stream is
// being remade.
func reconnectNotice(stdio IO) func(client.Reconnect) {
	return func(r client.Reconnect) {
		fmt.Fprintf(stdio.Stderr, "[connection lost: %s; reconnecting after seq %d]\n", visible(fmt.Sprint(r.Err)), r.AfterSeq)
	}
}

// useColor reports whether stdout takes ANSI dimming.
func useColor(stdio IO, env Env) bool {
	return env("NO_COLOR") == "" && env("TERM") != "dumb" && isTerminal(stdio.Stdout)
}

// printTranscript prints a folded conversation, one message a paragraph,
// its text shown through visible.
func printTranscript(w io.Writer, tr client.Transcript) {
	for _, m := range tr.Messages {
		who := "agent"
		if m.Role == "user" {
			who = "you"
		}
		var tools []string
		for _, p := range m.Parts {
			if p["type"] == "dynamic-tool" {
				name, _ := p["toolName"].(string)
				tools = append(tools, name)
			}
		}
		text := strings.TrimSpace(m.Text())
		if len(tools) > 0 {
			text = "[" + strings.Join(tools, ", ") + "] " + text
		}
		fmt.Fprintf(w, "%s: %s\n", who, visible(text))
	}
}
