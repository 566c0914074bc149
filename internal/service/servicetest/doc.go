// Package servicetest holds the contract of each service interface in
// internal/service: one suite of cases per interface, each a rule a caller
// can observe (keyset paging, four-eyes, a single review, who may change
// membership, which error a missing object is). The same cases run against
// the in-memory fakes of internal/fixture/fakes (in that package's
// contract_test.go and contract_*_test.go) and against the PostgreSQL
// implementations (in this package's postgres_test.go and
// postgres_*_test.go), so a fake that keeps a rule differently from
// the real service fails its contract instead of letting a command's test
// pass on a rule that is not true.
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
//   - audit_reviewer.go: service.AuditReviewer (paging the trail newest
//     first, filters, a read that leaves its own row, an intact trail that
//     verifies).
//
// What a contract cannot hold is behaviour a fake does not claim: a fake
// Runner does not publish, so how a run publishes is tested against
// RabbitMQ in replay and e2e.
package servicetest
