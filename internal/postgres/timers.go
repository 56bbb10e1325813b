package postgres

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/notify"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// Event types of SPEC §11, written by timers and claims.
const (
	EventInterruptExpired    = "interrupt.expired"
	EventInterruptOverdue    = "interrupt.overdue"
	EventInterruptReminder   = "interrupt.reminder"
	EventInterruptEscalated  = "interrupt.escalated"
	EventInterruptClaimed    = "interrupt.claimed"
	EventInterruptReleased   = "interrupt.released"
	EventInterruptTakenOver  = "interrupt.taken_over"
	systemActor              = "system"
	defaultTimerBatch        = 1000
	timerDeadlockRetryPauses = 5
)

// NextTimer returns when the earliest timer is due; ok false when none is
// scheduled.
func (s *Store) NextTimer(ctx context.Context) (at time.Time, ok bool, err error) {
	at, err = s.q.TimerNextDue(ctx)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("next timer: %w", err)
	}
	return at, true, nil
}

// FireTimers fires up to limit due timers in one transaction and reports
// how many it took (0: none was due, or others hold them). The timer rows
// are deleted by the transaction that applies them: each fires once,
// whichever replica takes it, and a crash before the commit leaves it due.
// What fires:
//   - a deadline with on_timeout fail, approve or cancel expires its
//     pending interrupt (interrupt.expired by system) and fails the task,
//     records system's approval, or cancels it; with none, the interrupt
//     is marked overdue (interrupt.overdue), once;
//   - a reminder writes interrupt.reminder (data.offset; data.to, the
//     names of the deciders at the interrupt's escalation level who have
//     not decided);
//   - an escalation step raises the escalation level and writes
//     interrupt.escalated (data.level, data.added).
//
// A timer of an interrupt no longer pending does nothing.
func (s *Store) FireTimers(ctx context.Context, limit int, pol auth.TimerPolicy) (int, error) {
	if limit <= 0 {
		limit = defaultTimerBatch
	}
	var (
		n     int
		notes []note
		err   error
	)
	for attempt := 0; ; attempt++ {
		n, notes, err = s.fireTimers(ctx, limit, pol)
		if err == nil || !isRetryable(err) || attempt >= timerDeadlockRetryPauses {
			break
		}
		// Two replicas took interlocking rows (a deadlock PostgreSQL broke
		// by aborting us): nothing was written, try again.
		time.Sleep(time.Duration(attempt+1) * 10 * time.Millisecond)
	}
	if err != nil {
		return 0, err
	}
	s.announce(ctx, notes...)
	return n, nil
}

func isRetryable(err error) bool {
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) {
		switch pgErr.SQLState() {
		case "40P01", "40001": // deadlock_detected, serialization_failure
			return true
		}
	}
	return false
}

// timerEvent is one event the firing writes, before it has a seq, with
// the notifications it causes (SPEC §12's outbox, same transaction).
type timerEvent struct {
	task      uuid.UUID
	typ, node string
	iteration int32
	data      map[string]any
	notice    *outboxEvent
	// mail, when set, says whom the notice mails, by the policy at the
	// interrupt's escalation level (resolved in enqueueNotices).
	mail  audience
	level int
}

// audience is whom a timer event's notice mails.
type audience int

const (
	mailAsSaid    audience = iota // the notice's own mode
	mailUndecided                 // reminder: the level's deciders who have not decided
	mailAdded                     // escalation: the deciders the level added
)

