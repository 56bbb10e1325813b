package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
	"github.com/gatehousehq/gatehouse/internal/sso"
)

// The Store keeps the SSO sign-ins under way (SPEC §21).
var _ sso.FlowStore = (*Store)(nil)

// UserByOIDC implements auth.Store.
func (s *Store) UserByOIDC(ctx context.Context, issuer, subject string) (*auth.User, error) {
	r, err := s.q.UserGetByOIDC(ctx, dbsqlc.UserGetByOIDCParams{Issuer: issuer, Subject: subject})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, auth.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("user by SSO subject: %w", err)
	}
	u := userFromRow(r)
	return &u, nil
}

// CreateOIDCUser implements auth.Store.
func (s *Store) CreateOIDCUser(ctx context.Context, u auth.User, actor string) (*auth.User, error) {
	rows, err := s.q.UserInsertOIDC(ctx, dbsqlc.UserInsertOIDCParams{Username: u.Username, Role: string(u.Role),
		Email: u.Email, Issuer: u.OIDCIssuer, Subject: u.OIDCSubject, Groups: orNoKinds(u.IdPGroups), Actor: actor})
	if err != nil {
		return nil, fmt.Errorf("create SSO user %q: %w", u.Username, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("user %q or its SSO subject: %w", u.Username, auth.ErrExists)
	}
	out := userFromRow(dbsqlc.User(rows[0]))
	return &out, nil
}

// SetOIDCLogin implements auth.Store.
func (s *Store) SetOIDCLogin(ctx context.Context, userID string, role auth.Role, groups []string, actor string) (*auth.User, error) {
	id, err := uuid.Parse(userID)
	if err != nil {
		return nil, auth.ErrNotFound
	}
	r, err := s.q.UserSetOIDCLogin(ctx, dbsqlc.UserSetOIDCLoginParams{ID: id, Role: string(role), Groups: orNoKinds(groups), Actor: actor})
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, auth.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("record SSO sign-in: %w", err)
	}
	out := userFromRow(dbsqlc.User(r))
	return &out, nil
}

// EndOIDCAccess implements auth.Store.
func (s *Store) EndOIDCAccess(ctx context.Context, userID string, groups []string, actor string) (int, error) {
	id, err := uuid.Parse(userID)
	if err != nil {
		return 0, auth.ErrNotFound
	}
	r, err := s.q.UserEndOIDCAccess(ctx, dbsqlc.UserEndOIDCAccessParams{ID: id, Groups: orNoKinds(groups), Actor: actor})
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, auth.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("end SSO access: %w", err)
	}
	return int(r.Revoked), nil
}

// SaveFlow implements sso.FlowStore.
func (s *Store) SaveFlow(ctx context.Context, stateHash []byte, f sso.Flow) error {
	return s.q.OIDCFlowInsert(ctx, dbsqlc.OIDCFlowInsertParams{StateHash: stateHash, Nonce: f.Nonce, Verifier: f.Verifier,
		Next: f.Next, ExpiresAt: f.ExpiresAt})
}

// TakeFlow implements sso.FlowStore.
func (s *Store) TakeFlow(ctx context.Context, stateHash []byte) (sso.Flow, error) {
	r, err := s.q.OIDCFlowTake(ctx, stateHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return sso.Flow{}, auth.ErrNotFound
	}
	if err != nil {
		return sso.Flow{}, fmt.Errorf("take SSO sign-in flow: %w", err)
	}
	return sso.Flow{Nonce: r.Nonce, Verifier: r.Verifier, Next: r.Next, ExpiresAt: r.ExpiresAt}, nil
}
