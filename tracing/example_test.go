package tracing_test

import (
	"context"
	"fmt"

	"github.com/lanesdev/lanes/tracing"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// A send span's context travels in the record's headers; the consumer's
// process span links back to it.
func ExampleTracer() {
	tr := tracing.New(sdktrace.NewTracerProvider(), nil)
	r := &kgo.Record{Topic: "chat", Key: []byte("chat-42")}
	_, send := tr.StartSend(context.Background(), r, "chat-42", "")
	tracing.EndSend(send, r, nil)
	_, process := tr.StartProcess(context.Background(), r, tracing.Process{SessionID: "chat-42", Attempt: 1})
	defer tracing.EndProcess(process, nil)
	fmt.Println(len(tracing.NewCarrier(r).Get("traceparent")))
	// Output: 55
}
