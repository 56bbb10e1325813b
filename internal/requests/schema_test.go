package requests

import (
	"errors"
	"net/url"
	"testing"
)

const everyForm = `{"type":"object","required":["env","count","reason"],"properties":{
 "env":{"type":"string","enum":["staging","prod"],"title":"Environment"},
 "reason":{"type":"string","format":"textarea","minLength":5},
 "ticket":{"type":"string","pattern":"^[A-Z]+-[0-9]+$"},
 "count":{"type":"integer","minimum":1,"maximum":10},
 "ratio":{"type":"number","maximum":1},
 "notify":{"type":"boolean","default":true},
 "regions":{"type":"array","items":{"type":"string","enum":["eu","us","ap"]},"minItems":1}}}`

// TestCollect: a form's controls become typed JSON; what cannot be typed
// is named, and the schema (the Decider's check) refuses it.
func TestCollect(t *testing.T) {
	t.Parallel()
	f, err := ParseForm([]byte(everyForm))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name     string
		vals     url.Values
		want     string
		problems map[string]string
	}{
		{"Typed", url.Values{"answer.env": {"prod"}, "answer.reason": {"because"}, "answer.count": {"3"}, "answer.ratio": {"0.5"},
			"answer.notify": {"true"}, "answer.regions": {"eu", "ap"}, "answer.ticket": {""}},
			`{"count":3,"env":"prod","notify":true,"ratio":0.5,"reason":"because","regions":["eu","ap"]}`, nil},
		{"EmptyLeftOut", url.Values{}, `{"notify":false}`, nil},
		{"NotANumber", url.Values{"answer.count": {"three"}, "answer.ratio": {"NaN"}},
			`{"count":"three","notify":false,"ratio":"NaN"}`, map[string]string{"count": "must be a whole number", "ratio": "must be a number"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, problems := f.Collect(tc.vals)
			if string(got) != tc.want {
				t.Errorf("value = %s, want %s", got, tc.want)
			}
			if len(problems) != len(tc.problems) {
				t.Errorf("problems = %v, want %v", problems, tc.problems)
			}
			for k, v := range tc.problems {
				if problems[k] != v {
					t.Errorf("problems[%s] = %q, want %q", k, problems[k], v)
				}
			}
		})
	}
}

// TestValidateNamesEveryField: a wrong answer names each failing field.
func TestValidateNamesEveryField(t *testing.T) {
	t.Parallel()
	f, err := ParseForm([]byte(everyForm))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := f.Collect(url.Values{"answer.env": {"dev"}, "answer.reason": {"no"}, "answer.count": {"11"}, "answer.ticket": {"x"},
		"answer.regions": {"mars"}})
	_, err = f.Validate(v)
	var ae *AnswerError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v, want *AnswerError", err)
	}
	for _, field := range []string{"value.env", "value.reason", "value.count", "value.ticket", "value.regions.0"} {
		if ae.Fields[field] == "" {
			t.Errorf("no problem for %s in %v", field, ae.Fields)
		}
		if name := f.FieldOf(field); name == "" {
			t.Errorf("FieldOf(%s) = \"\"", field)
		}
	}
	if ae.Fields[ae.Field] != ae.Problem {
		t.Errorf("first field %s: %q not in Fields %v", ae.Field, ae.Problem, ae.Fields)
	}
	// A required field left empty.
	v, _ = f.Collect(url.Values{})
	_, err = f.Validate(v)
	if !errors.As(err, &ae) || ae.Fields["value.env"] != "is required" || ae.Fields["value.count"] != "is required" {
		t.Errorf("empty form: %v (%v)", err, ae)
	}
}

// TestSingle: a non-object schema is one control named value.
func TestSingle(t *testing.T) {
	t.Parallel()
	f, err := ParseForm([]byte(`{"type":"integer","minimum":0}`))
	if err != nil {
		t.Fatal(err)
	}
	v, _ := f.Collect(url.Values{"answer.value": {"7"}})
	if got, err := f.Validate(v); err != nil || string(got) != "7" {
		t.Errorf("7: %s, %v", got, err)
	}
	v, _ = f.Collect(url.Values{"answer.value": {"-1"}})
	var ae *AnswerError
	if _, err := f.Validate(v); !errors.As(err, &ae) || ae.Field != "value" || f.FieldOf(ae.Field) != "value" {
		t.Errorf("-1: %v", err)
	}
	v, _ = f.Collect(url.Values{})
	if _, err := f.Validate(v); !errors.As(err, &ae) || ae.Field != "value" {
		t.Errorf("empty: %v", err)
	}
}

// TestEnumWithoutType: {"enum": [...]} of strings is a choice (JSON
// Schema needs no type beside an enum; docs/mcp.md's example has none);
// an enum of other things still needs its type.
func TestEnumWithoutType(t *testing.T) {
	t.Parallel()
	f, err := ParseForm([]byte(`{"type":"object","properties":{"region":{"enum":["eu-west-1","us-east-1"]}},"required":["region"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Fields[0]; got.Type != TypeString || got.Widget != WidgetSelect || len(got.Enum) != 2 {
		t.Errorf("field = %+v, want a string select of 2", got)
	}
	v, _ := f.Collect(url.Values{"answer.region": {"eu-west-1"}})
	if got, err := f.Validate(v); err != nil || string(got) != `{"region":"eu-west-1"}` {
		t.Errorf("eu-west-1: %s, %v", got, err)
	}
	v, _ = f.Collect(url.Values{"answer.region": {"mars"}})
	var ae *AnswerError
	if _, err := f.Validate(v); !errors.As(err, &ae) || ae.Field != "value.region" {
		t.Errorf("mars: %v", err)
	}
	var fe *FieldError
	if _, err := ParseForm([]byte(`{"type":"object","properties":{"n":{"enum":[1,2]}}}`)); !errors.As(err, &fe) ||
		fe.Field != "response_schema.properties.n.type" {
		t.Errorf("enum of numbers without a type: %v", err)
	}
}
