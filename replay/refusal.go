package replay

import (
	"fmt"

	"github.com/expiryctl/expiryctl/store"
)

// Refusal is a governance rule saying no; see store.Refusal.
type Refusal = store.Refusal

// asRefusal turns the database's governance exception into a *Refusal and
// leaves other errors alone.
func asRefusal(err error) error { return store.AsRefusal(err) }

func refuse(rule, format string, args ...any) error {
	return &Refusal{Rule: rule, Message: fmt.Sprintf(format, args...)}
}

// DatabaseRefusal returns the *Refusal the database raised in err, or err
// unchanged when it is not a governance refusal. Tests that act as a second
// client, bypassing expiryctl's own checks, use it to name the rule.
func DatabaseRefusal(err error) error { return asRefusal(err) }
