// Package store is expiryctl's PostgreSQL adapter: it opens the pgx pool with
// errors that name the server and never its password, applies the embedded
// migrations, and refuses to work on a schema that is missing or out of date.
//
// All of expiryctl's tables live in the schema "expiryctl". Domain packages
// receive a *pgxpool.Pool (or a pgx.Tx) from here and own their SQL.
package store
