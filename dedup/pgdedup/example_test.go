package pgdedup_test

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup/pgdedup"
)

// A ledger service whose handler writes to PostgreSQL: the write and the
// event's done mark commit in one transaction, so each event is booked
// exactly once. (Not run: it needs a PostgreSQL server.)
func Example() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://lanes@127.0.0.1:5432/ledger")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	store, err := pgdedup.New(pgdedup.Config{Pool: pool})
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := store.CreateTable(ctx); err != nil {
		fmt.Println(err)
		return
	}
	book, err := store.TxHandler(pgdedup.TxConfig{Group: "ledger"}, func(ctx context.Context, tx pgx.Tx, m *consumer.Message) error {
		_, err := tx.Exec(ctx, `INSERT INTO bookings (event_id, account, body) VALUES ($1, $2, $3)`,
			m.EventID, m.SessionID, m.Record.Value)
		return err // an error rolls back the booking and the mark together; the consumer retries
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	c, err := consumer.New(consumer.Config{
		Brokers: []string{"127.0.0.1:9092"}, Group: "ledger", Topics: []string{"payments"},
		DeadLetterTopic: "payments-dlq",
	}, book)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = c.Run(ctx)
	st := book.Stats()
	fmt.Printf("booked %d, skipped %d redelivered\n", st.Ran, st.Skipped)
}
