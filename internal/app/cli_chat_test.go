package app

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/astrabox/astrabox/client"
)

// TestChatReconnectIsToldOnce: while the event stream is reconnected
// again and again, chat says so in one short line, and once events flow
// again, says it is back, once.
func TestChatReconnectIsToldOnce(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "http://127.0.0.1:8080/v1/sessions/ses_0123456789abcdef/events?after_seq=12&" + strings.Repeat("x", 200),
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}
	var out, errOut strings.Builder
	l := &chatLoop{stdio: IO{Stdout: &out, Stderr: &errOut}, view: &replyView{w: &out}, ended: map[string]bool{}, own: map[string]bool{}}
	for i := 1; i <= 5; i++ {
		l.handle(chatMsg{reconnect: &client.Reconnect{AfterSeq: 12, Attempt: i, Err: refused}})
	}
	delta, _ := json.Marshal(map[string]any{"type": "text-delta", "id": "t1", "delta": "back"})
	for seq := int64(13); seq <= 14; seq++ {
		l.handle(chatMsg{ev: &client.Event{Seq: seq, Type: "text-delta", TurnID: "turn_1", Payload: delta}})
	}
	lines := strings.Split(strings.TrimSpace(errOut.String()), "\n")
	want := []string{"[connection lost: connection refused (is the server running?); reconnecting]", "[reconnected]"}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Fatalf("stderr lines %q, want %q", lines, want)
	}
}

// TestLostCause: the reason shown for a lost connection is short and on
// one line.
func TestLostCause(t *testing.T) {
	long := errors.New("a reason\nover two lines " + strings.Repeat("é", 100))
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused", &url.Error{Op: "Get", URL: "http://x/", Err: syscall.ECONNREFUSED}, "connection refused (is the server running?)"},
		{"closed", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), "the server closed the stream"},
		{"error answer", &client.APIError{Status: 503, Code: "UNAVAILABLE", Message: strings.Repeat("m", 300)}, "HTTP 503 UNAVAILABLE"},
		{"url dropped", &url.Error{Op: "Get", URL: "http://127.0.0.1:8080/" + strings.Repeat("p", 200), Err: errors.New("tls: bad record")}, "tls: bad record"},
		{"long", long, "a reason over two lines " + strings.Repeat("é", 28) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lostCause(tc.err); got != tc.want {
				t.Fatalf("lostCause = %q, want %q", got, tc.want)
			}
		})
	}
}
