package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Finish reasons of turn.end besides the model's own.
const (
	finishInterrupted = "interrupted"
	finishError       = "error"
)

// turn is the reply to one input: model calls and the tool calls they ask
// for, until the model stops calling tools. It runs on the worker
// goroutine and is the stream handler of its model calls.
type turn struct {
	a       *agent
	ctx     context.Context // cancelled by an interrupt
	inputID string
	usage   usage
	// saveErr is the first failure to append to the conversation file.
	saveErr error

	part    string // "text", "reasoning" or "" (none open)
	partID  string
	started map[string]bool // tool call ids reported by tool.start
}

// runTurn answers one input and reports its end.
func (a *agent) runTurn(ctx context.Context, in command) {
	t := &turn{a: a, ctx: ctx, inputID: in.ID}
	end := t.run(in)
	if t.saveErr != nil && end.Outcome != outcomeFailed {
		end.Outcome, end.FinishReason = outcomeFailed, finishError
		end.Error = &turnError{Code: codeStateError, Message: "the conversation could not be saved: " + t.saveErr.Error()}
	}
	end.Usage = t.usage
	a.emit(end)
}

// run consumes the input and loops over model steps.
func (t *turn) run(in command) turnEndEvent {
	user := message{Role: roleUser, Content: in.Content}
	t.save(record{Type: recordConsumed, InputID: in.ID}, record{Type: recordMessage, InputID: in.ID, Message: &user})
	t.a.history = append(t.a.history, user)
	t.a.emit(idEvent{Type: "input.consumed", ID: in.ID})
	t.a.setState(stateWorking)
	if t.saveErr != nil {
		return t.fail(codeStateError, "the input could not be recorded: "+t.saveErr.Error())
	}
	broken := 0 // model calls in a row that broke off
	for step := 1; ; step++ {
		if step > maxSteps {
			return t.fail(codeMaxSteps, fmt.Sprintf("stopped after %d model calls without a final answer", maxSteps))
		}
		t.a.emit(typeEvent{Type: "step.start"})
		t.started = map[string]bool{}
		msgs := append([]message{{Role: roleSystem, Content: t.a.system}}, t.a.history...)
		res, err := t.a.model.stream(t.ctx, msgs, t.a.specs, t)
		t.closePart()
		t.usage.InputTokens += res.Usage.InputTokens
		t.usage.OutputTokens += res.Usage.OutputTokens
		if err != nil {
			var me *modelError
			if !errors.As(err, &me) {
				me = &modelError{Code: codeModelError, Message: t.a.model.redact(err.Error())}
			}
			retry := t.ctx.Err() == nil && me.Broken && broken < t.a.broken.retries
			// Keep what the user saw, unless the call is made again; calls
			// whose arguments did not finish are dropped.
			if res.Content != "" && !retry {
				t.record(message{Role: roleAssistant, Content: res.Content})
			}
			for _, c := range res.Calls {
				if t.started[c.ID] {
					t.a.emit(toolErrorEvent{Type: "tool.error", ID: c.ID, Error: "the reply ended before this call was complete"})
				}
			}
			t.a.emit(typeEvent{Type: "step.finish"})
			if t.ctx.Err() != nil {
				return t.interrupted()
			}
			if !retry {
				msg := me.Message
				if me.Broken && broken > 0 {
					msg = fmt.Sprintf("the way to the model broke off and did not come back after %d tries (the AstraBox server holding this Session may have stopped, or the network to the model failed); send the input again: %s", broken+1, msg)
				}
				return t.fail(me.Code, msg)
			}
			broken++
			step-- // the call is made again, not a new step of the reply
			if !t.retryBroken(broken, me, res) {
				return t.interrupted()
			}
			continue
		}
		broken = 0
		for _, c := range res.Calls {
			if !t.started[c.ID] {
				t.toolStart(c.ID, c.Function.Name)
			}
			t.a.emit(toolCallEvent{Type: "tool.call", ID: c.ID, Name: c.Function.Name, Input: argsObject(c.Function.Arguments)})
		}
		t.record(message{Role: roleAssistant, Content: res.Content, ToolCalls: res.Calls})
		if len(res.Calls) == 0 {
			t.a.emit(typeEvent{Type: "step.finish"})
			finish := res.FinishReason
			if finish == "" {
				finish = "stop"
			}
			return turnEndEvent{Type: "turn.end", InputID: t.inputID, Outcome: outcomeCompleted, FinishReason: finish}
		}
		for i, c := range res.Calls {
			if t.ctx.Err() != nil {
				for _, skipped := range res.Calls[i:] {
					t.toolFailed(skipped.ID, "not run: "+errInterrupt.Error())
				}
				break
			}
			t.call(c)
		}
		t.a.emit(typeEvent{Type: "step.finish"})
		if t.ctx.Err() != nil {
			return t.interrupted()
		}
	}
}

