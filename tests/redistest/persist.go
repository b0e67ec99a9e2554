package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Faults that bring a server back with older data than it acknowledged:
// the snapshot a restart found, or the part of an append-only file that had
// reached the disk when the host went down. A Kill followed by Restart loses
// nothing with Config.AOF (appendfsync always) and everything without it;
// these sit in between, which is where a counter can come back smaller than
// a value it already handed out.

const (
	aofDirName   = "appendonlydir" // Redis 7's default appenddirname
	rdbName      = "dump.rdb"      // Redis's default dbfilename
	persistLimit = 30 * time.Second
)

var snapshotSeq atomic.Int64

// Save has the server write an RDB snapshot (SAVE, synchronous) and keeps a
// copy of it in the server's directory, whose path it returns for
// RestartFromSnapshot. Later SAVEs do not touch the copy.
func (s *Server) Save() (string, error) {
	c := s.NewClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), persistLimit)
	defer cancel()
	if err := c.Save(ctx).Err(); err != nil {
		return "", fmt.Errorf("redistest: SAVE on %s: %w", s.Addr(), err)
	}
	dst := filepath.Join(s.dir, fmt.Sprintf("snapshot-%d.rdb", snapshotSeq.Add(1)))
	if err := copyFile(filepath.Join(s.dir, rdbName), dst); err != nil {
		return "", fmt.Errorf("redistest: keeping the snapshot of %s: %w", s.Addr(), err)
	}
	return dst, nil
}

// RestartFromSnapshot kills the server (SIGKILL) and starts it again from the
// RDB snapshot at path (from Save), as a server whose disk lost everything
// written after the snapshot: the append-only file is deleted and the server
// loads the snapshot with appendonly off for that start. With Config.AOF the
// append-only file is then turned back on (CONFIG SET appendonly yes), and
// RestartFromSnapshot returns only once the rewrite that seeds it has
// finished, so that a later Kill and Restart keeps what the server holds.
func (s *Server) RestartFromSnapshot(path string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	if err := s.killLocked(); err != nil {
		return err
	}
	if err := os.RemoveAll(filepath.Join(s.dir, aofDirName)); err != nil {
		return fmt.Errorf("redistest: removing the AOF of %s: %w", s.Addr(), err)
	}
	if err := copyFile(path, filepath.Join(s.dir, rdbName)); err != nil {
		return fmt.Errorf("redistest: restoring the snapshot of %s: %w", s.Addr(), err)
	}
	// With appendonly yes, Redis would ignore the RDB file and start from
	// an empty AOF.
	args := s.cfg.Args
	s.cfg.Args = append(append([]string(nil), args...), "--appendonly", "no")
	err := s.relaunchLocked()
	s.cfg.Args = args
	if err != nil || !s.cfg.AOF {
		return err
	}
	return s.enableAOF()
}

// enableAOF turns the append-only file on and waits until its first
// rewrite is done: until then a kill loses the data that is only in memory.
func (s *Server) enableAOF() error {
	c := s.NewClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), persistLimit)
	defer cancel()
	if err := c.ConfigSet(ctx, "appendonly", "yes").Err(); err != nil {
		return fmt.Errorf("redistest: turning the AOF of %s back on: %w", s.Addr(), err)
	}
	return poll(ctx, func() error {
		info, err := c.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		for _, want := range []string{"aof_enabled:1", "aof_rewrite_in_progress:0", "aof_rewrite_scheduled:0", "aof_last_bgrewrite_status:ok"} {
			if !strings.Contains(info, want+"\r\n") {
				return fmt.Errorf("AOF of %s not rewritten yet (%s)", s.Addr(), want)
			}
		}
		return nil
	})
}

