// Package servicetest holds the contract of each service interface in
// internal/service: one suite of cases per interface, each a rule a caller
// can observe (keyset paging, four-eyes, a single review, who may change
// membership, which error a missing object is). The same cases run against
// the in-memory fakes of internal/fixture/fakes (in that package's
// contract tests) and against the PostgreSQL implementations (in this
// package's), so a fake that keeps a rule differently from the real
// service fails its contract instead of letting a command's test pass on
// a rule that is not true. Each suite's fake world is the file
// contract_NOUN_test.go of internal/fixture/fakes, and its PostgreSQL
// world this package's postgres_NOUN_test.go (access's are the two files
// without a noun).
//
// A suite takes a world: a function that builds, for one case, the service
// under test and the few seeding hooks the cases need (letters to archive,
// people to act as, logins to grant). A world hides how the implementation
// is seeded; a case sees only the interface.
//
// The suites, one file each:
//
//   - access.go: service.Access (owner-only changes, refusals by rule,
//     membership as PostgreSQL lists it).
//   - archive.go: service.Archive and service.OldestLister.
//   - requests.go: service.Requests (four-eyes, single review, the cohort
//     hash shown, reasons required, cancel).
//   - runner.go: service.Runner (what is refused before a run starts, and
//     what a dry run of an open request lists).
//   - audit_reviewer.go: service.AuditReviewer with the service.Recorder
//     that writes the rows it reads (paging the trail newest first, exact
//     filters, the recorder's actor and reserved actions, a read that
//     leaves its own row, an intact trail and an anchor that verify).
//
// What a contract cannot hold is behaviour a fake does not claim: a fake
// Runner does not publish, so how a run publishes is tested against
// RabbitMQ in replay and e2e.
package servicetest
