package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/astrabox/astrabox/client"
)

// runChat is `astrabox chat AGENT [--session ID]`: an interactive
// conversation. Each line read from stdin is one input (sent with a
// client_message_id, so a retry never doubles it); the reply streams from
// the Session's event log as it is written. An approval is asked as
// `approve? [y/N]` and the next line answers it. Ctrl-C during a reply
// interrupts it; a second Ctrl-C, or the end of stdin where a line is
// awaited, quits. Quitting never cancels work on the server: the Session
// and a reply in progress carry on, and --session picks them up again. A
// dropped connection is remade from the last event shown, so nothing is
// missed or shown twice.
func runChat(ctx context.Context, args []string, stdio IO, env Env) error {
	var conn connFlags
	fs := verbFlags("chat", stdio, env, &conn)
	sessionID := fs.String("session", "", "continue this Session instead of opening a new one")
	title := fs.String("title", "", "title of a new Session")
	rest, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 1 || (len(rest) == 0 && *sessionID == "") {
		return errors.New("usage: astrabox chat AGENT [--session SESSION] | astrabox chat --session SESSION")
	}
	c, err := conn.client()
	if err != nil {
		return err
	}
	// The work outlives ctx: the first Ctrl-C ends ctx (it is what
	// interrupts a reply), and quitting must not cut a call short.
	work, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	l := &chatLoop{c: c, stdio: stdio, view: &replyView{w: stdio.Stdout, color: useColor(stdio, env)},
		prompt: isTerminal(stdio.Stdin), ended: map[string]bool{}, own: map[string]bool{}}
	if err := l.open(work, rest, *sessionID, *title); err != nil {
		return userError(err)
	}
	presses, quit, stop := watchInterrupts(ctx)
	defer stop()
	return userError(l.run(work, presses, quit))
}

// chatLoop is one chat's state. Only its run goroutine touches it and
// writes to stdout.
type chatLoop struct {
	c     *client.Client
	stdio IO
	view  *replyView
	sid   string
	after int64 // the log is followed after this seq
	// waitTurn is the turn whose reply is awaited ("" at the prompt).
	waitTurn string
	// pending is the interaction being asked, of turn pendingTurn;
	// answers collects a question's answers.
	pending     *client.Interaction
	pendingTurn string
	answers     []string
	// interrupted is set once Ctrl-C interrupted the awaited reply.
	interrupted bool
	prompt      bool            // stdin is a terminal: show "> "
	ended       map[string]bool // turns seen ending
	own         map[string]bool // client_message_ids this chat sent
	// lost is set while the event stream is being reconnected: the loss
	// was told once, and the next event tells that it is back.
	lost bool
}

// open finds or creates the Session; a continued one shows its latest
// messages (a page of them) and any approval it waits for.
func (l *chatLoop) open(ctx context.Context, rest []string, sessionID, title string) error {
	var agent client.Agent
	if len(rest) == 1 {
		a, err := resolveAgent(ctx, l.c, rest[0])
		if err != nil {
			return err
		}
		agent = a
	}
	if sessionID == "" {
		conv, err := l.c.CreateConversation(ctx, agent.ID, client.ConversationOptions{Title: title})
		if err != nil {
			return err
		}
		l.sid = conv.SessionID
		fmt.Fprintf(l.stdio.Stderr, "chat with %s in session %s (Ctrl-C interrupts a reply; Ctrl-D quits)\n", visible(agent.Name), l.sid)
		return nil
	}
	tr, err := l.c.MessagesPage(ctx, sessionID, 0)
	if err != nil {
		return err
	}
	s, err := l.c.GetSession(ctx, sessionID)
	if err != nil {
		return err
	}
	if agent.ID != "" && s.AgentID != agent.ID {
		return fmt.Errorf("session %s belongs to agent %s, not %s", s.ID, s.AgentID, agent.ID)
	}
	l.sid, l.after = s.ID, tr.LastSeq
	fmt.Fprintf(l.stdio.Stderr, "session %s (%s); Ctrl-C interrupts a reply; Ctrl-D quits\n", s.ID, s.State)
	if tr.FirstSeq > 1 {
		fmt.Fprintf(l.stdio.Stderr, "(the latest messages; all of them: astrabox session show %s --messages)\n", s.ID)
	}
	printTranscript(l.stdio.Stdout, tr)
	if n := len(tr.Messages); n > 0 && tr.Messages[n-1].Role == "assistant" && tr.Messages[n-1].Metadata["finish_reason"] == nil {
		l.waitTurn, _ = tr.Messages[n-1].Metadata["turn_id"].(string) // a reply in progress
	}
	if s.PendingInteraction != nil {
		l.ask(s.PendingInteraction, orEmpty(s.CurrentTurnID))
	}
	return nil
}

// chatMsg is what the follower passes to the loop: an event or a
// reconnect notice.
type chatMsg struct {
	ev        *client.Event
	reconnect *client.Reconnect
}

