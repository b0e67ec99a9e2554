package pgtest

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// protocolTimeout bounds one Exec: connection, startup and the query.
const protocolTimeout = 10 * time.Second

// Exec runs query (one or more statements, no parameters) on database db as
// the superuser, over the simple query protocol of PostgreSQL's wire
// protocol 3.0. It exists so that this package needs no driver; tests use a
// real one.
func (s *Server) Exec(db, query string) error {
	conn, err := net.DialTimeout("tcp", s.Addr(), protocolTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(protocolTimeout))
	r := bufio.NewReader(conn)

	// StartupMessage: length, protocol 3.0, then name/value pairs.
	var body []byte
	body = binary.BigEndian.AppendUint32(body, 3<<16)
	for _, kv := range []string{"user", superuser, "database", db} {
		body = append(append(body, kv...), 0)
	}
	body = append(body, 0)
	if _, err := conn.Write(frame(0, body)); err != nil {
		return err
	}
	if err := untilReady(r); err != nil {
		return err
	}
	if _, err := conn.Write(frame('Q', append([]byte(query), 0))); err != nil {
		return err
	}
	err = untilReady(r)
	_, _ = conn.Write(frame('X', nil)) // Terminate
	return err
}

// frame builds a message: a type byte (none for the startup message), its
// length including itself, and the body.
func frame(typ byte, body []byte) []byte {
	var b []byte
	if typ != 0 {
		b = append(b, typ)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(4+len(body)))
	return append(b, body...)
}

// untilReady reads messages up to ReadyForQuery and returns the first
// ErrorResponse among them, or an error for an authentication request other
// than AuthenticationOk (the harness sets trust authentication).
func untilReady(r *bufio.Reader) error {
	var first error
	for {
		typ, body, err := readMessage(r)
		if err != nil {
			return err
		}
		switch typ {
		case 'Z': // ReadyForQuery
			return first
		case 'E': // ErrorResponse
			if first == nil {
				first = serverError(body)
			}
			// An error during startup ends the connection without
			// ReadyForQuery.
			if _, err := r.Peek(1); err != nil {
				return first
			}
		case 'R': // Authentication*
			if len(body) < 4 || binary.BigEndian.Uint32(body) != 0 {
				return errors.New("pgtest: server asks for a password: the harness expects trust authentication")
			}
		}
	}
}

func readMessage(r *bufio.Reader) (byte, []byte, error) {
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(head[1:])
	if n < 4 || n > 1<<20 {
		return 0, nil, fmt.Errorf("pgtest: message %q of length %d", head[0], n)
	}
	body := make([]byte, n-4)
	if _, err := io.ReadFull(r, body); err != nil {
		return 0, nil, err
	}
	return head[0], body, nil
}

// serverError renders an ErrorResponse's severity, code and message fields.
func serverError(body []byte) error {
	fields := map[byte]string{}
	for len(body) > 1 {
		code := body[0]
		end := strings.IndexByte(string(body[1:]), 0)
		if end < 0 {
			break
		}
		fields[code] = string(body[1 : 1+end])
		body = body[2+end:]
	}
	return fmt.Errorf("pgtest: %s %s: %s", fields['S'], fields['C'], fields['M'])
}
