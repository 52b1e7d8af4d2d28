package herald

import (
	"embed"
	"io/fs"
)

//go:embed sql/migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the embedded SQL migrations (goose format). internal/migrate applies
// them.
func Migrations() fs.FS {
	sub, err := fs.Sub(migrationFiles, "sql/migrations")
	if err != nil {
		panic(err) // the embed pattern above guarantees the folder
	}
	return sub
}
