package commands

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/expiryctl/expiryctl/config"
)

// flagError is the tree's flag error function: a flag error exits 2, and a
// mistyped flag name says which flags it may have meant, as a mistyped
// command does.
func flagError(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return &FlagError{Err: err}
	}
	if suggestions := suggestFlags(cmd, name); len(suggestions) > 0 {
		err = fmt.Errorf("%w\n\nDid you mean this?\n\t--%s", err, strings.Join(suggestions, "\n\t--"))
	}
	return &FlagError{Err: err}
}

// suggestFlags are the flags of cmd (its own and those it inherits) within
// two edits of name, or that name starts, nearest first.
func suggestFlags(cmd *cobra.Command, name string) []string {
	type candidate struct {
		name     string
		distance int
	}
	var found []candidate
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := config.EditDistance(name, f.Name)
		if d <= 2 || strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			found = append(found, candidate{f.Name, d})
		}
	}
	cmd.Flags().VisitAll(visit)
	cmd.InheritedFlags().VisitAll(visit)
	slices.SortFunc(found, func(a, b candidate) int {
		if a.distance != b.distance {
			return a.distance - b.distance
		}
		return strings.Compare(a.name, b.name)
	})
	var names []string
	for _, c := range found {
		if !slices.Contains(names, c.name) {
			names = append(names, c.name)
		}
	}
	return names
}
