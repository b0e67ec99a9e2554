package backend

import (
	"context"
	"errors"

	"github.com/tenure-go/tenure/watchdog"
)

// Renewer returns be as the watchdog sees it. The watchdog keeps each
// lease's TTL (Extend changes it) and hands it over with every renewal, so
// the TTL in the Item given to watchdog.Add is not the one renewals use.
func Renewer(be Backend) watchdog.Renewer[Item] { return renewer{be} }

type renewer struct{ be Backend }

// Renew implements watchdog.Renewer: one Backend.Renew for the batch.
func (r renewer) Renew(ctx context.Context, batch []watchdog.Renewal[Item], errs []error) {
	items := make([]Item, len(batch))
	for i, b := range batch {
		items[i] = b.Item
		items[i].TTL = b.TTL
	}
	r.be.Renew(ctx, items, errs)
	for i, err := range errs {
		if errors.Is(err, ErrNotHeld) {
			errs[i] = watchdog.ErrNotHeld
		}
	}
}
