package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// The Store keeps users, sessions, API tokens, approvals and the audit
// trail for package auth.
var (
	_ auth.Store         = (*Store)(nil)
	_ auth.DecisionStore = (*Store)(nil)
)

func userFromRow(r dbsqlc.User) auth.User {
	u := auth.User{ID: r.ID.String(), Username: r.Username, PasswordHash: r.PasswordHash, Role: auth.Role(r.Role),
		Kinds: orNoKinds(r.Kinds), Disabled: r.Disabled, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
		Email: r.Email, SlackID: r.SlackID, IdPGroups: orNoKinds(r.IdpGroups), LastLoginAt: r.LastLoginAt}
	if r.OidcIssuer != nil && r.OidcSubject != nil {
		u.OIDCIssuer, u.OIDCSubject = *r.OidcIssuer, *r.OidcSubject
	}
	return u
}

func orNoKinds(k []string) []string {
	if k == nil {
		return []string{}
	}
	return k
}

func isUniqueViolation(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == codeUniqueViol
}

// CreateUser implements auth.Store.
func (s *Store) CreateUser(ctx context.Context, u auth.User, actor string) (*auth.User, error) {
	r, err := s.q.UserInsert(ctx, dbsqlc.UserInsertParams{Username: u.Username, PasswordHash: u.PasswordHash,
		Role: string(u.Role), Kinds: orNoKinds(u.Kinds), Email: u.Email, Actor: actor})
	if isUniqueViolation(err) {
		return nil, fmt.Errorf("user %q: %w", u.Username, auth.ErrExists)
	}
	if err != nil {
		return nil, fmt.Errorf("create user %q: %w", u.Username, err)
	}
	out := userFromRow(dbsqlc.User(r))
	return &out, nil
}

// CreateUserIfMissing implements auth.Store.
func (s *Store) CreateUserIfMissing(ctx context.Context, u auth.User, actor string) (bool, error) {
	ids, err := s.q.UserInsertIfMissing(ctx, dbsqlc.UserInsertIfMissingParams{Username: u.Username,
		PasswordHash: u.PasswordHash, Role: string(u.Role), Actor: actor})
	if err != nil {
		return false, fmt.Errorf("create user %q: %w", u.Username, err)
	}
	return len(ids) > 0, nil
}

// UserByName implements auth.Store.
func (s *Store) UserByName(ctx context.Context, username string) (*auth.User, error) {
	r, err := s.q.UserGetByName(ctx, username)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("user %q: %w", username, auth.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get user %q: %w", username, err)
	}
	u := userFromRow(r)
	return &u, nil
}

// Users implements auth.Store.
func (s *Store) Users(ctx context.Context) ([]auth.User, error) {
	rows, err := s.q.UserList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	out := make([]auth.User, 0, len(rows))
	for _, r := range rows {
		out = append(out, userFromRow(r))
	}
	return out, nil
}

// userChange maps "no row" of a user update to auth.ErrNotFound.
func userChange(username string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("user %q: %w", username, auth.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("update user %q: %w", username, err)
	}
	return nil
}

// SetUserDisabled implements auth.Store.
func (s *Store) SetUserDisabled(ctx context.Context, username string, disabled bool, actor string) error {
	_, err := s.q.UserSetDisabled(ctx, dbsqlc.UserSetDisabledParams{Disabled: disabled, Username: username, Actor: actor})
	return userChange(username, err)
}

// SetUserRole implements auth.Store.
func (s *Store) SetUserRole(ctx context.Context, username string, role auth.Role, kinds []string, actor string) error {
	_, err := s.q.UserSetRole(ctx, dbsqlc.UserSetRoleParams{Role: string(role), Kinds: orNoKinds(kinds),
		Username: username, Actor: actor})
	return userChange(username, err)
}

// SetUserPassword implements auth.Store.
func (s *Store) SetUserPassword(ctx context.Context, username, hash, actor string) error {
	_, err := s.q.UserSetPassword(ctx, dbsqlc.UserSetPasswordParams{PasswordHash: hash, Username: username, Actor: actor})
	return userChange(username, err)
}

// SetUserEmail implements auth.Store.
func (s *Store) SetUserEmail(ctx context.Context, username, email, actor string) error {
	_, err := s.q.UserSetEmail(ctx, dbsqlc.UserSetEmailParams{Email: email, Username: username, Actor: actor})
	return userChange(username, err)
}