// relaunchLocked starts a server that was killed again on its port. The
// port was ours a moment ago, but a client's ephemeral port (or a new
// server elsewhere) may occupy it briefly: it keeps trying the same port,
// since changing it would break everyone holding the address.
func (s *Server) relaunchLocked() error {
	deadline := time.Now().Add(StartTimeout)
	for {
		err := s.launch()
		if err == nil || !errors.Is(err, errPortInUse) || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// An AOFMark is how far the server's append-only file had been written at
// one moment: what an fsync at that moment made durable.
type AOFMark struct {
	file string // the incremental file of the multi-part AOF being appended to
	size int64
}

// Size is the length of the marked file at the mark.
func (m AOFMark) Size() int64 { return m.size }

// MarkAOF records how far the append-only file has been written now. It
// needs Config.AOF and Redis 7's multi-part AOF.
func (s *Server) MarkAOF() (AOFMark, error) {
	file, err := s.incrAOF()
	if err != nil {
		return AOFMark{}, err
	}
	st, err := os.Stat(file)
	if err != nil {
		return AOFMark{}, fmt.Errorf("redistest: AOF of %s: %w", s.Addr(), err)
	}
	return AOFMark{file: file, size: st.Size()}, nil
}

// RestartLosingAOFTail kills the server (SIGKILL) and starts it again from
// its append-only file cut back to the mark plus extra bytes (at most what
// was written): what a host that went down with the server keeps of a file
// last fsynced at the mark, as with appendfsync everysec. A kill alone loses
// nothing, since the kernel still holds what Redis wrote. An extra that ends
// inside a command leaves a torn tail, which Redis drops on load
// (aof-load-truncated, on by default). The file appended to must still be
// the marked one: an AOF rewrite since the mark is an error.
func (s *Server) RestartLosingAOFTail(m AOFMark, extra int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return ErrStopped
	}
	if err := s.killLocked(); err != nil {
		return err
	}
	file, err := s.incrAOF()
	if err != nil {
		return err
	}
	if file != m.file {
		return fmt.Errorf("redistest: AOF of %s was rewritten since the mark (%s, now %s)", s.Addr(), filepath.Base(m.file), filepath.Base(file))
	}
	st, err := os.Stat(file)
	if err != nil {
		return err
	}
	if err := os.Truncate(file, min(st.Size(), m.size+max(extra, 0))); err != nil {
		return fmt.Errorf("redistest: cutting the AOF of %s: %w", s.Addr(), err)
	}
	return s.relaunchLocked()
}

// incrAOF returns the path of the incremental file the server appends to:
// the last "type i" entry of the multi-part AOF's manifest.
func (s *Server) incrAOF() (string, error) {
	dir := filepath.Join(s.dir, aofDirName)
	f, err := os.Open(filepath.Join(dir, "appendonly.aof.manifest"))
	if err != nil {
		return "", fmt.Errorf("redistest: AOF manifest of %s: %w", s.Addr(), err)
	}
	defer f.Close()
	var last string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "file appendonly.aof.1.incr.aof seq 1 type i", pairs of a
		// name and a value, to which Redis 8 adds "startoffset 0".
		fields := strings.Fields(sc.Text())
		kv := map[string]string{}
		for i := 0; i+1 < len(fields); i += 2 {
			kv[fields[i]] = fields[i+1]
		}
		if kv["file"] != "" && kv["type"] == "i" {
			last = kv["file"]
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	if last == "" {
		return "", fmt.Errorf("redistest: AOF manifest of %s lists no incremental file", s.Addr())
	}
	return filepath.Join(dir, last), nil
}

// ReplicaOf makes the server replicate from addr ("host:port"), or, with
// addr "", stop replicating and become a primary (REPLICAOF NO ONE) keeping
// the data it has.
func (s *Server) ReplicaOf(addr string) error {
	c := s.NewClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), persistLimit)
	defer cancel()
	host, port := "NO", "ONE"
	if addr != "" {
		h, p, ok := strings.Cut(addr, ":")
		if _, err := strconv.Atoi(p); !ok || err != nil {
			return fmt.Errorf("redistest: ReplicaOf(%q): want host:port", addr)
		}
		host, port = h, p
	}
	if err := c.ReplicaOf(ctx, host, port).Err(); err != nil {
		return fmt.Errorf("redistest: REPLICAOF %s %s on %s: %w", host, port, s.Addr(), err)
	}
	return nil
}

// WaitReplicaSynced waits (up to timeout) until the server is a replica whose
// link to its primary is up and whose initial sync is done.
func (s *Server) WaitReplicaSynced(timeout time.Duration) error {
	c := s.NewClient()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return poll(ctx, func() error {
		if err := replicaLinkUp(ctx, c); err != nil {
			return err
		}
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_sync_in_progress:0\r\n") {
			return errors.New("initial sync in progress")
		}
		// A replica with an AOF rewrites it after the sync; until then a
		// kill of the replica would lose the synced data.
		info, err = c.Info(ctx, "persistence").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "aof_rewrite_in_progress:0\r\n") || !strings.Contains(info, "aof_rewrite_scheduled:0\r\n") {
			return errors.New("AOF rewrite after the sync in progress")
		}
		return nil
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
