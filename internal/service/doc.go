// Package service names, as small interfaces, the services expiryctl's two
// interfaces call: the commands (package commands) and the terminal UI
// (package tui). Both are adapters over the same services, so both declare
// what they need here, in one place, rather than each in its own package:
// a newcomer reads this file to learn what a command or a screen can do, and
// opens commands/services.go to see what does it.
//
// Each interface takes and returns the domain's own types (deadletter,
// replay, audit, access) and acts as the person it was built for: the
// actor, and the database login behind it, are fixed when the service is
// built, so no method takes one. The production implementations are the
// domain types themselves where they fit (*deadletter.Archive,
// *replay.Service, *audit.Reviewer, *access.Service) and thin adapters over
// the domain's pool functions otherwise, all built by the commands'
// Factory in commands/services.go. Tests pass the in-memory fakes of
// internal/fixture/fakes.
//
// Nothing here opens a connection; a Factory opens one lazily, the first
// time a command asks for a service, so that --help and flag errors never
// dial a server.
package service
