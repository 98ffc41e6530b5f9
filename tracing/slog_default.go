package tracing

import (
	"context"
	"log/slog"

	"github.com/rs/zerolog"
)

// FromSlogDefault is FromSlog over slog.Default() as it is when each line
// is logged, not when FromSlogDefault is called: a service that installs
// its logger with slog.SetDefault after building a lanes consumer or
// producer still gets their lines. Until slog.SetDefault is called, the
// default sends INFO and above through the standard log package (stderr).
// The consumer and producer use it when their Config sets no logger.
func FromSlogDefault() zerolog.Logger { return FromSlog(slog.New(defaultHandler{})) }

// defaultHandler hands every call to slog.Default()'s handler of the
// moment.
type defaultHandler struct{}

func (defaultHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return slog.Default().Handler().Enabled(ctx, l)
}

func (defaultHandler) Handle(ctx context.Context, r slog.Record) error {
	return slog.Default().Handler().Handle(ctx, r)
}

// WithAttrs and WithGroup are not called by FromSlog; they bind the
// default handler of the moment.
func (defaultHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return slog.Default().Handler().WithAttrs(as)
}

func (defaultHandler) WithGroup(name string) slog.Handler {
	return slog.Default().Handler().WithGroup(name)
}
