// Package layout holds no code: its tests keep the repository's shape as
// the README's layout table draws it. The folders are floors, each
// importing only from the floors below it (TestFoldersImportOnlyDownward),
// and a package doc that names its files names them as they are
// (TestPackageDocsNameTheirFiles). The per-table rule that each table has
// one owning package is store's (TestEachTableHasOneOwner), next to the
// schema it reads. The core (replay, deadletter, commands, the TUI, the
// views and the services' seam) is to name no queue system, each system's
// differences being its driver's: until it does, a ratchet counts the
// lines of each core file that still name one, and lets no count rise
// (TestCoreNamesNoMoreSystemsThanBefore, testdata/system_words.txt).
package layout
