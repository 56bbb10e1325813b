package desk

import (
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/gatehousehq/gatehouse/internal/auth"
	"github.com/gatehousehq/gatehouse/internal/web/response"
	"github.com/gatehousehq/gatehouse/views"
)

// policyPage: GET /admin/policy — the effective approval policy, as
// every channel's Decider applies it.
func (d *desk) policyPage(c echo.Context) error {
	p := d.s.decider.Policy()
	page := views.PolicyPage{Source: orDash(p.Source()), YAML: p.YAML()}
	page.Page = d.pageMeta(c.Request().Context(), "Approval policy", "policy")
	for _, k := range p.Kinds() {
		row := views.PolicyKind{Kind: k.Kind, Approvals: max(k.Approvals, 1), CreatorMay: "yes",
			Deciders: p.Deciders(k.Kind, 0).Describe(), Deadline: "none", OnTimeout: k.OnTimeout, Reminders: "—", Escalate: "—"}
		if k.SeparationOfDuties {
			row.CreatorMay = "no (separation of duties)"
		}
		if k.Deadline > 0 {
			row.Deadline = auth.ShortDuration(k.Deadline)
		}
		var rs, es []string
		for _, r := range k.Reminders {
			rs = append(rs, auth.ShortDuration(r)+" before")
		}
		for i, st := range k.Escalate {
			es = append(es, "after "+auth.ShortDuration(st.After)+": + "+strings.Join(p.AddedNames(k.Kind, i+1), ", "))
		}
		if len(rs) > 0 {
			row.Reminders = strings.Join(rs, ", ")
		}
		if len(es) > 0 {
			row.Escalate = strings.Join(es, "; ")
		}
		for _, r := range k.Rules {
			row.Rules = append(row.Rules, r.Describe())
		}
		page.Kinds = append(page.Kinds, row)
	}
	groups := p.Groups()
	for _, g := range slices.Sorted(maps.Keys(groups)) {
		page.Groups = append(page.Groups, views.PolicyGroup{Name: g, Members: groups[g]})
	}
	return response.Page(c, http.StatusOK, views.PolicyView(page))
}

func orDash(s string) string {
	if s == "" {
		return "defaults"
	}
	return s
}