// SetUserSlack implements auth.Store.
func (s *Store) SetUserSlack(ctx context.Context, username, slackID, actor string) error {
	_, err := s.q.UserSetSlack(ctx, dbsqlc.UserSetSlackParams{SlackID: slackID, Username: username, Actor: actor})
	if isUniqueViolation(err) {
		return fmt.Errorf("slack id %s belongs to another user: %w", slackID, auth.ErrExists)
	}
	return userChange(username, err)
}

// UserBySlack implements auth.Store.
func (s *Store) UserBySlack(ctx context.Context, slackID string) (*auth.User, error) {
	r, err := s.q.UserGetBySlack(ctx, slackID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("slack user %q: %w", slackID, auth.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get slack user %q: %w", slackID, err)
	}
	u := userFromRow(r)
	return &u, nil
}

// CreateSession implements auth.Store.
func (s *Store) CreateSession(ctx context.Context, ns auth.NewSession) (*auth.Session, error) {
	uid, err := uuid.Parse(ns.UserID)
	if err != nil {
		return nil, fmt.Errorf("create session: bad user id %q", ns.UserID)
	}
	r, err := s.q.SessionInsert(ctx, dbsqlc.SessionInsertParams{TokenHash: ns.TokenHash, UserID: uid,
		CsrfSecret: ns.CSRFKey, UserAgent: ns.UserAgent, Addr: ns.Addr, ExpiresAt: ns.ExpiresAt})
	if err != nil {
		return nil, fmt.Errorf("create session: %w", err)
	}
	return &auth.Session{ID: r.ID.String(), UserID: ns.UserID, CSRFKey: ns.CSRFKey, CreatedAt: r.CreatedAt,
		LastSeenAt: r.LastSeenAt, ExpiresAt: r.ExpiresAt}, nil
}

// SessionByHash implements auth.Store.
func (s *Store) SessionByHash(ctx context.Context, hash []byte) (*auth.Session, error) {
	r, err := s.q.SessionLookup(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, auth.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up session: %w", err)
	}
	return &auth.Session{ID: r.ID.String(), UserID: r.UserID.String(), CSRFKey: r.CsrfSecret, CreatedAt: r.CreatedAt,
		LastSeenAt: r.LastSeenAt, ExpiresAt: r.ExpiresAt, RevokedAt: r.RevokedAt, Username: r.Username,
		Role: auth.Role(r.Role), Kinds: orNoKinds(r.Kinds), Disabled: r.Disabled, Groups: orNoKinds(r.IdpGroups)}, nil
}

// TouchSession implements auth.Store.
func (s *Store) TouchSession(ctx context.Context, id string) error {
	uid, err := uuid.Parse(id)
	if err != nil {
		return auth.ErrNotFound
	}
	return s.q.SessionTouch(ctx, uid)
}

// RevokeSession implements auth.Store.
func (s *Store) RevokeSession(ctx context.Context, id, actor string) error {
	uid, err := uuid.Parse(id)
	if err != nil {
		return auth.ErrNotFound
	}
	_, err = s.q.SessionRevoke(ctx, dbsqlc.SessionRevokeParams{ID: uid, Actor: actor})
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("revoke session: %w", err)
	}
	return nil
}

// CreateToken implements auth.Store.
func (s *Store) CreateToken(ctx context.Context, name string, hash []byte, role auth.Role, createdBy string) (*auth.Token, error) {
	r, err := s.q.TokenInsert(ctx, dbsqlc.TokenInsertParams{Name: name, TokenHash: hash, Role: string(role), CreatedBy: createdBy})
	if err != nil {
		return nil, fmt.Errorf("create token %q: %w", name, err)
	}
	return &auth.Token{ID: r.ID.String(), Name: r.Name, Role: auth.Role(r.Role), CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt}, nil
}

// TokenByHash implements auth.Store.
func (s *Store) TokenByHash(ctx context.Context, hash []byte) (*auth.Token, error) {
	r, err := s.q.TokenLookup(ctx, hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, auth.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("look up token: %w", err)
	}
	return &auth.Token{ID: r.ID.String(), Name: r.Name, Role: auth.Role(r.Role), CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt}, nil
}

// TouchToken implements auth.Store.
func (s *Store) TouchToken(ctx context.Context, id string) error {
	uid, err := uuid.Parse(id)
	if err != nil {
		return auth.ErrNotFound
	}
	return s.q.TokenTouch(ctx, uid)
}

