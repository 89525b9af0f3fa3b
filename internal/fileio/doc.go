// Package fileio reads and writes the small files a run keeps per node
// (its task, plan, outcome and prompt logs) with fewer system calls than
// package os, and is the one home of writing a file whole or not at all
// ([WriteFileAtomic]).
//
// On Linux, os.OpenFile tries to register every file with the network
// poller: it sets the descriptor non-blocking, asks epoll to watch it
// (which refuses a regular file), and sets it blocking again: four system
// calls besides the open, and os.Rename first looks whether the target
// is a directory. A scheduler writes seven files for each node and reads
// some back, and on machines where a system call is dear (a virtual
// machine, a cluster node with auditing on) opening files was 9% of its
// CPU per node. The files here are opened with one system call. A file
// written or read whole is used through its bare descriptor: os.NewFile
// would ask the kernel for its flags and register a cleanup. A file kept
// open (OpenAppend) is wrapped by os.NewFile, which leaves it blocking and
// out of the poller, as a regular file is anyway. Errors are those of package os
// (*fs.PathError, *os.LinkError), so errors.Is(err, fs.ErrNotExist) holds
// as it does there.
package fileio
