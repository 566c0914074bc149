package replay

import (
	"strings"
	"testing"
)

// TestTemplateChanges: the reservations template names its schema, quoted,
// in both queries, with the hold tolerance as the outcome window; another
// name, or a schema that is not a plain identifier, is refused saying what
// would be right.
func TestTemplateChanges(t *testing.T) {
	t.Parallel()
	changes, err := TemplateChanges("reservations:booking")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"eligibility_query", "outcome_query", "gap_query"} {
		if q, _ := changes[key].(string); !strings.Contains(q, `FROM "booking".reservations r`) {
			t.Errorf("%s does not read booking's reservations: %v", key, changes[key])
		}
	}
	if len(changes) != 4 || changes["outcome_window"] == nil {
		t.Errorf("changes %v: want the three queries and the outcome window", changes)
	}
	if def, err := TemplateChanges("reservations"); err != nil || !strings.Contains(def["outcome_query"].(string), `"reservations".processed_jobs`) {
		t.Errorf("the default schema: %v, %v", def, err)
	}
	for spec, want := range map[string]string{
		"reservation":                  `the one template is "reservations"`,
		"reservations:Booking":         "use a lower-case identifier",
		"reservations:a; DROP TABLE x": "use a lower-case identifier",
		"reservations:":                "use a lower-case identifier",
	} {
		if _, err := TemplateChanges(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("TemplateChanges(%q) = %v, want an error saying %q", spec, err, want)
		}
	}
}
