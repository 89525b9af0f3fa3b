// Package version holds the build's version, set at link time:
// -ldflags "-X github.com/hpcq/hpcq/internal/version.Version=v1.2.3".
package version

// Version of this build.
var Version = "dev"
