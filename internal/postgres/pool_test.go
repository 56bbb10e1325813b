package postgres_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/graph/graphtest"
	"github.com/gatehousehq/gatehouse/internal/postgres"
	"github.com/gatehousehq/gatehouse/internal/postgres/pgtest"
)

// argRecorder keeps the SQL and arguments of every query and batched query
// a pool sends.
type argRecorder struct {
	mu   sync.Mutex
	sent []sentQuery
}

type sentQuery struct {
	sql  string
	args []any
}

func (r *argRecorder) add(sql string, args []any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sentQuery{sql, append([]any(nil), args...)})
}

func (r *argRecorder) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL, d.Args)
	return ctx
}
func (r *argRecorder) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *argRecorder) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}
func (r *argRecorder) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	r.add(d.SQL, d.Args)
}
func (r *argRecorder) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

// TestStoreArgumentsEncodeDirectly runs tasks through their steps, a gate
// and a decision on a pool as ConfigurePool prepares it, and checks that
// every argument the store passed has an encode plan of its own for its
// parameter's type, in the format pgx picks for it. An argument pgx can
// encode only through driver.Valuer (Value() → string → a failed binary
// encode, its error built with fmt.Errorf → a text parse → the binary
// encode) cost a dozen allocations per parameter per statement.
func TestStoreArgumentsEncodeDirectly(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.NewDB(t))
	if err != nil {
		t.Fatal(err)
	}
	postgres.ConfigurePool(cfg)
	rec := &argRecorder{}
	cfg.ConnConfig.Tracer = rec
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	store := postgres.NewStore(pool, postgres.Options{})
	e, err := graph.NewEngine(store, []graph.Workflow{graphtest.GateCycle(), graphtest.Linear(3)})
	if err != nil {
		t.Fatal(err)
	}
	task, in := graphtest.RunToGate(t, e)
	if _, err := e.Decide(ctx, task.ID, graph.DecisionInput{InterruptID: in.ID, Action: graph.ActionApprove, Task: task}); err != nil {
		t.Fatal(err)
	}
	if out, err := e.Run(ctx, task.ID, 0); err != nil || out.Interrupt == nil {
		t.Fatalf("run to the next gate: %+v %v", out, err)
	}
	if _, err := e.Create(ctx, graph.NewTask{Workflow: "linear"}); err != nil {
		t.Fatal(err)
	}
	claims, err := store.Claim(ctx, "w1", 4, time.Minute)
	if err != nil || len(claims) != 1 {
		t.Fatalf("claim: %v %v", claims, err)
	}
	if out, err := e.Run(ctx, claims[0].TaskID, claims[0].Fence); err != nil || out.Status != graph.StatusSucceeded {
		t.Fatalf("run the claimed task: %+v %v", out, err)
	}

	// A connection of its own, without the tracer, to describe each query.
	conn, err := pgx.Connect(ctx, pool.Config().ConnConfig.ConnString())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rec.mu.Lock()
	sent := rec.sent
	rec.mu.Unlock()
	checked := map[string]bool{}
	for _, q := range sent {
		if len(q.args) == 0 {
			continue
		}
		sd, err := conn.Prepare(ctx, "", q.sql)
		if err != nil {
			t.Fatalf("describe %q: %v", q.sql, err)
		}
		for i, arg := range q.args {
			if i >= len(sd.ParamOIDs) {
				break
			}
			if v := reflect.ValueOf(arg); !v.IsValid() || v.Kind() == reflect.Pointer && v.IsNil() {
				continue // NULL: pgx sends it without a plan
			}
			oid := sd.ParamOIDs[i]
			key := fmt.Sprintf("%d %T", oid, arg)
			if checked[key] {
				continue
			}
			checked[key] = true
			if msg := encodesDirectly(t, pool, oid, arg); msg != "" {
				t.Errorf("parameter $%d (%T, oid %d) of %.80q: %s", i+1, arg, oid, q.sql, msg)
			}
		}
	}
	if len(checked) < 10 {
		t.Fatalf("only %d argument types seen: the tracer missed the store's queries", len(checked))
	}
}

