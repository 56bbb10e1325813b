package postgres

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gatehousehq/gatehouse/internal/postgres/dbsqlc"
)

// snapshotRow copies every TaskSnapshot column of a TaskClaim row: each
// field of the claim row set to a value of its own, each field of the
// snapshot row must hold it.
func TestSnapshotRowCopiesEveryColumn(t *testing.T) {
	var r dbsqlc.TaskClaimRow
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		setDistinct(t, v.Field(i), i+1)
	}
	s := snapshotRow(&r)
	sv := reflect.ValueOf(s)
	if sv.NumField() != v.NumField()-1 {
		t.Fatalf("TaskSnapshotRow has %d fields, TaskClaimRow %d", sv.NumField(), v.NumField())
	}
	for i := range sv.NumField() {
		name := sv.Type().Field(i).Name
		if !reflect.DeepEqual(sv.Field(i).Interface(), v.FieldByName(name).Interface()) {
			t.Errorf("%s: %v, claim row has %v", name, sv.Field(i).Interface(), v.FieldByName(name).Interface())
		}
	}
}

// setDistinct sets f to a non-zero value derived from n.
func setDistinct(t *testing.T, f reflect.Value, n int) {
	t.Helper()
	if f.Kind() == reflect.Pointer {
		f.Set(reflect.New(f.Type().Elem()))
		setDistinct(t, f.Elem(), n)
		return
	}
	switch x := f.Addr().Interface().(type) {
	case *uuid.UUID:
		x[0] = byte(n)
	case *time.Time:
		*x = time.Unix(int64(n), 0)
	case *[]string:
		*x = []string{string(rune('a' + n))}
	case *[]byte:
		*x = []byte{byte(n)}
	default:
		switch f.Kind() {
		case reflect.String:
			f.SetString(string(rune('a' + n)))
		case reflect.Int32, reflect.Int64:
			f.SetInt(int64(n))
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Slice: // json.RawMessage
			f.SetBytes([]byte{byte(n)})
		default:
			t.Fatalf("field %d: no distinct value for %s", n, f.Type())
		}
	}
}