func (l *chatLoop) run(ctx context.Context, presses, quit <-chan struct{}) error {
	msgs := make(chan chatMsg)
	fctx, fcancel := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() {
		followed <- l.c.Follow(fctx, l.sid, l.after, func(e client.Event) error {
			select {
			case msgs <- chatMsg{ev: &e}:
				return nil
			case <-fctx.Done():
				return fctx.Err()
			}
		}, client.OnReconnect(func(r client.Reconnect) {
			select {
			case msgs <- chatMsg{reconnect: &r}:
			case <-fctx.Done():
			}
		}))
	}()
	followEnded := false
	defer func() {
		fcancel()
		if !followEnded {
			<-followed
		}
	}()
	done := make(chan struct{})
	defer close(done)
	lines := readLines(l.stdio.Stdin, done)
	l.showPrompt()
	for {
		var next <-chan lineItem
		if l.waitTurn == "" || l.pending != nil {
			next = lines
		}
		select {
		case m := <-msgs:
			l.handle(m)
		case it := <-next:
			if it.eof {
				return l.bye()
			}
			if err := l.take(ctx, it.text); err != nil {
				return err
			}
		case <-presses:
			if l.waitTurn == "" || l.interrupted {
				return l.bye()
			}
			l.interrupted = true
			l.view.lineStart()
			if ok, err := l.c.Interrupt(ctx, l.sid); err != nil {
				fmt.Fprintf(l.stdio.Stderr, "interrupt: %s\n", visible(userError(err).Error()))
			} else if ok {
				fmt.Fprintln(l.stdio.Stderr, "[interrupting the reply; Ctrl-C again quits]")
			} else {
				fmt.Fprintln(l.stdio.Stderr, "[no reply is running yet; Ctrl-C again quits]")
			}
		case <-quit:
			return l.bye()
		case err := <-followed:
			followEnded = true
			return err
		}
	}
}

// handle shows one event and moves the chat on: an interaction asks its
// question, the awaited turn's end brings the prompt back.
func (l *chatLoop) handle(m chatMsg) {
	if r := m.reconnect; r != nil {
		if !l.lost {
			l.lost = true
			l.view.lineStart()
			fmt.Fprintf(l.stdio.Stderr, "[connection lost: %s; reconnecting]\n", lostCause(r.Err))
		}
		return
	}
	if l.lost {
		l.lost = false
		l.view.lineStart()
		fmt.Fprintln(l.stdio.Stderr, "[reconnected]")
	}
	e := *m.ev
	switch e.Type {
	case "input.accepted":
		var in struct {
			Content         string `json:"content"`
			ClientMessageID string `json:"client_message_id"`
		}
		if json.Unmarshal(e.Payload, &in) == nil && !l.own[in.ClientMessageID] {
			l.view.line("» " + bound(in.Content, maxToolInput, 5)) // sent by another client
		}
	case "interaction.answered":
		var a struct {
			ID string `json:"interaction_id"`
		}
		if json.Unmarshal(e.Payload, &a) == nil && l.pending != nil && l.pending.ID == a.ID {
			l.pending, l.answers = nil, nil
			l.view.line("(answered by another client)")
		}
	}
	l.view.show(e)
	if ia, ok := interactionOf(e); ok {
		l.ask(ia, e.TurnID)
	}
	end, ok := replyEnd(e)
	if !ok {
		return
	}
	l.ended[e.TurnID] = true
	if l.pending != nil && l.pendingTurn == e.TurnID {
		l.pending, l.answers = nil, nil // its reply is over
	}
	if e.Type == "input.failed" {
		l.view.line(fmt.Sprintf("error: %s: %s", end.ErrorCode, end.Message))
	}
	if e.TurnID == l.waitTurn {
		l.waitTurn, l.interrupted = "", false
		l.showPrompt()
	}
}

// take uses a line: the answer to the pending interaction, or else the
// next input.
func (l *chatLoop) take(ctx context.Context, text string) error {
	l.afterLine()
	if l.pending != nil {
		l.answer(ctx, text)
		return nil
	}
	text = strings.TrimSpace(text)
	if text == "" {
		l.showPrompt()
		return nil
	}
	cmid := newClientMessageID()
	l.own[cmid] = true
	rc, err := l.send(ctx, text, cmid)
	if err != nil {
		var ae *client.APIError
		if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusGone) {
			return err
		}
		fmt.Fprintf(l.stdio.Stderr, "not sent: %s\n", visible(userError(err).Error()))
		l.showPrompt()
		return nil
	}
	if !l.ended[rc.TurnID] {
		l.waitTurn = rc.TurnID
	} else {
		l.showPrompt()
	}
	return nil
}