func (s *Store) fireTimers(ctx context.Context, limit int, pol auth.TimerPolicy) (int, []note, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("fire timers: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	q := s.q.WithTx(tx)
	due, err := q.TimersClaimDue(ctx, int32(limit))
	if err != nil {
		return 0, nil, fmt.Errorf("fire timers: claim: %w", err)
	}
	if len(due) == 0 {
		return 0, nil, nil
	}
	// Lock rows in one order on every replica.
	slices.SortFunc(due, func(a, b dbsqlc.InterruptTimer) int { return bytes.Compare(a.InterruptID[:], b.InterruptID[:]) })
	var (
		expire, overdue, remind, escalate []uuid.UUID
		levels                            []int32
		action                            = map[uuid.UUID]string{}
		offset                            = map[uuid.UUID][]float64{}
	)
	for _, t := range due {
		switch t.What {
		case graph.TimerDeadline:
			if t.Action == "" || t.Action == "none" {
				overdue = append(overdue, t.InterruptID)
			} else {
				expire = append(expire, t.InterruptID)
				action[t.InterruptID] = t.Action
			}
		case graph.TimerReminder:
			if len(offset[t.InterruptID]) == 0 {
				remind = append(remind, t.InterruptID)
			}
			offset[t.InterruptID] = append(offset[t.InterruptID], t.OffsetS)
		case graph.TimerEscalate:
			if i := slices.Index(escalate, t.InterruptID); i >= 0 {
				levels[i] = max(levels[i], t.Step)
				continue
			}
			escalate = append(escalate, t.InterruptID)
			levels = append(levels, t.Step)
		}
	}
	var evs []timerEvent
	now := time.Now()
	waited := func(created time.Time, deadline *time.Time) string {
		d := now.Sub(created)
		if deadline != nil {
			d = deadline.Sub(created)
		}
		return d.Round(time.Second).String()
	}
	// Reminders and escalations first: they were due before the deadline
	// that may fall in the same batch (a replica down through all of them).
	if len(escalate) > 0 {
		rows, err := q.InterruptsEscalate(ctx, dbsqlc.InterruptsEscalateParams{Ids: escalate, Levels: levels})
		if err != nil {
			return 0, nil, fmt.Errorf("fire timers: escalate: %w", err)
		}
		for _, r := range rows {
			var added []string
			if pol != nil {
				added = pol.Added(r.Kind, int(r.EscalationLevel))
			}
			rid := r.ID
			evs = append(evs, timerEvent{task: r.TaskID, typ: EventInterruptEscalated, node: r.Node, iteration: r.Iteration,
				data: map[string]any{"interrupt_id": r.ID.String(), "kind": r.Kind, "actor": systemActor,
					"level": r.EscalationLevel, "added": orEmptyStrings(added)},
				notice: &outboxEvent{event: notify.EventEscalated, interruptID: &rid, kind: r.Kind, mode: "users", users: []string{}},
				mail:   mailAdded, level: int(r.EscalationLevel)})
		}
	}
	if len(remind) > 0 {
		rows, err := q.InterruptsLockPending(ctx, remind)
		if err != nil {
			return 0, nil, fmt.Errorf("fire timers: reminders: %w", err)
		}
		for _, r := range rows {
			for _, off := range offset[r.ID] {
				// data.to is filled in by audiences, below.
				data := map[string]any{"interrupt_id": r.ID.String(), "kind": r.Kind, "actor": systemActor,
					"offset": shortDuration(time.Duration(off * float64(time.Second))), "to": []string{}}
				if r.DeadlineAt != nil {
					data["deadline"] = r.DeadlineAt.UTC().Format(time.RFC3339Nano)
				}
				rid := r.ID
				evs = append(evs, timerEvent{task: r.TaskID, typ: EventInterruptReminder, node: r.Node, iteration: r.Iteration, data: data,
					notice: &outboxEvent{event: notify.EventReminder, interruptID: &rid, kind: r.Kind, mode: "users", users: []string{}},
					mail:   mailUndecided, level: int(r.EscalationLevel)})
			}
		}
	}
	var runnable []uuid.UUID
	if len(expire) > 0 {
		rows, err := q.InterruptsExpire(ctx, expire)
		if err != nil {
			return 0, nil, fmt.Errorf("fire timers: expire: %w", err)
		}
		var failIDs, cancelIDs, apprItr, apprTask []uuid.UUID
		var failErrs, apprSha []string
		for _, r := range rows {
			act := action[r.ID]
			w := waited(r.CreatedAt, r.DeadlineAt)
			data := map[string]any{"interrupt_id": r.ID.String(), "kind": r.Kind, "actor": systemActor,
				"on_timeout": act, "waited": w}
			if r.DeadlineAt != nil {
				data["deadline"] = r.DeadlineAt.UTC().Format(time.RFC3339Nano)
			}
			rid := r.ID
			evs = append(evs, timerEvent{task: r.TaskID, typ: EventInterruptExpired, node: r.Node, iteration: r.Iteration, data: data,
				notice: &outboxEvent{event: notify.EventExpired, interruptID: &rid, kind: r.Kind, mode: "none"}})
			switch act {
			case "fail":
				msg := fmt.Sprintf("deadline passed: %s at %s waited %s", r.Kind, r.Node, w)
				failIDs, failErrs = append(failIDs, r.TaskID), append(failErrs, msg)
				evs = append(evs, timerEvent{task: r.TaskID, typ: graph.EventTaskFailed, node: r.Node, iteration: r.Iteration,
					data:   map[string]any{"error": msg, "actor": systemActor, "interrupt_id": r.ID.String()},
					notice: &outboxEvent{event: notify.EventFailed, mode: "creator"}})
			case "cancel":
				cancelIDs = append(cancelIDs, r.TaskID)
				evs = append(evs, timerEvent{task: r.TaskID, typ: graph.EventTaskCancelled, node: r.Node, iteration: r.Iteration,
					data: map[string]any{"cancelled_by": systemActor, "actor": systemActor, "reason": "deadline passed",
						"interrupt_id": r.ID.String()},
					notice: &outboxEvent{event: notify.EventCancelled, mode: "creator"}})
			case "approve":
				apprItr, apprTask, apprSha = append(apprItr, r.ID), append(apprTask, r.TaskID), append(apprSha, r.PayloadSha256)
				d := map[string]any{"interrupt_id": r.ID.String(), "kind": r.Kind, "action": graph.ActionApprove, "feedback": "",
					"decided_by": systemActor, "actor": systemActor, "on_timeout": "approve"}
				if r.PayloadSha256 != "" {
					d["payload_sha256"] = r.PayloadSha256
				}
				evs = append(evs, timerEvent{task: r.TaskID, typ: graph.EventDecisionRecorded, node: r.Node, iteration: r.Iteration, data: d,
					notice: &outboxEvent{event: notify.EventDecided, interruptID: &rid, kind: r.Kind, mode: "none"}})
				runnable = append(runnable, r.TaskID)
			}
		}
		if len(failIDs) > 0 {
			if err := q.TasksFail(ctx, dbsqlc.TasksFailParams{Ids: failIDs, Errors: failErrs}); err != nil {
				return 0, nil, fmt.Errorf("fire timers: fail tasks: %w", err)
			}
		}
		if len(cancelIDs) > 0 {
			if err := q.TasksCancel(ctx, cancelIDs); err != nil {
				return 0, nil, fmt.Errorf("fire timers: cancel tasks: %w", err)
			}
		}
		if len(apprItr) > 0 {
			if err := q.TasksApproveOnTimeout(ctx, dbsqlc.TasksApproveOnTimeoutParams{InterruptIds: apprItr,
				TaskIds: apprTask, Shas: apprSha}); err != nil {
				return 0, nil, fmt.Errorf("fire timers: approve: %w", err)
			}
		}
	}
	if len(overdue) > 0 {
		rows, err := q.InterruptsMarkOverdue(ctx, overdue)
		if err != nil {
			return 0, nil, fmt.Errorf("fire timers: overdue: %w", err)
		}
		for _, r := range rows {
			data := map[string]any{"interrupt_id": r.ID.String(), "kind": r.Kind, "actor": systemActor,
				"waited": waited(r.CreatedAt, r.DeadlineAt)}
			if r.DeadlineAt != nil {
				data["deadline"] = r.DeadlineAt.UTC().Format(time.RFC3339Nano)
			}
			evs = append(evs, timerEvent{task: r.TaskID, typ: EventInterruptOverdue, node: r.Node, iteration: r.Iteration, data: data})
		}
	}
	if err := s.audiences(ctx, q, evs, pol); err != nil {
		return 0, nil, err
	}
	notes, err := appendEvents(ctx, q, evs)
	if err != nil {
		return 0, nil, err
	}
	// The notifications of these events, in their transaction: none is
	// lost in a crash, none sent for a firing that did not commit.
	sent, err := s.enqueueNotices(ctx, tx, evs)
	if err != nil {
		return 0, nil, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, nil, fmt.Errorf("fire timers: commit: %w", err)
	}
	s.outboxWritten(ctx, sent)
	for _, id := range runnable {
		notes = append(notes, note{task: id.String()})
	}
	return len(due), notes, nil
}

// appendEvents writes evs in order within q's transaction (several tasks
// at once) and returns the announcements of their seq ranges, to send
// after the commit.
func appendEvents(ctx context.Context, q *dbsqlc.Queries, evs []timerEvent) ([]note, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	// Tasks are locked in one order (their first event's), with each
	// task's events kept in their order.
	order := slices.Clone(evs)
	slices.SortStableFunc(order, func(a, b timerEvent) int { return bytes.Compare(a.task[:], b.task[:]) })
	p := dbsqlc.EventsAppendParams{TaskIds: make([]uuid.UUID, len(order)), Types: make([]string, len(order)),
		Nodes: make([]string, len(order)), Iterations: make([]int32, len(order)), Datas: make([]string, len(order))}
	for i, e := range order {
		data, err := json.Marshal(e.data)
		if err != nil {
			return nil, err
		}
		p.TaskIds[i], p.Types[i], p.Nodes[i], p.Iterations[i], p.Datas[i] = e.task, e.typ, e.node, e.iteration, string(data)
	}
	rows, err := q.EventsAppend(ctx, p)
	if err != nil {
		return nil, fmt.Errorf("append events: %w", err)
	}
	span := map[uuid.UUID][2]int64{}
	for _, r := range rows {
		sp, ok := span[r.TaskID]
		if !ok {
			sp = [2]int64{r.Seq, r.Seq}
		}
		sp[0], sp[1] = min(sp[0], r.Seq), max(sp[1], r.Seq)
		span[r.TaskID] = sp
	}
	ids := make([]uuid.UUID, 0, len(span))
	for id := range span {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return cmp.Compare(a.String(), b.String()) })
	notes := make([]note, 0, len(ids))
	for _, id := range ids {
		notes = append(notes, note{task: id.String(), first: span[id][0], last: span[id][1]})
	}
	return notes, nil
}

