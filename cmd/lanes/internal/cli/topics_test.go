package cli

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lanesdev/lanes/lanestest"
)

// TestCreateTopicsErrors: when the brokers refuse or do not answer, the
// error names them, the topics and what to check, and no internal package.
func TestCreateTopicsErrors(t *testing.T) {
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // accept and never answer
		defer wg.Done()
		var held []net.Conn
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range held {
					c.Close()
				}
				return
			}
			held = append(held, c)
		}
	}()
	defer wg.Wait()
	defer silent.Close()
	for _, tc := range []struct{ name, broker, want string }{
		{"refused", "127.0.0.1:1", "brokers 127.0.0.1:1: create topics chat, chat-dlq: "},
		{"silent", silent.Addr().String(), "brokers " + silent.Addr().String() + " did not answer within 300ms while creating topics chat, chat-dlq: check"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := lanestest.ConnectBroker([]string{tc.broker})
			err := CreateTopics(context.Background(), b, 300*time.Millisecond, 3, "chat", "chat-dlq")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "lanestest") {
				t.Errorf("error %q names an internal package", err)
			}
		})
	}
}
