package aisdk_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api"
	"github.com/astrabox/astrabox/internal/fakemodel"
	"github.com/astrabox/astrabox/internal/nodetest"
	"github.com/astrabox/astrabox/internal/server/servertest"
	"github.com/astrabox/astrabox/internal/testenv"
)

// TestAISDKReadsAReplyAcrossAServerStop: the server holding a Session
// stops (with no grace for replies, as a crash) while the model's answer
// streams; under the restarted server the built-in agent makes the broken
// model call again and the reply completes. The AI SDK folds the reply,
// read whole from the new server, into one message: the broken call's
// text, the data-step-broken mark, then the model's whole answer as the
// last text part.
func TestAISDKReadsAReplyAcrossAServerStop(t *testing.T) {
	testenv.NeedCommand(t, "node")
	testenv.NeedCommand(t, "npm")
	pkgDir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nodetest.Timeout(t, 5*time.Minute))
	defer cancel()
	nodetest.NPM(ctx, t, pkgDir, "ci", "--no-audit", "--no-fund")

	answer := strings.Repeat("Every piece of this answer arrives again. ", 20)
	env := servertest.New(t, servertest.Options{ShutdownGrace: time.Millisecond,
		Script: []fakemodel.Reply{fakemodel.Text(answer).WithDelay(10 * time.Millisecond), fakemodel.Text(answer)}})
	sid := env.Session(env.Agent("auto", nil))
	var rc struct {
		InputID string `json:"input_id"`
		Seq     int64  `json:"seq"`
	}
	if st := env.Call("POST", "/api/v1/sessions/"+sid+"/turn-inputs", map[string]any{"content": "tell me"}, &rc); st != 201 {
		t.Fatalf("send: %d", st)
	}
	deltas := 0
	readEvents(ctx, t, env, sid, 0, func(e logEvent) bool {
		if e.Type == "text-delta" {
			deltas++
		}
		return deltas == 10
	})
	env.Restart()
	readEvents(ctx, t, env, sid, 0, untilTurnEnded(rc.InputID))

	resultsFile := filepath.Join(t.TempDir(), "broken.json")
	nodetest.RunTAP(ctx, t, pkgDir, "broken.test.mjs", 1, map[string]string{
		"ASTRABOX_URL":        env.URL,
		"ASTRABOX_API_HEADER": api.HeaderAPIKey,
		"ASTRABOX_API_KEY":    servertest.Key,
		"SESSION_ID":          sid,
		"AFTER_SEQ":           fmt.Sprint(rc.Seq),
		"BROKEN_RESULTS_FILE": resultsFile,
		"NO_COLOR":            "1",
	})
	b, err := os.ReadFile(resultsFile)
	if err != nil {
		t.Fatalf("node passed but wrote no results: %v", err)
	}
	var res struct {
		Errors  []string  `json:"errors"`
		Message uiMessage `json:"message"`
	}
	if err := json.Unmarshal(b, &res); err != nil || len(res.Errors) > 0 {
		t.Fatalf("results %s: %v", b, err)
	}
	var lastText string
	marks, texts := 0, 0
	for _, p := range res.Message.Parts {
		switch p["type"] {
		case "text":
			lastText = fmt.Sprint(p["text"])
			texts++
		case "data-step-broken":
			marks++
		}
	}
	if marks != 1 || texts != 2 || lastText != answer {
		t.Fatalf("the folded message has %d data-step-broken parts and %d text parts, the last %q; want 1, 2 and the model's whole answer:\n%s",
			marks, texts, lastText, b)
	}
}
