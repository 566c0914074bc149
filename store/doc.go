// Package store is expiryctl's PostgreSQL adapter: it opens the pgx pool with
// errors that name the server and never its password, applies the embedded
// migrations, and refuses to work on a schema that is missing or out of date.
//
// All of expiryctl's tables live in the schema "expiryctl". Domain packages
// receive a *pgxpool.Pool (or a pgx.Tx) from here and own their SQL.
//
// # The schema and its migrations
//
// schema.sql, beside this file, is the schema as it stands: the tables,
// columns, constraints and indexes, the functions with their SECURITY
// DEFINER and search_path, the triggers, and the privileges of the NOLOGIN
// groups, which are the governance rules. It is what `expiryctl migrate`
// leaves an empty database; read it for the current shape, and
// migrations/ for how it came to be.
//
// The migrations keep four rules, each held by a test of this package:
//
//   - A released migration is never edited, renamed or removed; a change is
//     a new migration numbered after the newest. goose never runs a version
//     twice, so an edit would reach new databases only. migrations.sum pins
//     the sha256 of every released file (TestMigrationChecksums).
//   - Every version goes up, down and up again to the same schema, and all of
//     them down to nothing and up again (TestEveryMigrationGoesUpDownAndUp).
//   - schema.sql is what a fresh migrate gives (TestSchemaIsCurrent): after
//     writing a migration, `make schema` regenerates it and pins the new
//     file in migrations.sum.
//   - PUBLIC executes no function of the schema, and every SECURITY DEFINER
//     function pins search_path (TestNoFunctionIsPublic).
package store
