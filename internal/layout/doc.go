// Package layout holds no code: its tests keep the repository's shape as
// the README's layout table draws it. The folders are floors, each
// importing only from the floors below it (TestFoldersImportOnlyDownward),
// and a package doc that names its files names them as they are
// (TestPackageDocsNameTheirFiles). The per-table rule that each table has
// one owning package is store's (TestEachTableHasOneOwner), next to the
// schema it reads.
package layout
