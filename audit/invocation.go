package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
)

type invocationKey struct{}

// WithInvocation returns ctx carrying how the command was invoked, for
// every audit row written under it: a watch and its interval, say. The
// service that writes the row knows what was read, not how it was asked
// for; a reviewer wants both. The keys go in the row's details beside the
// service's own, which win where the two share a key.
func WithInvocation(ctx context.Context, invocation map[string]any) context.Context {
	merged := maps.Clone(invocationOf(ctx))
	if merged == nil {
		merged = map[string]any{}
	}
	maps.Copy(merged, invocation)
	return context.WithValue(ctx, invocationKey{}, merged)
}

func invocationOf(ctx context.Context) map[string]any {
	m, _ := ctx.Value(invocationKey{}).(map[string]any)
	return m
}

// withInvocation adds ctx's invocation to the details object encoded in
// details.
func withInvocation(ctx context.Context, details []byte) ([]byte, error) {
	invocation := invocationOf(ctx)
	if len(invocation) == 0 {
		return details, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(details, &fields); err != nil {
		return nil, fmt.Errorf("the details are not a JSON object: %w", err)
	}
	if fields == nil {
		fields = map[string]json.RawMessage{}
	}
	for k, v := range invocation {
		if _, taken := fields[k]; taken {
			continue
		}
		raw, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		fields[k] = raw
	}
	return json.Marshal(fields)
}