// send records an input. A call whose answer was lost (no answer, or a
// 5xx) is made again with the same client_message_id, which the server
// answers with the first receipt, so the input is recorded once.
func (l *chatLoop) send(ctx context.Context, text, cmid string) (client.Receipt, error) {
	var err error
	for attempt := range 4 {
		if attempt > 0 {
			t := time.NewTimer(250 * time.Millisecond << attempt)
			select {
			case <-ctx.Done():
				t.Stop()
				return client.Receipt{}, ctx.Err()
			case <-t.C:
			}
		}
		var rc client.Receipt
		rc, err = l.c.SendInput(ctx, l.sid, text, cmid)
		var ae *client.APIError
		if err == nil || (errors.As(err, &ae) && ae.Status < 500) {
			return rc, err
		}
	}
	return client.Receipt{}, err
}

// ask shows the question of an interaction of turn.
func (l *chatLoop) ask(ia *client.Interaction, turn string) {
	l.pending, l.pendingTurn, l.answers = ia, turn, nil
	l.view.lineStart()
	if ia.Kind == "question" && len(ia.Questions) > 0 {
		l.view.write(ia.Questions[0] + " ")
		return
	}
	if ia.ToolName != "" && ia.ToolCallID != l.view.lastCall {
		l.view.line(fmt.Sprintf("the agent asks to run %s %s", ia.ToolName, bound(compactJSON(ia.Input), maxToolInput, 1)))
	}
	l.view.write("approve? [y/N] ")
}

// answer answers the pending interaction with a line; a question with
// several prompts takes a line for each.
func (l *chatLoop) answer(ctx context.Context, text string) {
	ia := l.pending
	var a client.Answer
	if ia.Kind == "question" && len(ia.Questions) > 0 {
		l.answers = append(l.answers, strings.TrimSpace(text))
		if len(l.answers) < len(ia.Questions) {
			l.view.write(ia.Questions[len(l.answers)] + " ")
			return
		}
		a.Answers = l.answers
	} else {
		a.Decision = client.DecisionReject
		if t := strings.ToLower(strings.TrimSpace(text)); t == "y" || t == "yes" {
			a.Decision = client.DecisionApprove
		}
	}
	turn := l.pendingTurn
	l.pending, l.answers = nil, nil
	if err := l.respond(ctx, ia.ID, turn, a); err != nil {
		fmt.Fprintf(l.stdio.Stderr, "answer: %s\n", visible(userError(err).Error()))
	}
}

// respond answers interaction id of turn. The Session's record shows an
// interaction a moment after its frame is in the log, and the server
// refuses answers (INTERACTION_CLOSED) until then; so that answer is
// retried, for a few seconds, while the record shows neither another turn
// nor another interaction.
func (l *chatLoop) respond(ctx context.Context, id, turn string, a client.Answer) error {
	deadline := time.Now().Add(5 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := l.c.Respond(ctx, l.sid, id, a)
		if client.CodeOf(err) != "INTERACTION_CLOSED" || time.Now().After(deadline) {
			return err
		}
		s, gerr := l.c.GetSession(ctx, l.sid)
		if gerr != nil || (s.CurrentTurnID != nil && *s.CurrentTurnID != turn) || (s.PendingInteraction != nil && s.PendingInteraction.ID != id) {
			return err
		}
		if s.PendingInteraction == nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick.C:
			}
		}
	}
}

// afterLine keeps the output's line state right after a line was read: a
// terminal echoed its newline; piped input leaves the prompt's line open.
func (l *chatLoop) afterLine() {
	if l.prompt {
		l.view.midLine = false
	} else {
		l.view.lineStart()
	}
}

func (l *chatLoop) showPrompt() {
	if l.prompt && l.pending == nil {
		l.view.lineStart()
		l.view.write("> ")
	}
}

// bye ends the chat, saying what carries on.
func (l *chatLoop) bye() error {
	l.view.lineStart()
	if l.pending != nil {
		fmt.Fprintf(l.stdio.Stderr, "the reply still waits for an answer (interaction %s)\n", l.pending.ID)
	} else if l.waitTurn != "" {
		fmt.Fprintln(l.stdio.Stderr, "the reply carries on in the background")
	}
	fmt.Fprintf(l.stdio.Stderr, "continue with: astrabox chat --session %s\n", l.sid)
	return nil
}

// maxCauseBytes bounds the reason a lost connection is shown with.
const maxCauseBytes = 80

// lostCause says in a few words, on one line, why the event stream
// ended: the innermost reason of a failed request (not the URL, which
// the user knows), an error answer's code, a refused connection as a
// question about the server.
func lostCause(err error) string {
	var ae *client.APIError
	var ue *url.Error
	switch {
	case err == nil:
		return "the stream ended"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused (is the server running?)"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the server closed the stream"
	case errors.As(err, &ae):
		return fmt.Sprintf("HTTP %d %s", ae.Status, ae.Code)
	case errors.As(err, &ue):
		err = ue.Err
	}
	s := strings.Join(strings.Fields(visible(err.Error())), " ")
	if len(s) > maxCauseBytes {
		s = strings.ToValidUTF8(s[:maxCauseBytes], "") + "…"
	}
	return s
}
