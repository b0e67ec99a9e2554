package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/tenure-go/tenure/watchdog"
)

// Renewer returns be as the watchdog sees it. The watchdog keeps each
// lease's TTL (Extend changes it) and hands it over with every renewal, so
// the TTL in the Item given to watchdog.Add is not the one renewals use.
func Renewer(be Backend) watchdog.Renewer[Item] { return renewer{be} }

type renewer struct{ be Backend }

// itemBufs holds the item slices of batches: a batch of up to 1000 renewals
// would otherwise allocate its copy on every round of the watchdog's loop.
// Several workers renew at once, hence a pool rather than one buffer.
var itemBufs = sync.Pool{New: func() any { return new([]Item) }}

// Renew implements watchdog.Renewer: one Backend.Renew for the batch.
func (r renewer) Renew(ctx context.Context, batch []watchdog.Renewal[Item], errs []error) {
	buf := itemBufs.Get().(*[]Item)
	items := (*buf)[:0]
	for _, b := range batch {
		it := b.Item
		it.TTL = b.TTL
		it.Light = b.Light
		items = append(items, it)
	}
	r.be.Renew(ctx, items, errs)
	clear(items) // the pool keeps no lease's strings alive
	*buf = items[:0]
	itemBufs.Put(buf)
	for i, err := range errs {
		switch {
		case err == nil: // the common case: nothing to translate
		case errors.Is(err, ErrGone):
			errs[i] = errGoneNotHeld
		case errors.Is(err, ErrNotHeld):
			errs[i] = watchdog.ErrNotHeld
		}
	}
}

// errGoneNotHeld is the watchdog's ErrNotHeld that keeps ErrGone's word:
// the lease is lost because its key is gone, not because another holds it.
var errGoneNotHeld = fmt.Errorf("%w: %w", watchdog.ErrNotHeld, ErrGone)
