package lease

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenure-go/tenure/internal/backend"
	"github.com/tenure-go/tenure/internal/reentry"
	"github.com/tenure-go/tenure/watchdog"
)

// Package reentrant builds reentrant locks on leases whose key is a hash of
// owner -> count (docs/design.md section 3); these are the parts of lease it
// needs.
func init() {
	reentry.Acquire = func(ctx context.Context, m any, name, owner string, exclusive, wait bool, opts any) (any, error) {
		if owner == "" {
			return nil, fmt.Errorf("%w: empty owner", ErrInvalidOption)
		}
		o, _ := opts.([]AcquireOption)
		l, err := m.(*Manager).acquire(ctx, name, o, wait, owner, exclusive)
		if err != nil {
			return nil, err
		}
		return l, nil
	}
	reentry.Enter = func(ctx context.Context, l any) (int64, error) { return l.(*Lease).enter(ctx) }
	reentry.Exit = func(ctx context.Context, l any) error { return l.(*Lease).exit(ctx) }
}

// enter adds an entry to the reentrant lock l holds.
func (l *Lease) enter(ctx context.Context) (int64, error) {
	if err := l.Err(); err != nil {
		return 0, fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, err)
	}
	item := l.item()
	item.TTL = l.entry.TTL()
	item.Op = newToken()
	var n int64
	err, _ := l.m.detach(ctx, func(ctx context.Context) (err error) {
		n, err = l.m.be.Reenter(ctx, item)
		return err
	}, nil)
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		l.takenOver()
		return 0, fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, l.Err())
	case err != nil:
		return 0, fmt.Errorf("tenure: enter %q again: %w", l.name, err)
	}
	l.mu.Lock()
	l.depth++
	l.mu.Unlock()
	return n, nil
}

// exit takes back one of several entries of the reentrant lock l holds.
func (l *Lease) exit(ctx context.Context) error {
	l.mu.Lock()
	if l.depth <= 1 {
		l.mu.Unlock()
		return errors.New("tenure: exit of a reentrant lock's last entry; release it instead")
	}
	l.depth--
	l.mu.Unlock()
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, err)
	}
	item := backend.Item{Name: l.name, Token: l.owner, Reentrant: true, Count: 1, Op: newToken()}
	err, _ := l.m.detach(ctx, l.m.releaseOp(item), nil)
	switch {
	case errors.Is(err, backend.ErrNotHeld):
		l.takenOver()
		return fmt.Errorf("%w: %q: %w", ErrNotHeld, l.name, l.Err())
	case err != nil:
		return fmt.Errorf("tenure: exit %q: %w", l.name, err)
	}
	return nil
}

// takenOver loses the lease because a round trip of its own found it gone.
func (l *Lease) takenOver() {
	if l.m.wd.Remove(l.entry) == nil {
		l.lost(watchdog.ErrTakenOver)
	}
}
