package postgres

import (
	"context"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// ConfigurePool prepares pool connections for the Store. It teaches pgx
// google/uuid's type: without it every uuid.UUID argument goes through
// driver.Valuer — formatted as text, a failed binary plan built with its
// error message, then parsed back — which was a tenth of the server's CPU
// when tasks ran at full speed.
func ConfigurePool(pc *pgxpool.Config) {
	next := pc.AfterConnect
	pc.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		registerUUID(conn.TypeMap())
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

// registerUUID registers pgx-google-uuid, and a plan for *uuid.UUID (sqlc's
// nullable uuid) that it lacks: pgx does not dereference a pointer whose
// type is a driver.Valuer, so a non-nil *uuid.UUID took the detour above
// (about a dozen allocations per argument).
func registerUUID(m *pgtype.Map) {
	pgxuuid.Register(m)
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUIDPointer}, m.TryWrapEncodePlanFuncs...)
}

func tryWrapUUIDPointer(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if _, ok := value.(*uuid.UUID); ok {
		return &uuidPointerPlan{}, uuid.UUID{}, true
	}
	return nil, nil, false
}

type uuidPointerPlan struct{ next pgtype.EncodePlan }

func (p *uuidPointerPlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidPointerPlan) Encode(value any, buf []byte) ([]byte, error) {
	u := value.(*uuid.UUID)
	if u == nil {
		return nil, nil
	}
	return p.next.Encode(*u, buf)
}
