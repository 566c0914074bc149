package audit

import (
	"context"
	"testing"
)

func TestInvocationJoinsTheDetails(t *testing.T) {
	t.Parallel()
	ctx := WithInvocation(context.Background(), map[string]any{"watch": map[string]any{"interval": "5s"}, "filter": "ignored"})
	got, err := withInvocation(ctx, []byte(`{"filter":"category=validation"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"filter":"category=validation","watch":{"interval":"5s"}}`; string(got) != want {
		t.Errorf("details %s, want %s (the service's own key kept)", got, want)
	}
	if got, err := withInvocation(context.Background(), []byte(`[1]`)); err != nil || string(got) != `[1]` {
		t.Errorf("without an invocation: %s, %v; want the details untouched", got, err)
	}
	if _, err := withInvocation(ctx, []byte(`[1]`)); err == nil {
		t.Error("an invocation joined details that are not an object")
	}
	if got, _ := withInvocation(ctx, []byte(`null`)); string(got) != `{"filter":"ignored","watch":{"interval":"5s"}}` {
		t.Errorf("null details: %s", got)
	}
}
