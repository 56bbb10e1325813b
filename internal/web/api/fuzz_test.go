package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/web/request"
	"github.com/gatehousehq/gatehouse/internal/web/response"
)

// FuzzDecodeDecision: a decision payload (POST /api/v1/tasks/{id}/decisions)
// is decoded without panicking into trimmed fields with a value that is
// valid JSON or none, or refused with a 400 (413 over the limit) naming
// what is wrong; what it decodes encodes and decodes again to the same.
// Run: go test -run '^$' -fuzz '^FuzzDecodeDecision$' ./internal/web/api
func FuzzDecodeDecision(f *testing.F) {
	for _, seed := range []string{
		`{"interrupt_id":"7d0e1f1e-6a1b-4d9e-9d0c-2c3f8b4b5a10","action":"approve"}`,
		`{"interrupt_id":" x ","action":"reject","feedback":"Needs <b>tests</b>\u0000"}`,
		`{"interrupt_id":"i","action":"edit","value":"name: x\n"}`,
		`{"interrupt_id":"i","action":"respond","value":{"a":[1,2,{"b":null}]}}`,
		`{"interrupt_id":"i","action":"respond","value":null}`,
		`{"interrupt_id":1}`, `{"action":["approve"]}`, `{"Interrupt_ID":"i"}`, `{"extra":true}`,
		`{} {}`, `{}x`, `[]`, `null`, ``, `{"feedback":"\ud800"}`, `{"value":1e999}`, "{\"value\":\"\xff\"}",
		`{"interrupt_id":"a","interrupt_id":"b"}`,
	} {
		f.Add([]byte(seed))
	}
	e := echo.New()
	decode := func(body []byte) (decisionRequest, error) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/tasks/x/decisions", bytes.NewReader(body))
		rec := httptest.NewRecorder()
		req.Body = http.MaxBytesReader(rec, req.Body, response.MaxBody)
		return decodeDecision(e.NewContext(req, rec))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decode(body)
		if err != nil {
			var apiErr *response.Error
			if !errors.As(err, &apiErr) || (apiErr.Status != http.StatusBadRequest && apiErr.Status != http.StatusRequestEntityTooLarge) ||
				apiErr.Message == "" {
				t.Fatalf("decode %q: %v (%T), want a 400 or 413 *response.Error", body, err, err)
			}
			if response.Of(err).Status != apiErr.Status {
				t.Fatalf("errorOf changes the status of %v", err)
			}
			return
		}
		if req.InterruptID != strings.TrimSpace(req.InterruptID) || req.Action != strings.TrimSpace(req.Action) {
			t.Fatalf("decode %q: untrimmed %+v", body, req)
		}
		if req.Value != nil && (!json.Valid(req.Value) || request.IsNull(req.Value)) {
			t.Fatalf("decode %q: value %q is not JSON, or null kept", body, req.Value)
		}
		for _, s := range []string{req.InterruptID, req.Action, req.Feedback} {
			if !utf8.ValidString(s) {
				t.Fatalf("decode %q: invalid UTF-8 in %q", body, s)
			}
		}
		again, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("encode %+v: %v", req, err)
		}
		back, err := decode(again)
		if err != nil {
			t.Fatalf("decode of the re-encoded %s: %v", again, err)
		}
		if back.InterruptID != req.InterruptID || back.Action != req.Action || back.Feedback != req.Feedback ||
			!sameJSON(back.Value, req.Value) {
			t.Fatalf("round trip: %+v → %s → %+v", req, again, back)
		}
	})
}

// sameJSON compares two values as JSON, not as bytes: encoding a value
// escapes &, < and > in its strings ("&" becomes "\u0026"), which is the
// same text to every reader (and to jsonb, where a decision's value is kept).
func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	parse := func(raw json.RawMessage) (any, error) {
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var v any
		err := d.Decode(&v)
		return v, err
	}
	va, errA := parse(a)
	vb, errB := parse(b)
	return errA == nil && errB == nil && reflect.DeepEqual(va, vb)
}
