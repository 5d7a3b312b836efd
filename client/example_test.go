package client_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/client"
	execdclient "github.com/astrabox/astrabox/execd/client"
	execdwire "github.com/astrabox/astrabox/execd/wire"
)

// Create a sandbox, run a command in it, and delete it.
func Example() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "YOUR-API-KEY")
	ttl := int64(600)
	sb, err := c.Create(ctx, wire.CreateSandboxRequest{
		Timeout:        &ttl,
		Entrypoint:     []string{"sleep", "infinity"},
		ResourceLimits: map[string]string{"cpu": "1", "memory": "512Mi"},
		Metadata:       map[string]string{"project": "demo"},
	}, client.CreateOptions{IdempotencyKey: "demo-1"})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Delete(ctx, sb.ID)

	box, err := c.Execd(ctx, sb.ID)
	if err != nil {
		log.Fatal(err)
	}
	ex, err := box.Run(ctx, execdwire.RunCommandRequest{Command: "python3 -c 'print(6*7)'"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("exit %d: %s", ex.ExitCode, ex.Stdout)
}

// Stream a command's output as it comes, and pick it up again by offset
// after a dropped connection.
func ExampleClient_Execd_streaming() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "YOUR-API-KEY")
	box, err := c.Execd(ctx, "SANDBOX-ID")
	if err != nil {
		log.Fatal(err)
	}
	var id string
	var offset int64
	err = box.RunStream(ctx, execdwire.RunCommandRequest{Command: "for i in $(seq 5); do echo $i; sleep 1; done"},
		func(ev execdclient.Event) error {
			switch ev.Type {
			case execdwire.EventInit:
				id = ev.Text
			case execdwire.EventStdout:
				fmt.Print(ev.Text)
				fmt.Sscan(ev.ID, &offset)
			}
			return nil
		})
	if err != nil && id != "" {
		// The command kept running; follow it from where we were.
		_ = box.FollowLogs(ctx, id, offset, true, func(ev execdclient.Event) error {
			fmt.Print(ev.Text)
			return nil
		})
	}
}

// Upload a file, list a directory, and download a byte range.
func ExampleClient_Execd_files() {
	ctx := context.Background()
	c := client.New("http://127.0.0.1:8080", "YOUR-API-KEY")
	box, err := c.Execd(ctx, "SANDBOX-ID")
	if err != nil {
		log.Fatal(err)
	}
	if err := box.Upload(ctx, "/workspace/data.csv", strings.NewReader("a,b\n1,2\n"), execdclient.UploadOptions{Mode: 644}); err != nil {
		log.Fatal(err)
	}
	entries, err := box.ListDir(ctx, "/workspace", 1)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Path, e.Size)
	}
}

// Follow a sandbox's state transitions.
func ExampleClient_Events() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := client.New("http://127.0.0.1:8080", "YOUR-API-KEY")
	_ = c.Events(ctx, "SANDBOX-ID", 0, func(ev wire.StateEvent) error {
		fmt.Println(ev.Seq, ev.State, ev.Reason)
		return nil
	})
}
