package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/astrabox/astrabox/client"
)

// Talk to an Agent: open a conversation, send an input and print the
// reply's text as it streams, surviving dropped connections.
func ExampleClient_Follow() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "YOUR-API-KEY")
	conv, err := c.CreateConversation(ctx, "AGENT-ID", client.ConversationOptions{Title: "demo", IdempotencyKey: "demo-1"})
	if err != nil {
		log.Fatal(err)
	}
	// The client_message_id makes the send safe to retry.
	rc, err := c.SendInput(ctx, conv.SessionID, "write fizzbuzz.py and run it", "demo-msg-1")
	if err != nil {
		log.Fatal(err)
	}
	err = c.Follow(ctx, conv.SessionID, rc.Seq, func(e client.Event) error {
		if e.TurnID != rc.TurnID {
			return nil // another input's reply
		}
		switch e.Type {
		case "text-delta":
			ch, _ := e.Chunk()
			fmt.Print(ch.Delta)
		case "data-interaction":
			ch, _ := e.Chunk()
			fmt.Printf("\n[approval needed: %s]\n", ch.Data)
		case "turn.ended":
			return client.ErrStop
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Resume a reply in the AI SDK UI message stream protocol after the last
// seq a UI saw.
func ExampleClient_AIStream() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "YOUR-API-KEY")
	s, err := c.AIStream(ctx, "SESSION-ID", 42, false)
	if errors.Is(err, client.ErrNoReply) {
		return // nothing after seq 42
	}
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	for {
		ch, err := s.Next()
		if err != nil {
			break // io.EOF after [DONE]
		}
		fmt.Println(ch.Seq, ch.Type)
	}
}