// Tokens implements auth.Store.
func (s *Store) Tokens(ctx context.Context) ([]auth.Token, error) {
	rows, err := s.q.TokenList(ctx)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	out := make([]auth.Token, 0, len(rows))
	for _, r := range rows {
		out = append(out, auth.Token{ID: r.ID.String(), Name: r.Name, Role: auth.Role(r.Role), CreatedBy: r.CreatedBy,
			CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt})
	}
	return out, nil
}

// RevokeToken implements auth.Store.
func (s *Store) RevokeToken(ctx context.Context, id, actor string) (*auth.Token, error) {
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, fmt.Errorf("token %q: %w", id, auth.ErrNotFound)
	}
	if _, err := s.q.TokenRevoke(ctx, dbsqlc.TokenRevokeParams{ID: uid, Actor: actor}); errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("active token %q: %w", id, auth.ErrNotFound)
	} else if err != nil {
		return nil, fmt.Errorf("revoke token %q: %w", id, err)
	}
	r, err := s.q.TokenGet(ctx, uid)
	if err != nil {
		return nil, fmt.Errorf("get token %q: %w", id, err)
	}
	return &auth.Token{ID: r.ID.String(), Name: r.Name, Role: auth.Role(r.Role), CreatedBy: r.CreatedBy,
		CreatedAt: r.CreatedAt, LastUsedAt: r.LastUsedAt, RevokedAt: r.RevokedAt}, nil
}

// RecordLogin implements auth.Store: a success also forgets the user
// name's failures.
func (s *Store) RecordLogin(ctx context.Context, username, addr string, ok bool) error {
	if err := s.q.LoginAttemptInsert(ctx, dbsqlc.LoginAttemptInsertParams{Username: username, Addr: addr, Ok: ok}); err != nil {
		return fmt.Errorf("record login: %w", err)
	}
	if ok {
		if err := s.q.LoginFailuresClear(ctx, username); err != nil {
			return fmt.Errorf("record login: %w", err)
		}
	}
	return nil
}

// LoginFailures implements auth.Store.
func (s *Store) LoginFailures(ctx context.Context, username, addr string, since time.Time) (auth.LoginFailures, error) {
	r, err := s.q.LoginFailures(ctx, dbsqlc.LoginFailuresParams{Username: username, Addr: addr, Since: since})
	if err != nil {
		return auth.LoginFailures{}, fmt.Errorf("count failed logins: %w", err)
	}
	return auth.LoginFailures{ByUser: int(r.ByUser), ByAddr: int(r.ByAddr), UserOldest: r.UserOldest,
		AddrOldest: r.AddrOldest}, nil
}

// Prune implements auth.Store.
func (s *Store) Prune(ctx context.Context, before time.Time) error {
	if _, err := s.q.SessionsPrune(ctx, before); err != nil {
		return fmt.Errorf("prune sessions: %w", err)
	}
	if _, err := s.q.LoginAttemptsPrune(ctx, before); err != nil {
		return fmt.Errorf("prune login attempts: %w", err)
	}
	if _, err := s.q.OIDCFlowsPrune(ctx, before); err != nil {
		return fmt.Errorf("prune SSO sign-in flows: %w", err)
	}
	return nil
}

// AddAudit implements auth.Store.
func (s *Store) AddAudit(ctx context.Context, e auth.AuditEvent) error {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage(`{}`)
	}
	if err := s.q.AuditInsert(ctx, dbsqlc.AuditInsertParams{Actor: e.Actor, Kind: e.Kind, Subject: e.Subject, Data: data}); err != nil {
		return fmt.Errorf("audit %s: %w", e.Kind, err)
	}
	return nil
}

// Audit limits.
const (
	defaultAuditLimit = 100
	maxAuditLimit     = 1000
)

// farFuture bounds open-ended audit queries.
var farFuture = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)

// AuditTrail implements auth.Store: administrative actions and actions on
// tasks (created, approved, decided, cancelled, retried), newest first.
func (s *Store) AuditTrail(ctx context.Context, f auth.AuditFilter) ([]auth.AuditEvent, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultAuditLimit
	}
	limit = min(limit, maxAuditLimit)
	until := f.Until
	if until.IsZero() {
		until = farFuture
	}
	rows, err := s.q.AuditList(ctx, dbsqlc.AuditListParams{MaxRows: int32(limit), Actor: f.Actor, Kind: f.Kind,
		Since: f.Since, Until: until})
	if err != nil {
		return nil, fmt.Errorf("audit trail: %w", err)
	}
	out := make([]auth.AuditEvent, 0, len(rows))
	for _, r := range rows {
		e := auth.AuditEvent{At: r.At, Actor: r.Actor, Kind: r.Kind, Subject: r.Subject, Data: r.Data, Seq: r.Seq}
		if r.TaskID != nil {
			e.TaskID = r.TaskID.String()
		}
		out = append(out, e)
	}
	return out, nil
}

