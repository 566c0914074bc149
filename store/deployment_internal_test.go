package store

import "testing"

func TestGroupNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		of     Deployment
		role   string
		parsed bool
	}{
		{"expiryctl_operator", "", "operator", true},
		{"expiryctl_billing_admin", "billing", "admin", true},
		{"expiryctl_ingester_operator", "ingester", "operator", true},
		{"expiryctl_operators", "", "", false},
		{"expiryctl_Billing_admin", "", "", false},
		{"operator", "", "", false},
		{"pg_write_all_data", "", "", false},
	} {
		of, role, ok := ParseGroup(tt.name)
		if of != tt.of || role != tt.role || ok != tt.parsed {
			t.Errorf("ParseGroup(%q) = %q, %q, %v; want %q, %q, %v", tt.name, of, role, ok, tt.of, tt.role, tt.parsed)
		}
	}
	billing := Deployment("billing")
	for _, tt := range []struct {
		name, want string
		ok         bool
	}{
		{"operator", "expiryctl_billing_operator", true},
		{"expiryctl_operator", "expiryctl_billing_operator", true},
		{"expiryctl_billing_operator", "expiryctl_billing_operator", true},
		{"expiryctl_payroll_operator", "", false},
		{"root", "", false},
	} {
		if got, ok := billing.Group(tt.name); got != tt.want || ok != tt.ok {
			t.Errorf("billing.Group(%q) = %q, %v; want %q, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
	if got := deploymentOf([]string{"expiryctl_owner", "expiryctl_operator", "expiryctl_billing_operator", "expiryctl_billing_admin"}); got != billing {
		t.Errorf("deploymentOf a schema part way moved = %q, want billing", got)
	}
}
