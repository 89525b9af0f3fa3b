// Package chdb connects to ClickHouse and keeps hpcq's schema there: the
// embedded migrations (migrations/*.sql, applied in order, each once) create
// the memory tables of pkg/memory/cluster and the results tables of
// pkg/results. Every statement works on ClickHouse 18.16 (Debian's) and on
// current releases: no Map, DateTime64, TTL or skip indexes, and inserts go
// through PrepareBatch with a column list.
package chdb