// codeDeadlock is PostgreSQL's deadlock_detected.
const codeDeadlock = "40P01"

// RecordApproval implements auth.DecisionStore: under a lock of the
// interrupt, it checks the interrupt is the task's and pending, adds the
// approval, and appends approval.recorded with the count so far.
func (s *Store) RecordApproval(ctx context.Context, interruptID, taskID, approver string, required int) ([]string, bool, error) {
	iid, ok := parseID(interruptID)
	if !ok {
		return nil, false, graph.ErrInterruptNotFound
	}
	tid, ok := parseID(taskID)
	if !ok {
		return nil, false, graph.ErrInterruptNotFound
	}
	for attempt := 1; ; attempt++ {
		approvers, added, seq, err := s.recordApproval(ctx, iid, tid, approver, required)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == codeDeadlock && attempt < 3 {
			continue // a concurrent cancel took the locks the other way round
		}
		if err != nil {
			return nil, false, err
		}
		if seq > 0 {
			s.announce(ctx, note{task: taskID, first: seq, last: seq})
			s.publish(ctx, taskID, seq)
		}
		return approvers, added, nil
	}
}

func (s *Store) recordApproval(ctx context.Context, iid, tid uuid.UUID, approver string, required int) ([]string, bool, int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, false, 0, fmt.Errorf("approve: begin: %w", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after commit
	q := s.q.WithTx(tx)
	itr, err := q.InterruptLock(ctx, iid)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || err == nil && itr.TaskID != tid:
		return nil, false, 0, graph.ErrInterruptNotFound
	case err != nil:
		return nil, false, 0, fmt.Errorf("approve: %w", err)
	case itr.Status != graph.InterruptPending:
		return nil, false, 0, &graph.ConflictError{InterruptID: iid.String(), Status: itr.Status}
	}
	n, err := q.ApprovalInsert(ctx, dbsqlc.ApprovalInsertParams{InterruptID: iid, TaskID: tid, Approver: approver})
	if err != nil {
		return nil, false, 0, fmt.Errorf("approve: %w", err)
	}
	rows, err := q.ApprovalList(ctx, iid)
	if err != nil {
		return nil, false, 0, fmt.Errorf("approve: %w", err)
	}
	approvers := make([]string, 0, len(rows))
	for _, r := range rows {
		approvers = append(approvers, r.Approver)
	}
	var seq int64
	if n > 0 {
		data, _ := json.Marshal(map[string]any{"interrupt_id": iid.String(), "kind": itr.Kind,
			"approved_by": approver, "actor": approver, "approvals": len(approvers), "required": required})
		seq, err = q.TaskAppendEvent(ctx, dbsqlc.TaskAppendEventParams{TaskID: tid, Type: graph.EventApprovalRecorded,
			Node: itr.Node, Iteration: itr.Iteration, Data: data})
		if err != nil {
			return nil, false, 0, fmt.Errorf("approve: %w", err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return nil, false, 0, fmt.Errorf("approve: commit: %w", err)
	}
	return approvers, n > 0, seq, nil
}

// Approvals implements auth.DecisionStore.
func (s *Store) Approvals(ctx context.Context, interruptID string) ([]string, error) {
	iid, ok := parseID(interruptID)
	if !ok {
		return []string{}, nil
	}
	rows, err := s.q.ApprovalList(ctx, iid)
	if err != nil {
		return nil, fmt.Errorf("approvals of %s: %w", interruptID, err)
	}
	out := make([]string, 0, len(rows))
	for _, r := range rows {
		out = append(out, r.Approver)
	}
	return out, nil
}

// TaskApprovals lists the approvals of every interrupt of a task, oldest
// first: interrupt id → approvers.
func (s *Store) TaskApprovals(ctx context.Context, taskID string) (map[string][]string, error) {
	tid, ok := parseID(taskID)
	if !ok {
		return map[string][]string{}, nil
	}
	rows, err := s.q.ApprovalListByTask(ctx, tid)
	if err != nil {
		return nil, fmt.Errorf("approvals of task %s: %w", taskID, err)
	}
	out := map[string][]string{}
	for _, r := range rows {
		k := r.InterruptID.String()
		out[k] = append(out[k], r.Approver)
	}
	return out, nil
}
