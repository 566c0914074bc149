// Command expiryctl is the operator tool for dead-lettered reservation-expiry
// jobs. See the README and docs/ for what it does.
package main

import (
	"os"

	"github.com/expiryctl/expiryctl/commands"
)

func main() { os.Exit(commands.Main()) }
