package journal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"syscall"
)

// MaxRecord is the largest payload a record may hold.
const MaxRecord = 256 << 20

const headerSize = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrTooLarge: a payload over MaxRecord.
var ErrTooLarge = errors.New("journal: record too large")

// Journal is one open journal file. Its methods are safe for concurrent use.
type Journal struct {
	mu   sync.Mutex
	f    *os.File
	path string
	size int64
	sync bool
	buf  []byte
}

// Options configure Open.
type Options struct {
	// Sync fsyncs every Append before it returns.
	Sync bool
	// Lock holds an exclusive lock on the file (flock) while it is open:
	// Open fails with ErrLocked while another holder has it, so that one
	// process at a time replays and appends (a spool another process may
	// adopt when its owner died: the lock goes with the owner's process).
	Lock bool
}

// ErrLocked: Open with Lock found the journal locked by another holder.
var ErrLocked = errors.New("journal: locked by another process")

// Open opens (creating if needed) the journal at path, reads every intact
// record into fn in order, and cuts off a torn or corrupt tail. An error
// from fn stops Open and is returned.
func Open(path string, o Options, fn func(payload []byte) error) (*Journal, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if o.Lock {
		if err := flock(f); err != nil {
			f.Close()
			return nil, err
		}
	}
	good, err := scan(f, fn)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	if st.Size() != good {
		if err := f.Truncate(good); err != nil {
			f.Close()
			return nil, fmt.Errorf("journal: cut torn tail of %s: %w", path, err)
		}
	}
	if _, err := f.Seek(good, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal: %w", err)
	}
	return &Journal{f: f, path: path, size: good, sync: o.Sync}, nil
}

// flock takes f's exclusive lock, or fails with ErrLocked.
func flock(f *os.File) error {
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return fmt.Errorf("%w: %s", ErrLocked, f.Name())
		}
		return fmt.Errorf("journal: lock %s: %w", f.Name(), err)
	}
	return nil
}

// Lock takes the exclusive lock of the file at path (created if needed)
// and holds it until the returned file is closed or its process ends; it
// fails with ErrLocked while another holder has it. A process holds it to
// say that what it keeps beside the file is its own (a worker's spools).
func Lock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// Read feeds the intact records of the journal at path to fn without
// changing the file: a reader beside the process that appends to it (a
// record being written is not seen yet).
func Read(path string, fn func(payload []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	defer f.Close()
	if _, err := ReadFrom(f, 0, fn); err != nil {
		return fmt.Errorf("journal %s: %w", path, err)
	}
	return nil
}

// ReadFrom feeds the intact records of the open journal f from offset off
// to fn and returns the offset just past the last one, where a reader
// following the journal as it grows reads next. off is 0 or an offset
// ReadFrom returned for the same file. On an error of fn it returns the
// offset of that record.
func ReadFrom(f *os.File, off int64, fn func(payload []byte) error) (int64, error) {
	if _, err := f.Seek(off, io.SeekStart); err != nil {
		return off, err
	}
	n, err := scan(f, fn)
	return off + n, err
}

// scan feeds the intact records of f to fn and returns the offset just
// past the last one.
func scan(f *os.File, fn func([]byte) error) (int64, error) {
	r := bufio.NewReaderSize(f, 1<<20)
	var off int64
	var hdr [headerSize]byte
	var payload []byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return off, nil // end, or a torn header
		}
		n := binary.LittleEndian.Uint32(hdr[0:4])
		if n > MaxRecord {
			return off, nil // a corrupt length: nothing after it can be trusted
		}
		if cap(payload) < int(n) {
			payload = make([]byte, n)
		}
		payload = payload[:n]
		if _, err := io.ReadFull(r, payload); err != nil {
			return off, nil // torn payload
		}
		if crc32.Checksum(payload, castagnoli) != binary.LittleEndian.Uint32(hdr[4:8]) {
			return off, nil
		}
		if fn != nil {
			if err := fn(payload); err != nil {
				return off, err
			}
		}
		off += headerSize + int64(n)
	}
}

// Append writes one record; when it returns nil the record is durable (see
// the package comment).
func (j *Journal) Append(payload []byte) error {
	if len(payload) > MaxRecord {
		return fmt.Errorf("%w: %d bytes", ErrTooLarge, len(payload))
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("journal: closed")
	}
	need := headerSize + len(payload)
	if cap(j.buf) < need {
		j.buf = make([]byte, need)
	}
	b := j.buf[:need]
	binary.LittleEndian.PutUint32(b[0:4], uint32(len(payload)))
	binary.LittleEndian.PutUint32(b[4:8], crc32.Checksum(payload, castagnoli))
	copy(b[headerSize:], payload)
	if cap(j.buf) > 4<<20 {
		j.buf = nil // do not keep one huge record's buffer
	}
	if _, err := j.f.Write(b); err != nil {
		// A short write leaves a torn frame: cut it so the next record
		// starts on a frame boundary.
		_ = j.f.Truncate(j.size)
		_, _ = j.f.Seek(j.size, io.SeekStart)
		return fmt.Errorf("journal %s: append: %w", j.path, err)
	}
	if j.sync {
		if err := j.f.Sync(); err != nil {
			return fmt.Errorf("journal %s: sync: %w", j.path, err)
		}
	}
	j.size += int64(need)
	return nil
}

// Sync fsyncs the journal: every record appended before it returns
// survives a crash of the machine.
func (j *Journal) Sync() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("journal: closed")
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("journal %s: sync: %w", j.path, err)
	}
	return nil
}

// Size is the journal's length in bytes.
func (j *Journal) Size() int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.size
}

// Reset empties the journal: every record in it has been applied where it
// belongs.
func (j *Journal) Reset() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return errors.New("journal: closed")
	}
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("journal %s: reset: %w", j.path, err)
	}
	if _, err := j.f.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("journal %s: reset: %w", j.path, err)
	}
	j.size = 0
	return nil
}

// Close closes the file (and so releases its lock); the records stay for
// the next Open.
func (j *Journal) Close() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil {
		return nil
	}
	err := j.f.Close()
	j.f = nil
	return err
}
