package postgres

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

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
		registerTypes(conn.TypeMap())
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

// registerTypes registers pgx-google-uuid (scans, text), and binary encode
// plans of its own for uuid.UUID and *uuid.UUID (sqlc's nullable uuid):
// pgx-google-uuid's plan boxes each value into an interface (an allocation
// per argument), and it has none for the pointer, which pgx does not
// dereference because its type is a driver.Valuer: a non-nil *uuid.UUID
// went Value() → string → a failed binary encode → a text parse → the
// binary encode (about a dozen allocations).
func registerTypes(m *pgtype.Map) {
	pgxuuid.Register(m)
	m.RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
	registerTimestamptz(m)
	registerJSON(m)
}

// registerJSON has json and jsonb values scanned into a json.RawMessage
// copied as they are. pgx scans them into anything but a *[]byte with
// json.Unmarshal, which for a RawMessage checks the document byte by byte
// and then copies it: an interrupt's payload, with its artifact, was
// checked again on every read (pprof: a third of DecisionSubject's Go CPU
// in BenchmarkApprovalRoundTrip). PostgreSQL only ever sends valid JSON.
func registerJSON(m *pgtype.Map) {
	for _, t := range []struct {
		name string
		oid  uint32
	}{{"json", pgtype.JSONOID}, {"jsonb", pgtype.JSONBOID}} {
		if dt, ok := m.TypeForOID(t.oid); ok {
			m.RegisterType(&pgtype.Type{Name: t.name, OID: t.oid, Codec: rawJSONCodec{Codec: dt.Codec, jsonb: t.oid == pgtype.JSONBOID}})
		}
	}
}

type rawJSONCodec struct {
	pgtype.Codec
	jsonb bool
}

func (c rawJSONCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*json.RawMessage); ok {
		// Binary jsonb is a version byte, then the text. A json value is
		// its text as written, which json.Unmarshal trimmed of spaces.
		switch {
		case !c.jsonb:
			return rawJSONText
		case format == pgtype.BinaryFormatCode:
			return rawJSONBBinary
		}
		return rawJSONBText
	}
	return c.Codec.PlanScan(m, oid, format, target)
}

type rawJSONPlan struct{ versioned, trim bool }

// The plans as interface values made once: a plan boxed on every scan
// was an allocation.
var (
	rawJSONText    pgtype.ScanPlan = rawJSONPlan{trim: true}
	rawJSONBText   pgtype.ScanPlan = rawJSONPlan{}
	rawJSONBBinary pgtype.ScanPlan = rawJSONPlan{versioned: true}
)

func (p rawJSONPlan) Scan(src []byte, dst any) error {
	d := dst.(*json.RawMessage)
	if src == nil {
		*d = nil // SQL NULL
		return nil
	}
	if p.versioned {
		if len(src) == 0 || src[0] != 1 {
			return fmt.Errorf("jsonb: unknown binary version")
		}
		src = src[1:]
	}
	if p.trim {
		src = bytes.Trim(src, " \t\r\n")
	}
	*d = append(json.RawMessage(nil), src...)
	return nil
}

// registerTimestamptz gives timestamptz binary encode plans for time.Time
// and *time.Time that write the value in place: pgx wraps each time.Time
// into a boxed TimestamptzValuer first (an allocation per argument; every
// commit passes one).
func registerTimestamptz(m *pgtype.Map) {
	c := &pgtype.TimestamptzCodec{}
	if t, ok := m.TypeForOID(pgtype.TimestamptzOID); ok {
		if tc, ok := t.Codec.(*pgtype.TimestamptzCodec); ok {
			c = tc
		}
	}
	m.RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID, Codec: timestamptzCodec{c}})
}

type uuidCodec struct{ pgxuuid.UUIDCodec }

func (c uuidCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if p := inPlacePlan(format, value, func(buf []byte, u uuid.UUID) []byte { return append(buf, u[:]...) }); p != nil {
		return p
	}
	return c.UUIDCodec.PlanEncode(m, oid, format, value)
}

type timestamptzCodec struct{ *pgtype.TimestamptzCodec }

func (c timestamptzCodec) PlanEncode(m *pgtype.Map, oid uint32, format int16, value any) pgtype.EncodePlan {
	if p := inPlacePlan(format, value, appendTimestamptz); p != nil {
		return p
	}
	return c.TimestamptzCodec.PlanEncode(m, oid, format, value)
}

// inPlacePlan is a binary encode plan that writes a T or a *T (nil: NULL)
// with put, or nil for any other value or format.
func inPlacePlan[T any](format int16, value any, put func([]byte, T) []byte) pgtype.EncodePlan {
	if format != pgtype.BinaryFormatCode {
		return nil
	}
	switch value.(type) {
	case T:
		return valuePlan[T]{put}
	case *T:
		return pointerPlan[T]{put}
	}
	return nil
}

type valuePlan[T any] struct{ put func([]byte, T) []byte }

func (p valuePlan[T]) Encode(value any, buf []byte) ([]byte, error) {
	return p.put(buf, value.(T)), nil
}

type pointerPlan[T any] struct{ put func([]byte, T) []byte }

func (p pointerPlan[T]) Encode(value any, buf []byte) ([]byte, error) {
	v := value.(*T)
	if v == nil {
		return nil, nil // NULL
	}
	return p.put(buf, *v), nil
}

// microsecFromUnixEpochToY2K: PostgreSQL counts from 2000-01-01 UTC.
const microsecFromUnixEpochToY2K = 946684800 * 1000000

// appendTimestamptz is pgx's binary timestamptz of a finite time:
// microseconds since 2000 (truncated), big-endian.
func appendTimestamptz(buf []byte, t time.Time) []byte {
	us := t.Unix()*1000000 + int64(t.Nanosecond())/1000 - microsecFromUnixEpochToY2K
	return binary.BigEndian.AppendUint64(buf, uint64(us))
}
