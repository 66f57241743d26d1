// Package version holds virtop's own version, set at link time.
package version

// Version is virtop's version; the Makefile sets it with -ldflags.
var Version = "v0.1.0-dev"

// Commit is the source revision, set at link time when known.
var Commit = ""
