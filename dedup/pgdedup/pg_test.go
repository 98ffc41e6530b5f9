package pgdedup_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/lanesdev/lanes/consumer"
	"github.com/lanesdev/lanes/dedup"
	"github.com/lanesdev/lanes/dedup/pgdedup"
	"github.com/lanesdev/lanes/dedup/storetest"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func pool(t *testing.T) *pgxpool.Pool {
	dsn := storetest.Server(t, "LANES_POSTGRES_DSN", "PostgreSQL")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("PostgreSQL at LANES_POSTGRES_DSN: %v", err)
	}
	return p
}

func store(t *testing.T, p *pgxpool.Pool) *pgdedup.Store {
	s, err := pgdedup.New(pgdedup.Config{Pool: p, Table: "lanes_test_dedup"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.CreateTable(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestStore runs the store suite on a real PostgreSQL
// (LANES_POSTGRES_DSN).
func TestStore(t *testing.T) {
	storetest.Run(t, func(t *testing.T) dedup.Store { return store(t, pool(t)) })
}

func TestConfig(t *testing.T) {
	if _, err := pgdedup.New(pgdedup.Config{}); !errors.Is(err, pgdedup.ErrConfig) {
		t.Errorf("no pool: %v, want ErrConfig", err)
	}
	p, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/x")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, cfg := range []pgdedup.Config{{Pool: p, DoneTTL: -1}, {Pool: p, Table: "a.b.c"}, {Pool: p, Table: "a."}} {
		if _, err := pgdedup.New(cfg); !errors.Is(err, pgdedup.ErrConfig) {
			t.Errorf("%+v: %v, want ErrConfig", cfg, err)
		}
	}
	s, err := pgdedup.New(pgdedup.Config{Pool: p})
	if err != nil {
		t.Fatal(err)
	}
	fn := func(context.Context, pgx.Tx, *consumer.Message) error { return nil }
	for _, c := range []struct {
		cfg   pgdedup.TxConfig
		fn    pgdedup.TxFunc
		field string
	}{
		{pgdedup.TxConfig{}, fn, "Group"},
		{pgdedup.TxConfig{Group: "g"}, nil, "fn"},
		{pgdedup.TxConfig{Group: "g", NoEventID: dedup.KeyByPosition + 1}, fn, "NoEventID"},
	} {
		if _, err := s.TxHandler(c.cfg, c.fn); !errors.Is(err, pgdedup.ErrConfig) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("TxHandler: %v, want ErrConfig naming %s", err, c.field)
		}
	}
}

// effects is the handler's own table: one row per application.
func effects(t *testing.T, p *pgxpool.Pool) string {
	table := fmt.Sprintf("effects_%d", time.Now().UnixNano())
	if _, err := p.Exec(context.Background(), `CREATE TABLE `+table+` (event_id text NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = p.Exec(context.Background(), `DROP TABLE `+table) })
	return table
}

func count(t *testing.T, p *pgxpool.Pool, table, id string) int {
	var n int
	if err := p.QueryRow(context.Background(), `SELECT count(*) FROM `+table+` WHERE event_id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func txHandler(t *testing.T, s *pgdedup.Store, cfg pgdedup.TxConfig, fn pgdedup.TxFunc) *pgdedup.TxHandler {
	h, err := s.TxHandler(cfg, fn)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func message(id string) *consumer.Message {
	return &consumer.Message{Record: &kgo.Record{Topic: "t"}, EventID: id, Attempt: 1}
}

// TestTxExactlyOnce: the handler's write and the mark commit together.
// Delivered twice (a redelivery after a crash before the offset commit),
// concurrently to several members (a rebalance), or failing after its
// write (rolled back, retried): the write is applied once.
func TestTxExactlyOnce(t *testing.T) {
	p := pool(t)
	s := store(t, p)
	table := effects(t, p)
	group := fmt.Sprintf("tx-%d", time.Now().UnixNano())
	failNext := map[string]bool{"fails-once": true}
	var mu sync.Mutex
	h := txHandler(t, s, pgdedup.TxConfig{Group: group}, func(ctx context.Context, tx pgx.Tx, m *consumer.Message) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (event_id) VALUES ($1)`, m.EventID); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if failNext[m.EventID] {
			failNext[m.EventID] = false
			return errors.New("downstream failed after the write")
		}
		return nil
	})
	ctx := context.Background()

	for range 2 {
		if err := h.Handle(ctx, message("twice")); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Handle(ctx, message("fails-once")); err == nil {
		t.Fatal("the failing attempt succeeded")
	}
	if n := count(t, p, table, "fails-once"); n != 0 {
		t.Fatalf("a failed attempt's write is visible (%d rows): not rolled back", n)
	}
	if err := h.Handle(ctx, message("fails-once")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if err := h.Handle(ctx, message("concurrent")); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, id := range []string{"twice", "fails-once", "concurrent"} {
		if n := count(t, p, table, id); n != 1 {
			t.Errorf("%s: applied %d times, want once", id, n)
		}
	}
	if st := h.Stats(); st.Ran != 3 || st.Skipped != 8 {
		t.Fatalf("stats %+v; want 3 ran, 8 skipped", st)
	}
}

// TestServerDown: with PostgreSQL unreachable, the attempt fails with
// dedup.ErrStore (retried) and the handler does not run.
func TestServerDown(t *testing.T) {
	p, err := pgxpool.New(context.Background(), "postgres://lanes@127.0.0.1:1/x?connect_timeout=1")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	s, err := pgdedup.New(pgdedup.Config{Pool: p})
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	fn := func(context.Context, pgx.Tx, *consumer.Message) error { ran = true; return nil }
	if err := txHandler(t, s, pgdedup.TxConfig{Group: "g"}, fn).Handle(context.Background(), message("e1")); !errors.Is(err, dedup.ErrStore) || ran {
		t.Fatalf("transaction: %v, ran %v; want dedup.ErrStore, no run", err, ran)
	}
	d, _ := dedup.New(dedup.Config{Store: s, Group: "g"})
	err = d.Middleware(consumer.HandlerFunc(func(context.Context, *consumer.Message) error { ran = true; return nil })).
		Handle(context.Background(), message("e1"))
	if !errors.Is(err, dedup.ErrStore) || ran {
		t.Fatalf("middleware: %v, ran %v; want dedup.ErrStore, no run", err, ran)
	}
}

func TestConnect(t *testing.T) {
	if _, err := pgdedup.Connect(context.Background(), "postgres://lanes@127.0.0.1:1/x?connect_timeout=1", pgdedup.Config{}); err == nil {
		t.Fatal("connected to nothing")
	}
	s, err := pgdedup.Connect(context.Background(), storetest.Server(t, "LANES_POSTGRES_DSN", "PostgreSQL"), pgdedup.Config{Table: "lanes_test_connect"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestTxPanic: a TxFunc that panics after its write: the transaction rolls
// back (no write, no mark, its connection back in the pool), the panic
// reaches the caller with its own value, and the retry runs at once.
func TestTxPanic(t *testing.T) {
	const app = "lanes-test-tx-panic"
	dsn := storetest.Server(t, "LANES_POSTGRES_DSN", "PostgreSQL")
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = app
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := store(t, p)
	table := effects(t, p)
	type boom struct{}
	calls := 0
	h := txHandler(t, s, pgdedup.TxConfig{Group: fmt.Sprintf("panic-%d", time.Now().UnixNano())}, func(ctx context.Context, tx pgx.Tx, m *consumer.Message) error {
		if _, err := tx.Exec(ctx, `INSERT INTO `+table+` (event_id) VALUES ($1)`, m.EventID); err != nil {
			return err
		}
		if calls++; calls == 1 {
			panic(boom{})
		}
		return nil
	})
	func() {
		defer func() {
			if r := recover(); r != (boom{}) {
				t.Errorf("recovered %v, want the handler's panic value", r)
			}
		}()
		_ = h.Handle(context.Background(), message("e1"))
	}()
	if n := p.Stat().AcquiredConns(); n != 0 {
		// End the open transaction's session, so that dropping the
		// effects table does not wait for its lock; the pool stays open
		// (closing it would wait for the leaked connection forever).
		_, _ = p.Exec(context.Background(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()`, app)
		t.Fatalf("%d connections still held after the panic: the transaction was not rolled back", n)
	}
	defer p.Close()
	if n := count(t, p, table, "e1"); n != 0 {
		t.Fatalf("the panicked attempt's write is visible (%d rows)", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.Handle(ctx, message("e1")); err != nil {
		t.Fatalf("retry after the panic: %v", err)
	}
	if n := count(t, p, table, "e1"); n != 1 || calls != 2 {
		t.Fatalf("%d rows after %d calls; want 1 row, 2 calls", n, calls)
	}
}

// TestTxNoEventID: records without an event ID at one reused offset (a
// topic deleted and created again): by default refused (ErrNoEventID,
// permanent) with nothing written; RunWithoutDedup commits every
// delivery's writes; KeyByPosition commits each record's once and skips
// its redelivery, the new record included.
func TestTxNoEventID(t *testing.T) {
	p := pool(t)
	s := store(t, p)
	table := effects(t, p)
	ctx := context.Background()
	ts := time.Now()
	at := func(ts time.Time, v string) *consumer.Message {
		return &consumer.Message{Record: &kgo.Record{Topic: "t", Offset: 5, Timestamp: ts, Value: []byte(v)}, Attempt: 1}
	}
	old, recreated := at(ts, "old"), at(ts.Add(time.Hour), "new")
	write := func(ctx context.Context, tx pgx.Tx, m *consumer.Message) error {
		_, err := tx.Exec(ctx, `INSERT INTO `+table+` (event_id) VALUES ($1)`, string(m.Record.Value))
		return err
	}
	handler := func(policy dedup.NoEventIDPolicy) *pgdedup.TxHandler {
		return txHandler(t, s, pgdedup.TxConfig{Group: fmt.Sprintf("no-id-%v-%d", policy, time.Now().UnixNano()), NoEventID: policy}, write)
	}

	h := handler(dedup.RefuseNoEventID)
	for _, m := range []*consumer.Message{old, recreated} {
		if err := h.Handle(ctx, m); !errors.Is(err, dedup.ErrNoEventID) || !consumer.IsPermanent(err) {
			t.Fatalf("refuse: %v, want a permanent ErrNoEventID", err)
		}
	}
	if n := count(t, p, table, "old") + count(t, p, table, "new"); n != 0 || h.Stats().Refused != 2 {
		t.Fatalf("refuse: %d rows written, stats %+v; want none, 2 refused", n, h.Stats())
	}

	h = handler(dedup.RunWithoutDedup)
	for _, m := range []*consumer.Message{old, recreated, old} {
		if err := h.Handle(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if o, n := count(t, p, table, "old"), count(t, p, table, "new"); o != 2 || n != 1 || h.Stats().RanWithoutDedup != 3 {
		t.Fatalf("run without dedup: old %d, new %d rows, stats %+v; want 2 and 1, 3 ran without dedup", o, n, h.Stats())
	}

	h = handler(dedup.KeyByPosition)
	for _, m := range []*consumer.Message{old, recreated, old, recreated} {
		if err := h.Handle(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	if o, n := count(t, p, table, "old"), count(t, p, table, "new"); o != 3 || n != 2 {
		t.Fatalf("key by position: old %d, new %d rows; want one more of each", o, n)
	}
	if st := h.Stats(); st.Ran != 2 || st.Skipped != 2 || st.KeyedByPosition != 4 {
		t.Fatalf("key by position: stats %+v; want 2 ran, 2 skipped", st)
	}
}
