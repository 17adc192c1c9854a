// hello: the "hello world" of a ferry processor: ack every event, fail empty ones.
package main

import (
	"context"
	"log"
	"os"

	"github.com/ferry/ferry/clients/go/ferry"
	"github.com/ferry/ferry/clients/go/ferrypb"
)

func handle(ctx context.Context, ev *ferrypb.Event) ferry.Result {
	if len(ev.Payload) == 0 {
		return ferry.Fail("empty payload")
	}
	log.Printf("%s/%d@%d: %q", ev.Topic, ev.Partition, ev.Offset, ev.Payload)
	return ferry.OK() // or ferry.Retry("why", 5*time.Second)
}

func main() { // serves until SIGTERM/SIGINT, then stops gracefully
	addr := append(os.Args[1:], "127.0.0.1:50051")[0]
	if err := ferry.NewWorker(handle, ferry.Options{Name: "hello"}).ListenAndServe(addr); err != nil {
		log.Fatal(err)
	}
}
