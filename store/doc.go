// Package store is expiryctl's PostgreSQL adapter: it opens the pgx pool with
// errors that name the server and never its password, applies the embedded
// migrations and definition files, and refuses to work on a schema that is
// missing or out of date.
//
// All of expiryctl's tables live in the schema "expiryctl". Domain packages
// receive a *pgxpool.Pool (or a pgx.Tx) from here and own their SQL.
//
// # Where the schema is written
//
//   - functions/NAME.sql defines the function NAME (a trigger's function
//     too): the whole CREATE OR REPLACE FUNCTION, then who may execute it
//     (REVOKE ALL ... FROM PUBLIC, GRANT EXECUTE ... TO the groups). It is
//     the one place the function is written: to read why a call is
//     refused, open the file; to change the function, edit it, and the
//     review shows the change. A function whose overloads must coexist
//     (ingest_letters) has all of them in its file. Views, when the schema
//     has one, go in views/NAME.sql the same way.
//   - migrations/NNNNN_name.sql, the numbered migrations (goose), hold the
//     tables, columns, constraints, indexes, triggers, grants on tables and
//     data moves. From 00022 on they define no function or view
//     (TestNumberedMigrationsDefineNoFunction); 00001-00020 still hold the
//     forms the functions had until then, as history.
//   - schema.sql is the result, as `expiryctl migrate` leaves an empty
//     database: read it for the whole shape at once.
//
// # How migrate applies them
//
// Migrate runs the numbered migrations the database lacks, then
// ApplyDefinitions, which compares each definition file's sha256 with the
// one schema_definitions records for it. When all match it writes nothing
// (a migrate on an up-to-date database changes nothing and says so).
// Otherwise, in one transaction under a lock that serialises migrates:
//
//  1. Every file is applied, in name order, with the bodies' checks
//     deferred so that one function may call another defined after it;
//     CREATE OR REPLACE keeps each function's identity, so callers in
//     other sessions and the triggers that call it are never left without
//     it. What an earlier form granted is revoked first, so the file's
//     GRANT is the whole of who may execute it.
//  2. A file whose function changes its result type, its parameters' names
//     or their defaults (which CREATE OR REPLACE refuses) drops that
//     function and runs again; its grants come back from the file.
//  3. A function no file defines any more is dropped: a removed file, or
//     the old overload of a function whose parameters' types changed. If
//     a table still needs it (a trigger, a column's default), the drop is
//     refused, everything rolls back, and the error names the dependent
//     object. Numbered migrations run before the files, so moving a
//     trigger or a default to another function takes two releases: the
//     first adds the new function's file, the second's migration moves the
//     trigger or default and its files no longer define the old function.
//     A change of body, the common case, never needs this: a trigger keeps
//     calling the function CREATE OR REPLACE rewrote.
//  4. Views are dropped and made anew after the functions, each after a
//     view it reads.
//  5. Every function body is validated, and the files' sums are recorded.
//
// A file may only write the object it is named after; one that defines or
// grants on another's is refused. A numbered migration runs before the
// definitions, so it sees the functions of the release before: one that
// needs a helper of its own uses a DO block.
//
// # Deployments
//
// The files and the numbered migrations name the unnamed deployment's
// groups (expiryctl_operator, …). A named deployment's groups carry its name
// (expiryctl_NAME_operator), because roles are the cluster's and two
// deployments must not share people; Migrate renders every file with the
// deployment's names as it reads it (Deployment.render), so that GRANTs
// and the functions' membership checks name the deployment's own groups,
// and records the rendered files' sums. Which deployment a schema serves is
// read from the catalog (ReadDeployment: whose operator group may use the
// schema), so it needs no table and a half-migrated schema already says it.
// MoveDeployment moves a schema of the unnamed deployment to a name.
//
// # Queue systems
//
// The schema names no queue system. What differs between them — how each
// names its queues, whether a replay retries a job in place, whether a
// queue's name carries its connection, which connection a letter captured
// without one came through, and why it shows nobody consuming its queues
// when it does not (consumers_unseen, for which replay_request_create
// refuses a replay that does not vouch for the handler: rule
// handler-unseen) — is a row of queue_systems, which MigrateDeployment
// fills from the QueueSystem each of its caller's drivers describes
// (queue_systems_register): it adds and changes rows, never
// deletes one, and refuses a row that would make a queue's name say two
// systems or change what archived letters mean. The functions join the
// table (retries_in_place, queue_prefix) where they once listed systems,
// and dead_letters_track_state holds every letter inserted to its system's
// naming, raising under the names of the CHECK constraints it replaced
// (dead_letters_system_names_queue, dead_letters_connection_named). A new
// system is a driver and its registration: no file here changes.
//
// CheckSchema, which every command runs first, compares both the numbered
// version and the definitions' digest with this binary's, so a command never
// runs against functions of another release.
//
// # Going back
//
// Downgrading a database is done with the newer release: `expiryctl migrate
// --down-to N` runs the numbered migrations' Down sections down to N. The
// functions stay as the newer files made them until the older release's
// `expiryctl migrate` puts its own files in place (it sees their sums
// differ); until then both releases' commands refuse the database. Below
// 00021, which introduced the files, there is no such older migrate: 00021
// keeps the functions as 00020 left them (schema_definitions_before), and its
// Down puts them back, with their grants.
//
// # Rules the tests hold
//
//   - A pushed migration is never edited, renamed or removed: every one is
//     byte for byte what the commit that first added it holds, pinned in
//     that same commit's migrations.sum (TestMigrationsAreAsFirstCommitted,
//     which reads the history with git; TestMigrationChecksums pins a new
//     one). goose never runs a version twice, so an edit would reach new
//     databases only. The definition files are exempt by design: they are
//     the single source, and a change edits them.
//   - Every version goes up, down and up again to the same schema, and all
//     of them down to nothing and up again (TestEveryMigrationGoesUpDownAndUp);
//     going down below the definitions gives the released schema back
//     (TestMigrationBelowTheDefinitionsPutsBackTheReleasedFunctions).
//   - schema.sql is what a fresh migrate gives (TestSchemaIsCurrent): after
//     writing a migration or changing a function's file, `make schema`
//     regenerates it and pins a new migration in migrations.sum.
//   - PUBLIC executes no function of the schema, and every SECURITY DEFINER
//     function pins search_path (TestNoFunctionIsPublic).
package store
