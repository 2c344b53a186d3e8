package distlock

import (
	"context"
	"log/slog"
)

// WithLogger logs what the locks do to logger (distlock is silent without
// one): a lost lease at Warn, with its key, fencing token and cause; the
// first attempt of a call that the backend's restart guard refused at Warn
// (see [ErrRestartGuard]); a
// renewal that failed (the lease may still be renewed) at Info; every
// attempt, grant, renewal and release at Debug. Given to [New] it sets the
// logger of every lock of the client, given to [Client.Mutex] that lock's
// alone; nil turns logging off. Log lines never carry a secret: no owner
// token, [OwnerID] or backend URL, only keys, tokens, durations and the
// backend's errors.
func WithLogger(logger *slog.Logger) Option {
	return func(o *options) { o.logger = logger }
}

// logObserver logs events; see WithLogger.
type logObserver struct{ l *slog.Logger }

func (o logObserver) Observe(ctx context.Context, e Event) {
	level := slog.LevelDebug
	switch e.Type {
	case EventLost:
		level = slog.LevelWarn
	case EventRenewalFailed:
		level = slog.LevelInfo
	case EventAttempt:
		if e.Outcome == Guarded && e.Attempts == 1 {
			level = slog.LevelWarn // a wait that would look like contention
		}
	}
	if !o.l.Enabled(ctx, level) {
		return
	}
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs, slog.String("key", e.Key), slog.String("backend", e.Backend))
	msg := "distlock: "
	switch e.Type {
	case EventAttempt:
		msg += "attempt"
		if e.Outcome == Guarded {
			msg += " held back by the restart guard: the store may have lost data, so it grants no new lock until its longest lease has passed (Client.DeclareFresh ends the wait on servers that lost nothing)"
		}
		attrs = append(attrs, slog.String("outcome", e.Outcome.String()), slog.Int("attempt", e.Attempts), slog.Duration("latency", e.Latency))
	case EventAcquired:
		msg += "acquired"
		attrs = append(attrs, slog.Uint64("token", e.Token), slog.Duration("wait", e.Wait), slog.Int("attempts", e.Attempts), slog.Duration("valid_for", e.ValidFor))
	case EventFailed:
		msg += "not acquired"
		attrs = append(attrs, slog.Duration("wait", e.Wait), slog.Int("attempts", e.Attempts))
	case EventRenewed:
		msg += "renewed"
		attrs = append(attrs, slog.Uint64("token", e.Token), slog.Duration("latency", e.Latency), slog.Duration("valid_for", e.ValidFor))
	case EventRenewalFailed:
		msg += "renewal failed"
		attrs = append(attrs, slog.Uint64("token", e.Token), slog.Duration("latency", e.Latency), slog.Time("valid_until", e.ValidUntil))
	case EventLost:
		msg += "lease lost"
		attrs = append(attrs, slog.Uint64("token", e.Token), slog.String("cause", e.Cause.String()), slog.Duration("late", e.Late), slog.Duration("held", e.Held))
	case EventReleased:
		msg += "released"
		attrs = append(attrs, slog.Uint64("token", e.Token), slog.Duration("held", e.Held))
	}
	if e.Err != nil {
		attrs = append(attrs, slog.String("error", e.Err.Error()))
	}
	o.l.LogAttrs(ctx, level, msg, attrs...)
}
