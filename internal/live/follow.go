package live

import (
	"context"

	"github.com/gatehousehq/gatehouse/graph"
)

const pageSize = 500

// Follow sends every event of the task with seq > after to send, in seq
// order, with no gap and no repeat: first what the table holds, then live
// events as they are announced. A dropped subscription (slow consumer,
// listener reconnect) is healed by catching up from the table. It returns
// the last seq sent when ctx ends or send fails.
func (h *Hub) Follow(ctx context.Context, taskID string, after int64, send func(graph.Event) error) (int64, error) {
	last := after
	catchUp := func() error {
		for {
			evs, err := h.src.Events(ctx, taskID, last, pageSize)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if err := send(ev); err != nil {
					return err
				}
				last = ev.Seq
			}
			if len(evs) < pageSize {
				return nil
			}
		}
	}
	for {
		// Subscribe before reading the table, so nothing committed in
		// between is missed; repeats are skipped by seq.
		sub := h.Subscribe(taskID)
		if err := catchUp(); err != nil {
			sub.Close()
			return last, err
		}
		err := h.forward(ctx, sub, &last, send, catchUp)
		sub.Close()
		if err != nil || ctx.Err() != nil {
			if err == nil {
				err = ctx.Err()
			}
			return last, err
		}
	}
}

// forward relays live events until the subscription is dropped (returns
// nil: the caller resubscribes) or ctx ends or send fails.
func (h *Hub) forward(ctx context.Context, sub *Sub, last *int64, send func(graph.Event) error, catchUp func() error) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ev, ok := <-sub.C:
			if !ok {
				return nil
			}
			if ev.Seq <= *last {
				continue
			}
			if ev.Seq > *last+1 {
				// An announcement was missed: the table has the rest.
				if err := catchUp(); err != nil {
					return err
				}
				if ev.Seq <= *last {
					continue
				}
			}
			if err := send(ev); err != nil {
				return err
			}
			*last = ev.Seq
		}
	}
}
