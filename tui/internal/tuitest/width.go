package tuitest

import "github.com/charmbracelet/x/ansi"

func frameWidth(s string) int { return ansi.StringWidth(s) }