// retryPolicy says how a model call that broke off is made again: at
// most retries times in a row, after a pause from first doubling up to
// maxBrokenPause.
type retryPolicy struct {
	retries int
	first   time.Duration
}

// maxBrokenPause is the longest pause before a broken call is made again.
const maxBrokenPause = 8 * time.Second

// brokenPolicy is Config's BrokenRetries and BrokenPause with their
// defaults: 6 tries after pauses from a second (with each call's
// connection attempts, about two minutes in all: a server restart, a
// holder's takeover).
func brokenPolicy(retries int, first time.Duration) retryPolicy {
	switch {
	case retries == 0:
		retries = 6
	case retries < 0:
		retries = 0
	}
	if first <= 0 {
		first = time.Second
	}
	return retryPolicy{retries: retries, first: first}
}

// retryBroken reports a model call that broke off (model.retry) and waits
// before it is made again; false when the reply was interrupted
// meanwhile. What the broken call streamed stays in the log, marked by the
// event; the conversation keeps none of it, so the model answers afresh.
func (t *turn) retryBroken(attempt int, me *modelError, res streamResult) bool {
	pause := t.a.broken.first
	for i := 1; i < attempt && pause < maxBrokenPause; i++ {
		pause *= 2
	}
	pause = min(pause, maxBrokenPause)
	t.a.emit(modelRetryEvent{Type: "model.retry", Attempt: attempt, MaxAttempts: t.a.broken.retries, DelayMS: pause.Milliseconds(),
		Error: me.Message, AfterOutput: res.Content != "" || len(res.Calls) > 0})
	select {
	case <-t.ctx.Done():
		return false
	case <-time.After(pause):
		return true
	}
}

// resend reports a model request sent again because its connection broke
// before any answer (the model may have received it and answered no one):
// a model.retry event, so the log shows it.
func (t *turn) resend(try int, err error, pause time.Duration) {
	t.a.emit(modelRetryEvent{Type: "model.retry", Attempt: try, MaxAttempts: t.a.model.connectLimit(),
		DelayMS: pause.Milliseconds(), Error: t.a.model.redact(err.Error())})
}

// call runs one tool call, asking approval first when the mode says so,
// and records its result for the model.
func (t *turn) call(c toolCall) {
	name := c.Function.Name
	if t.a.cfg.PermissionMode == PermissionAsk && needsApproval(name) && t.a.tools.enabled[name] {
		ok, reason, err := t.approve(c)
		if err != nil {
			t.toolFailed(c.ID, "not run: "+err.Error())
			return
		}
		if !ok {
			t.a.emit(toolDeniedEvent{Type: "tool.denied", ID: c.ID, Reason: reason})
			t.record(message{Role: roleTool, ToolCallID: c.ID, Content: "This tool call was not run: " + reason + ". Do not retry it unless the user asks; adapt or ask."})
			return
		}
	}
	out, err := t.a.tools.run(t.ctx, name, c.Function.Arguments)
	if err != nil {
		if errors.Is(err, errToolInterrupted) {
			err = errToolInterrupted
		}
		t.toolFailed(c.ID, err.Error())
		return
	}
	t.a.emit(toolResultEvent{Type: "tool.result", ID: c.ID, Output: out})
	t.record(message{Role: roleTool, ToolCallID: c.ID, Content: string(out)})
}

