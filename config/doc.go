// Package config reads the operator's configuration file: named contexts,
// each naming the archive (expiryctl's own PostgreSQL database), the
// reservation database that outcome queries read, and every queue-system
// connection expiryctl may dial, with where each one's secret comes from.
//
// The file is the trust boundary's other half. A letter records the name
// of the connection it was captured from, never a server to dial: every
// command that connects resolves that name here, and a name this file (or
// the flags and environment that stand in for it) does not define is
// refused before anything connects.
//
// config.go holds the types and their lookups, load.go reads and checks a
// file (every error names the file and the line), secret.go resolves
// where a password comes from, write.go writes a file (config init,
// config use-context) keeping what a person wrote in it, and derive.go
// names a connection from the server of a URL typed on the command line.
// Which keys a connection of each system takes is its driver's to say: a
// Load is given the systems' Rules and names none itself.
package config
