package serving

import (
	"context"
	"net/http"
)

// CronHeader names the trigger of a request the runtime's cron scheduler sends a worker
// (the entry's name, or its index in the manifest's cron list). Prepare removes it, under any
// spelling, from every request but the scheduler's own, so no client can pass for a tick.
const CronHeader = "Runtime-Cron"

// cronKey holds the trigger of a tick's request in its context.
type cronKey struct{}

// WithCron returns ctx marking its request as the tick of trigger: Prepare gives it the
// Runtime-Cron header. Only the scheduler builds such a context; a client's request cannot.
func WithCron(ctx context.Context, trigger string) context.Context {
	return context.WithValue(ctx, cronKey{}, trigger)
}

// setCron removes every line of the Runtime-Cron header the request carries, and sets it to
// the trigger when the request is a tick's (WithCron).
func setCron(r *http.Request) {
	for name := range r.Header {
		if sameHeader(name, CronHeader) {
			delete(r.Header, name)
		}
	}
	if trigger, ok := r.Context().Value(cronKey{}).(string); ok {
		r.Header[CronHeader] = []string{trigger}
	}
}
