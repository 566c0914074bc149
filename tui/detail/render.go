package detail

import (
	"fmt"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/letterview"
	"github.com/expiryctl/expiryctl/tui/frame"
)

// PayloadLimit is the payload bytes shown; `dlq show --payload-limit 0` or
// --save-payload give the rest.
const PayloadLimit = 16 << 10

// Render returns the detail view of d, the way `dlq show` shows a letter
// (see letterview), in the TUI's theme, wrapped to width.
func Render(ctx frame.Context, d deadletter.Detail, width int) string {
	th := ctx.Theme
	return letterview.Render(d, letterview.Styles{Title: th.Title.Render, Section: th.Header.Render, Warn: th.Warn.Render},
		letterview.Options{Now: ctx.Now(), PayloadLimit: PayloadLimit, Width: width, Systems: ctx.Systems, TruncatedHint: func(shown, size int) string {
			return fmt.Sprintf("  … showing %d of %d bytes: `expiryctl dlq show ID --save-payload FILE` saves the exact bytes", shown, size)
		}})
}