// approve asks for the call and waits for the answer. It returns the
// decision and a reason for a rejection, or an error when the reply was
// interrupted first. When stdin has ended no answer can come: the call is
// rejected.
func (t *turn) approve(c toolCall) (bool, string, error) {
	p := &approval{id: newID("int"), answers: make(chan command, 1)}
	t.a.mu.Lock()
	t.a.pending = p
	t.a.mu.Unlock()
	defer func() {
		t.a.mu.Lock()
		if t.a.pending == p {
			t.a.pending = nil
		}
		t.a.mu.Unlock()
		t.a.setState(stateWorking)
	}()
	t.a.setState(stateWaiting)
	t.a.emit(approvalEvent{Type: "approval.request", InteractionID: p.id, ToolCallID: c.ID, Name: c.Function.Name, Input: argsObject(c.Function.Arguments)})
	select {
	case ans := <-p.answers:
		if ans.Decision == "approve" {
			return true, "", nil
		}
		if ans.Comment != "" {
			return false, "the user denied it: " + ans.Comment, nil
		}
		return false, "the user denied it", nil
	case <-t.ctx.Done():
		return false, "", errInterrupt
	case <-t.a.eof:
		return false, "no answer can arrive: stdin was closed", nil
	}
}

// toolFailed reports a failed call and records it for the model.
func (t *turn) toolFailed(id, msg string) {
	t.a.emit(toolErrorEvent{Type: "tool.error", ID: id, Error: msg})
	t.record(message{Role: roleTool, ToolCallID: id, Content: toolErrorContent(msg)})
}

// interrupted ends the reply as interrupted, closing the history with a
// note unless it already ends with the assistant's (partial) text.
func (t *turn) interrupted() turnEndEvent {
	t.closeHistory(noteInterrupted)
	return turnEndEvent{Type: "turn.end", InputID: t.inputID, Outcome: outcomeInterrupted, FinishReason: finishInterrupted}
}

// fail ends the reply as failed with code and msg.
func (t *turn) fail(code, msg string) turnEndEvent {
	t.closeHistory(fmt.Sprintf("(This reply failed: %s.)", msg))
	return turnEndEvent{Type: "turn.end", InputID: t.inputID, Outcome: outcomeFailed, FinishReason: finishError, Error: &turnError{Code: code, Message: msg}}
}

// closeHistory appends an assistant note when the history does not end
// with an assistant message, so the next request is valid.
func (t *turn) closeHistory(note string) {
	h := t.a.history
	if len(h) > 0 && h[len(h)-1].Role == roleAssistant && len(h[len(h)-1].ToolCalls) == 0 {
		return
	}
	t.record(message{Role: roleAssistant, Content: note})
}

// record appends m to the history and the conversation file.
func (t *turn) record(m message) {
	t.a.history = append(t.a.history, m)
	t.save(record{Type: recordMessage, InputID: t.inputID, Message: &m})
}

// save appends records to the conversation file and reports its size.
func (t *turn) save(recs ...record) {
	if err := t.a.conv.append(recs...); err != nil {
		t.a.diag("error", "save conversation: "+err.Error())
		if t.saveErr == nil {
			t.saveErr = err
		}
		return
	}
	t.a.emit(savedEvent{Type: "state.saved", Bytes: t.a.conv.size})
}

// text, reasoning and toolStart implement streamHandler.
func (t *turn) text(delta string)      { t.delta("text", delta) }
func (t *turn) reasoning(delta string) { t.delta("reasoning", delta) }

func (t *turn) toolStart(id, name string) {
	t.closePart()
	t.started[id] = true
	t.a.emit(toolStartEvent{Type: "tool.start", ID: id, Name: name})
}

// delta streams a fragment of kind ("text" or "reasoning"), opening a part
// of that kind first when another (or none) is open.
func (t *turn) delta(kind, d string) {
	if t.part != kind {
		t.closePart()
		t.part, t.partID = kind, newID(map[string]string{"text": "txt", "reasoning": "rsn"}[kind])
		t.a.emit(idEvent{Type: kind + ".start", ID: t.partID})
	}
	t.a.emit(deltaEvent{Type: kind + ".delta", ID: t.partID, Delta: d})
}

func (t *turn) closePart() {
	if t.part == "" {
		return
	}
	t.a.emit(idEvent{Type: t.part + ".end", ID: t.partID})
	t.part, t.partID = "", ""
}

// argsObject returns a call's arguments as a JSON object for events: the
// arguments themselves when they are one, else {"arguments": raw}.
func argsObject(raw string) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(raw), &obj) == nil && obj != nil {
		return json.RawMessage(raw)
	}
	if raw == "" {
		return json.RawMessage("{}")
	}
	b, _ := json.Marshal(map[string]string{"arguments": raw})
	return b
}
