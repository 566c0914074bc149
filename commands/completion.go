package commands

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/charmbracelet/x/ansi"
	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/view/phrase"
	"github.com/expiryctl/expiryctl/internal/view/termsafe"
	"github.com/expiryctl/expiryctl/replay"
)

// completionTimeout bounds a completion's database read: a shell waiting
// on a tab must not hang on a server that does not answer.
const completionTimeout = 2 * time.Second

// completionLimit is how many ids a completion offers.
const completionLimit = 25

// completeIDs makes the commands that take a letter or a request id
// complete it from the archive instead of with file names: the newest
// waiting letters, and the requests in the statuses the command acts on.
// The reads are the unaudited ones the watches redraw with (ids,
// categories and statuses, never a payload): a tab is not an action.
func completeIDs(root *cobra.Command, f *Factory) {
	open := []replay.Status{replay.StatusPending, replay.StatusApproved, replay.StatusRunning, replay.StatusHalted}
	requests := map[string][]replay.Status{
		"show":    open,
		"approve": {replay.StatusPending, replay.StatusHalted},
		"reject":  {replay.StatusPending, replay.StatusHalted},
		"run":     {replay.StatusApproved, replay.StatusRunning},
		"cancel":  open,
		"plan":    open,
	}
	for _, group := range root.Commands() {
		for _, cmd := range group.Commands() {
			switch group.Name() {
			case "dlq":
				if cmd.Name() == "show" {
					cmd.ValidArgsFunction = completeLetters(f)
				}
			case "replay":
				if statuses, ok := requests[cmd.Name()]; ok {
					cmd.ValidArgsFunction = completeRequests(f, statuses)
				}
			}
		}
	}
}

func completeLetters(f *Factory) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		archive, err := f.UnauditedArchive(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		page, err := archive.List(ctx, deadletter.Filter{Status: deadletter.StatusDead}, nil, completionLimit)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		now := f.Now()
		out := make([]string, 0, len(page.Rows))
		for _, r := range page.Rows {
			about := string(r.Category)
			if r.ErrorClass != "" {
				about += " " + termsafe.EscapeLine(ansi.Truncate(r.ErrorClass, 40, "…"))
			}
			out = append(out, fmt.Sprintf("%d\t%s, %s ago", r.ID, about, phrase.Approximate(now.Sub(r.DeadLetteredAt))))
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}

func completeRequests(f *Factory, statuses []replay.Status) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx, cancel := context.WithTimeout(cmd.Context(), completionTimeout)
		defer cancel()
		reads, err := f.UnauditedRequests(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, status := range statuses {
			list, err := reads.List(ctx, status, completionLimit)
			if err != nil {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			for _, r := range list {
				out = append(out, strconv.FormatInt(r.ID, 10)+"\t"+fmt.Sprintf("%s %s of %s, by %s: %s",
					r.Status, r.Kind, phrase.Count(r.Items, "letter", "letters"), termsafe.EscapeLine(r.RequestedBy),
					termsafe.EscapeLine(ansi.Truncate(r.Why, 40, "…"))))
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
	}
}
