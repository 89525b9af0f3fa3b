// Package runview reads a run directory as the people watching it see it,
// while the run goes and after it ended: its nodes and where each stands
// (`scheduler ls`, the dashboard's tree) and everything about one node (the
// dashboard's node panel). It reads only files the run writes atomically
// and never opens anything for writing.
package runview
