// The packer of the publish check (scripts/publish-check.sh): a module of
// its own, outside the workspace and never published, so that x/mod stays
// out of every other module's dependencies.
module github.com/distlock-go/distlock/scripts/publishcheck

go 1.26.0

require golang.org/x/mod v0.41.0
