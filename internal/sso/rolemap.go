package sso

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gatehousehq/gatehouse/internal/auth"
)

// Mapping gives members of an IdP group a Gatehouse role.
type Mapping struct {
	Group string
	Role  auth.Role
}

// RoleMap is GATEHOUSE_OIDC_ROLE_MAP: which IdP group gives which role.
// A person in several mapped groups gets the highest of their roles.
type RoleMap []Mapping

// ParseRoleMap reads "idp-admins=admin,payments-leads=approver,staff=viewer".
// A group is matched exactly (case and all); a group may be listed once.
func ParseRoleMap(s string) (RoleMap, error) {
	var out RoleMap
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		i := strings.LastIndex(part, "=")
		if i < 0 {
			return nil, fmt.Errorf("%q: want group=role", part)
		}
		group, roleName := strings.TrimSpace(part[:i]), strings.TrimSpace(part[i+1:])
		if err := auth.CheckIdPGroup(group); err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		role, err := auth.ParseRole(roleName)
		if err != nil {
			return nil, fmt.Errorf("%q: %w", part, err)
		}
		if slices.ContainsFunc(out, func(m Mapping) bool { return m.Group == group }) {
			return nil, fmt.Errorf("group %q is mapped twice", group)
		}
		out = append(out, Mapping{Group: group, Role: role})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no group=role pairs (want e.g. idp-admins=admin,payments-leads=approver,staff=viewer)")
	}
	return out, nil
}

// Role is the highest role groups map to; false when none is mapped.
func (m RoleMap) Role(groups []string) (auth.Role, bool) {
	var best auth.Role
	for _, mp := range m {
		if slices.Contains(groups, mp.Group) && (best == "" || !best.Allows(mp.Role)) {
			best = mp.Role
		}
	}
	return best, best != ""
}

// String is the map as it is set: "idp-admins=admin,staff=viewer".
func (m RoleMap) String() string {
	parts := make([]string, len(m))
	for i, mp := range m {
		parts[i] = mp.Group + "=" + string(mp.Role)
	}
	return strings.Join(parts, ",")
}
