package main

// The demo's scenery: the job's steps, the operator who takes the name
// over, and the checks at the end. main.go is what the demo is about.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/tenure-go/tenure/examples/internal/examplecmd"
	"github.com/tenure-go/tenure/lease"
)

// longJob works through its steps under ctx, looking at the lease's local
// deadline about once a second. It returns why it stopped early, if it did.
func longJob(ctx context.Context, l *lease.Lease, say examplecmd.Say) error {
	say("job: starting %d steps of %v", steps, stepTime)
	lastDeadline, lastLook := l.Deadline(), time.Now()
	for i := 1; i <= steps; i++ {
		if err := examplecmd.Work(ctx, stepTime); err != nil {
			say("job: step %d/%d interrupted", i, steps)
			return err
		}
		say("job: step %d/%d done", i, steps)
		if now := time.Now(); now.Sub(lastLook) >= time.Second {
			d := l.Deadline()
			note := "no renewal since the last look"
			if d.After(lastDeadline) {
				note = fmt.Sprintf("renewed: it moved %v forward since the last look", d.Sub(lastDeadline).Round(time.Millisecond))
			}
			say("lease: %v left to the local deadline (%s)", time.Until(d).Round(time.Millisecond), note)
			lastDeadline, lastLook = d, now
		}
	}
	return nil
}

// shortTask is part 2's task: three steps under ctx, the lease's context.
func shortTask(ctx context.Context, say examplecmd.Say) error {
	for i := 1; i <= 3; i++ {
		if err := examplecmd.Work(ctx, stepTime); err != nil {
			return err
		}
		say("Do: task step %d/3 done", i)
	}
	return nil
}

// takeOver plays an operator who force-releases the name's key, then
// another worker who acquires it, in one transaction.
func takeOver(ctx context.Context, client *redis.Client, key string, say examplecmd.Say) {
	_, err := client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, key)
		p.Set(ctx, key, "another-worker", 10*time.Second)
		return nil
	})
	if err != nil {
		say("meanwhile: the take-over failed: %v", err)
		return
	}
	say("meanwhile: an operator deleted %s and another worker SET it to its own token", key)
}

// nothingHeld checks, after Close, that the key of part 2's lease is free
// and that part 1's key is not ours (token's) again.
func nothingHeld(ctx context.Context, client *redis.Client, token, key, key2 string) error {
	n, err := client.Exists(ctx, key2).Result()
	if err != nil {
		return err
	}
	holder, _ := client.Get(ctx, key).Result()
	if n != 0 || holder == token {
		return errors.New("a lease is still held after Close")
	}
	return nil
}

// cancelledBy returns a child of parent that other's end cancels too, with
// other's cause; stop releases it.
func cancelledBy(parent, other context.Context) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	stopAfter := context.AfterFunc(other, func() { cancel(context.Cause(other)) })
	return ctx, func() { stopAfter(); cancel(nil) }
}

// after runs fn in a goroutine once d has passed, unless stopped first.
// stop may be called more than once; it returns when the goroutine has ended.
func after(d time.Duration, fn func()) (stop func()) {
	cancel, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			fn()
		case <-cancel:
		}
	}()
	return sync.OnceFunc(func() { close(cancel); <-done })
}
