package postgres

import "time"

// HoldCommits makes the store's committer look busy, so that commits queue
// up instead of leaving; the returned release sends what queued, as one
// group. Tests use it to make group commits happen deterministically.
func HoldCommits(s *Store) (pending func() int, release func()) {
	g := s.group
	g.mu.Lock()
	held := g.lanes - g.active
	g.active = g.lanes
	g.mu.Unlock()
	pending = func() int {
		g.mu.Lock()
		defer g.mu.Unlock()
		return len(g.pending)
	}
	release = func() {
		g.mu.Lock()
		g.active -= held - 1
		g.mu.Unlock()
		go g.drive()
	}
	return pending, release
}

// OutboxPruneLockKey is the advisory lock a notification prune holds.
const OutboxPruneLockKey = outboxPruneLockKey

// SetCommitTimeout shortens the bound of the store's commits sent for a
// context that cannot end, and of its batches.
func SetCommitTimeout(s *Store, d time.Duration) { s.group.timeout = d }
