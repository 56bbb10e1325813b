package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// PresenceStale is how long an open page's row counts without a refresh:
// a viewer whose replica died is gone this long after its last heartbeat.
const PresenceStale = 15 * time.Second

// PresenceTouch records that viewer (one open page) of username has task
// open, now; a new row is announced to every replica (ChannelPresence).
func (s *Store) PresenceTouch(ctx context.Context, taskID, viewer, username string) error {
	id, ok := parseID(taskID)
	if !ok {
		return fmt.Errorf("presence: bad task id %q", taskID)
	}
	inserted, err := s.q.PresenceTouch(ctx, dbsqlc.PresenceTouchParams{TaskID: id, Viewer: viewer, Username: username})
	if err != nil {
		return fmt.Errorf("presence: %w", err)
	}
	if inserted {
		s.announce(ctx, note{task: taskID, presence: true})
	}
	return nil
}

// PresenceLeave removes an open page and announces it.
func (s *Store) PresenceLeave(ctx context.Context, taskID, viewer string) error {
	id, ok := parseID(taskID)
	if !ok {
		return fmt.Errorf("presence: bad task id %q", taskID)
	}
	if err := s.q.PresenceLeave(ctx, dbsqlc.PresenceLeaveParams{TaskID: id, Viewer: viewer}); err != nil {
		return fmt.Errorf("presence: %w", err)
	}
	s.announce(ctx, note{task: taskID, presence: true})
	return nil
}

// Presence lists who has a task open, by name.
func (s *Store) Presence(ctx context.Context, taskID string) ([]string, error) {
	id, ok := parseID(taskID)
	if !ok {
		return nil, nil
	}
	names, err := s.q.PresenceList(ctx, dbsqlc.PresenceListParams{TaskID: id, StaleSeconds: PresenceStale.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("presence: %w", err)
	}
	return names, nil
}

// PresenceCounts counts the people who have each of the tasks open.
func (s *Store) PresenceCounts(ctx context.Context, taskIDs []string) (map[string]int, error) {
	ids := parseIDs(taskIDs)
	out := map[string]int{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.q.PresenceCounts(ctx, dbsqlc.PresenceCountsParams{TaskIds: ids, StaleSeconds: PresenceStale.Seconds()})
	if err != nil {
		return nil, fmt.Errorf("presence counts: %w", err)
	}
	for _, r := range rows {
		out[r.TaskID.String()] = int(r.Viewers)
	}
	return out, nil
}

// PresencePrune deletes the rows of pages long gone (a replica that died
// could not delete its own).
func (s *Store) PresencePrune(ctx context.Context) error { return s.q.PresencePrune(ctx) }