func orEmptyStrings(a []string) []string {
	if a == nil {
		return []string{}
	}
	return a
}

// shortDuration is a Go duration without zero tails (72h, 90m, 2s).
func shortDuration(d time.Duration) string {
	s := d.Round(time.Millisecond).String()
	if len(s) > 4 && s[len(s)-4:] == "m0s" {
		s = s[:len(s)-2]
	}
	if len(s) > 3 && s[len(s)-3:] == "h0m" {
		s = s[:len(s)-2]
	}
	return s
}

// enqueueNotices writes the outbox rows of evs in tx, in one round trip
// (audiences said whom reminders and escalations mail).
func (s *Store) enqueueNotices(ctx context.Context, tx pgx.Tx, evs []timerEvent) ([]notify.Delivery, error) {
	if !s.opts.Outbox.Email {
		// Without mail, only webhooks take these (Slack takes raises
		// only): none configured, nothing to write — a burst of 10,000
		// expiries costs no statement per timer.
		any, err := s.q.WithTx(tx).WebhookEndpointsExist(ctx)
		if err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		if !any {
			return nil, nil
		}
	}
	b := &pgx.Batch{}
	written := make([][]notify.Delivery, 0, len(evs))
	for _, e := range evs {
		if e.notice != nil {
			written = append(written, nil)
			s.queueOutbox(ctx, b, e.task, e.notice, &written[len(written)-1])
		}
	}
	if b.Len() == 0 {
		return nil, nil
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	return slices.Concat(written...), nil
}

// audiences names the deciders of the reminders of evs (data.to: who may
// decide at the interrupt's escalation level and has not decided — an
// approval of a kind needing several is a decision — less a creator that
// separation of duties bars; escalated deciders included) and, with email
// on, fills in whom the notices of reminders and escalations mail: a
// reminder, those of its data.to with an address; an escalation, the
// deciders its step added — users named by the step who may decide the
// kind, and could not before (SPEC §12). Disabled users are never named.
// Three statements per batch of timers, none per timer; none when the
// batch has no reminder and mails nothing.
func (s *Store) audiences(ctx context.Context, q *dbsqlc.Queries, evs []timerEvent, pol auth.TimerPolicy) error {
	var tasks, itrs []uuid.UUID
	for _, e := range evs {
		if e.notice == nil || e.notice.interruptID == nil || e.mail == mailAsSaid || e.mail == mailAdded && !s.opts.Outbox.Email {
			continue
		}
		tasks, itrs = append(tasks, e.task), append(itrs, *e.notice.interruptID)
	}
	if len(itrs) == 0 || pol == nil {
		return nil
	}
	users, err := q.UsersDeciding(ctx)
	if err != nil {
		return fmt.Errorf("timer audiences: users: %w", err)
	}
	if len(users) == 0 {
		return nil
	}
	candidates := make([]auth.Principal, len(users))
	var mailable []auth.Principal
	for i, u := range users {
		candidates[i] = auth.Principal{Name: u.Username, Role: auth.Role(u.Role), Kinds: u.Kinds, Kind: auth.KindUser, Groups: u.IdpGroups}
		if u.Mailable {
			mailable = append(mailable, candidates[i])
		}
	}
	creators, err := q.TaskCreators(ctx, tasks)
	if err != nil {
		return fmt.Errorf("timer audiences: task creators: %w", err)
	}
	creator := make(map[uuid.UUID]string, len(creators))
	for _, c := range creators {
		creator[c.ID] = c.CreatedBy
	}
	approvals, err := q.InterruptApprovers(ctx, itrs)
	if err != nil {
		return fmt.Errorf("timer audiences: approvals: %w", err)
	}
	decided := map[uuid.UUID][]string{}
	for _, a := range approvals {
		decided[a.InterruptID] = append(decided[a.InterruptID], a.Approver)
	}
	undecided := func(e *timerEvent, to []auth.Principal) []string {
		names := make([]string, 0, len(to))
		for _, p := range to {
			if !slices.Contains(decided[*e.notice.interruptID], p.Name) {
				names = append(names, p.Name)
			}
		}
		return names
	}
	for i := range evs {
		e := &evs[i]
		if e.notice == nil || e.notice.interruptID == nil {
			continue
		}
		switch e.mail {
		case mailUndecided:
			to := pol.Recipients(e.notice.kind, e.level, creator[e.task], candidates)
			e.data["to"] = undecided(e, to)
			if s.opts.Outbox.Email {
				e.notice.users = undecided(e, slices.DeleteFunc(to, func(p auth.Principal) bool {
					return !slices.ContainsFunc(mailable, func(m auth.Principal) bool { return m.Name == p.Name })
				}))
			}
		case mailAdded:
			if s.opts.Outbox.Email {
				e.notice.users = undecided(e, pol.EscalationRecipients(e.notice.kind, e.level, creator[e.task], mailable))
			}
		}
	}
	return nil
}

// DeadlineActions returns what the deadline of each interrupt does when it
// falls due (fail, approve, cancel or none), by interrupt id; an interrupt
// without a deadline timer (none, or it fired) is missing.
func (s *Store) DeadlineActions(ctx context.Context, interruptIDs []string) (map[string]string, error) {
	ids := parseIDs(interruptIDs)
	out := map[string]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := s.q.TimerDeadlineActions(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("deadline actions: %w", err)
	}
	for _, r := range rows {
		out[r.InterruptID.String()] = r.Action
	}
	return out, nil
}