// encodesDirectly says what is wrong with the way a pool connection's type
// map encodes arg for a parameter of type oid ("" when nothing is).
func encodesDirectly(t *testing.T, pool *pgxpool.Pool, oid uint32, arg any) string {
	t.Helper()
	var msg string
	err := pool.AcquireFunc(context.Background(), func(c *pgxpool.Conn) error {
		m := c.Conn().TypeMap()
		format := m.FormatCodeForOID(oid)
		switch arg.(type) {
		case string, *string:
			format = pgx.TextFormatCode // as pgx's ExtendedQueryBuilder chooses
		}
		plan := m.PlanEncode(oid, format, arg)
		if plan == nil {
			msg = "no encode plan"
			return nil
		}
		if name := fmt.Sprintf("%T", plan); name == "*pgtype.encodePlanDriverValuer" {
			msg = "encoded through driver.Valuer"
			return nil
		}
		if _, err := m.Encode(oid, format, arg, nil); err != nil {
			msg = fmt.Sprintf("encode in format %d: %v", format, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

// uuid.UUID and *uuid.UUID arguments encode without an allocation, and
// read back as they were: values, a pointer, a nil pointer (NULL), and an
// array.
func TestUUIDArgumentsEncodeInPlace(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	u, v := uuid.New(), uuid.New()
	var gotU, gotV uuid.UUID
	var gotNil *uuid.UUID
	var gotArr []uuid.UUID
	if err := pool.QueryRow(ctx, `SELECT $1::uuid, $2::uuid, $3::uuid, $4::uuid[]`, u, &v, (*uuid.UUID)(nil), []uuid.UUID{v, u}).
		Scan(&gotU, &gotV, &gotNil, &gotArr); err != nil {
		t.Fatal(err)
	}
	if gotU != u || gotV != v || gotNil != nil || len(gotArr) != 2 || gotArr[0] != v || gotArr[1] != u {
		t.Fatalf("read back %v %v %v %v; sent %v %v nil [%v %v]", gotU, gotV, gotNil, gotArr, u, v, v, u)
	}
	err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		m := c.Conn().TypeMap()
		buf := make([]byte, 0, 64)
		for _, arg := range []any{u, &v} {
			n := testing.AllocsPerRun(100, func() {
				if _, err := m.Encode(pgtype.UUIDOID, pgtype.BinaryFormatCode, arg, buf[:0]); err != nil {
					t.Fatal(err)
				}
			})
			if n != 0 {
				t.Errorf("%T: %v allocations per encode", arg, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// time.Time and *time.Time arguments for timestamptz encode without an
// allocation, to the bytes pgx's own plan writes (microseconds since 2000,
// truncated), and read back as they were.
func TestTimeArgumentsEncodeInPlace(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	zone := time.FixedZone("x", 5*3600+1800)
	times := []time.Time{
		time.Date(2026, 11, 26, 14, 5, 9, 123456789, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999999999, zone),
		time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 500, time.UTC),
		time.Unix(0, 0),
	}
	def := pgtype.NewMap() // pgx's own plans
	err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		m := c.Conn().TypeMap()
		for _, tm := range times {
			want, err := def.Encode(pgtype.TimestamptzOID, pgtype.BinaryFormatCode, tm, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, arg := range []any{tm, &tm} {
				got, err := m.Encode(pgtype.TimestamptzOID, pgtype.BinaryFormatCode, arg, nil)
				if err != nil || string(got) != string(want) {
					t.Errorf("%T %v: % x (%v), pgx writes % x", arg, tm, got, err, want)
				}
			}
			var back time.Time
			var null *time.Time
			if err := c.QueryRow(ctx, "SELECT $1::timestamptz, $2::timestamptz", tm, (*time.Time)(nil)).Scan(&back, &null); err != nil {
				t.Fatal(err)
			}
			if !back.Equal(tm.Truncate(time.Microsecond)) || null != nil {
				t.Errorf("%v read back as %v, NULL as %v", tm, back, null)
			}
		}
		buf := make([]byte, 0, 64)
		tm := times[0]
		for _, arg := range []any{tm, &tm} {
			if n := testing.AllocsPerRun(100, func() {
				if _, err := m.Encode(pgtype.TimestamptzOID, pgtype.BinaryFormatCode, arg, buf[:0]); err != nil {
					t.Fatal(err)
				}
			}); n != 0 {
				t.Errorf("%T: %v allocations per encode", arg, n)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// json and jsonb values scan into a json.RawMessage as PostgreSQL sent
// them, in binary and in text, with one allocation (the copy), and read the
// same as with pgx's own plan (json.Unmarshal); NULL is nil.
func TestRawJSONScansAsSent(t *testing.T) {
	pool := pgtest.NewPool(t)
	ctx := context.Background()
	docs := []string{`{"b": 1, "a": [true, null, "x\"y\\u00e9"]}`, `[]`, `"text"`, `null`, `12.5`, `{"long": "` + strings.Repeat(`é<&>\n`, 300) + `"}`, " \n{\"spaced\": 1}\t "}
	def := pgtype.NewMap() // pgx's own plans
	err := pool.AcquireFunc(ctx, func(c *pgxpool.Conn) error {
		m := c.Conn().TypeMap()
		for _, typ := range []string{"jsonb", "json"} {
			for _, format := range []int16{pgx.BinaryFormatCode, pgx.TextFormatCode} {
				for _, doc := range append(docs, "") {
					var got, want json.RawMessage
					arg := any(doc)
					if doc == "" {
						arg = nil // SQL NULL
					}
					var raw []byte
					if err := c.QueryRow(ctx, "SELECT $1::"+typ, pgx.QueryResultFormats{format}, arg).Scan(&got); err != nil {
						t.Fatalf("%s %d %q: %v", typ, format, doc, err)
					}
					rows, err := c.Query(ctx, "SELECT $1::"+typ, pgx.QueryResultFormats{format}, arg)
					if err != nil {
						t.Fatal(err)
					}
					for rows.Next() {
						raw = append([]byte(nil), rows.RawValues()[0]...)
					}
					rows.Close()
					oid := uint32(pgtype.JSONBOID)
					if typ == "json" {
						oid = pgtype.JSONOID
					}
					if raw != nil || doc != "" {
						if err := def.Scan(oid, format, raw, &want); err != nil {
							t.Fatal(err)
						}
					}
					if !bytes.Equal(got, want) || (doc == "") != (got == nil) {
						t.Errorf("%s format %d %q: scanned %q, pgx's plan %q", typ, format, doc, got, want)
					}
					if raw != nil {
						if n := testing.AllocsPerRun(50, func() {
							if err := m.Scan(oid, format, raw, &got); err != nil {
								t.Fatal(err)
							}
						}); n != 1 {
							t.Errorf("%s format %d %q: %v allocations per scan", typ, format, doc, n)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
