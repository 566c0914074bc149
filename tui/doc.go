// Package tui is expiryctl's terminal UI (`expiryctl tui`): a view over the
// same services the commands call — the dead-letter archive, replay
// requests with their governance, the replay runner and the audit trail —
// under the same rules. It opens no connection and holds no SQL or AMQP of
// its own: New takes the services (see package backend), and every call
// on them is a tea.Cmd whose typed message comes back through Update.
//
// The root Model owns the layout (tabs, banner, body, help line), the
// refresh tick and navigation; each screen is its own package and owns its
// state: summary (letters per reason, open requests, reloaded on every
// tick), list (the letters, paged by keyset a few pages at a time, with
// filters and marks), detail (one letter as `dlq show` shows it), requests
// (review: approve, reject, cancel, run), run (progress of a run) and audit
// (the trail and its chain verification). Forms for governed actions come
// from package action, drawn by package form.
//
// Everything a letter carries is escaped with termsafe before it reaches
// the screen. A service error shows as a banner and the next tick retries;
// a governance refusal shows in the rule's own words. NO_COLOR is honoured
// through the renderer passed with WithRenderer: nothing relies on colour
// alone (the cursor is ">", marks "*", the active tab in brackets).
package tui
