package agent_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/gatehousehq/gatehouse/graph"
	"github.com/gatehousehq/gatehouse/internal/workflows/agent"
)

// Found by the workflows' FuzzParseInput: encoding/json matches keys
// without case and reads null as absent; the input schemas do neither.
func TestDecodeIsStrictLikeTheSchema(t *testing.T) {
	t.Parallel()
	type in struct {
		Query string `json:"query"`
		Note  string `json:"note,omitempty"`
	}
	type opts struct {
		MaxTurns *int `json:"max_turns"`
	}
	cases := []struct {
		raw, prefix, field string
		v                  any
	}{
		{`{"Query": "q"}`, "input", "input.Query", &in{}},
		{`{"query": "q", "NOTE": "n"}`, "input", "input.NOTE", &in{}},
		{`{"query": "q", "note": null}`, "input", "input.note", &in{}},
		{`{"query": "q"}`, "input", "", &in{}},
		{`{"Max_Turns": 3}`, "options", "options.Max_Turns", &opts{}},
		// Options keep reading null as absent.
		{`{"max_turns": null}`, "options", "", &opts{}},
		// Found by analyze's FuzzParseInput: a stray closer after the
		// object was taken for the end of input, and the key check, which
		// parses the whole text, then saw no object and let "querY" by.
		{`{"querY":"0"}]`, "input", "input", &in{}},
		{`{"query":"q"}}`, "input", "input", &in{}},
		{`{"query":"q"} x`, "input", "input", &in{}},
		{`{"query":"q"} {}`, "input", "input", &in{}},
		{"{\"query\":\"q\"} \n\t ", "input", "", &in{}},
	}
	for _, c := range cases {
		err := agent.Decode(json.RawMessage(c.raw), c.v, c.prefix, "the thing", "query", "note")
		var ve *graph.ValidationError
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v", c.raw, err)
		case c.field != "" && (!errors.As(err, &ve) || ve.Field != c.field):
			t.Errorf("%s: %v, want a validation error of %s", c.raw, err, c.field)
		}
	}
}
