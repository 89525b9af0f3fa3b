// Package journal is an append-only file of framed records: the
// write-ahead log in front of a store that commits in batches (the SQLite
// memory store) and the spool that holds writes while a server is away
// (the cluster memory store).
//
// A record is framed as a 4-byte little-endian payload length, a 4-byte
// CRC-32C of the payload, then the payload. Append writes a frame with one
// write(2), so once it returns the record survives a crash of the process
// (it is in the kernel's page cache); with Sync it is fsync'd as well and
// survives a crash of the machine. A crash in the middle of an Append
// leaves a torn frame at the end, which Open cuts off: that record was
// never acknowledged.
package journal
