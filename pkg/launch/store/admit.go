package store

import (
	"container/list"
	"net"
)

// waiting is the connections that have not presented the token, oldest first.
type waiting struct {
	order *list.List // of net.Conn
	at    map[net.Conn]*list.Element
}

func (w *waiting) len() int {
	if w.order == nil {
		return 0
	}
	return w.order.Len()
}

func (w *waiting) add(c net.Conn) {
	if w.order == nil {
		w.order, w.at = list.New(), map[net.Conn]*list.Element{}
	}
	w.at[c] = w.order.PushBack(c)
}

// remove forgets c (authenticated, closed or evicted); it says whether c was there.
func (w *waiting) remove(c net.Conn) bool {
	e, ok := w.at[c]
	if ok {
		w.order.Remove(e)
		delete(w.at, c)
	}
	return ok
}

func (w *waiting) oldest() net.Conn {
	return w.order.Front().Value.(net.Conn)
}

// admitLocked takes c as a connection that has yet to present the token. When
// MaxUnauthenticated of them wait already, the one that has waited longest is closed
// to make room, rather than c: a rank presents its token as soon as it connects, so the
// connections that wait are the ones that will not. Refusing the newest instead let a
// local process that held the slots (and re-dialled each one dropped) keep every rank
// out of the job for as long as it liked.
func (s *Server) admitLocked(c net.Conn) {
	for s.unauth.len() >= s.opt.MaxUnauthenticated {
		old := s.unauth.oldest()
		s.unauth.remove(old)
		old.Close() // its serve returns at once, and finds it removed already
		s.evicted++
	}
	s.unauth.add(c)
}

// Crowded is how many connections the store closed unanswered to make room for newer
// ones (see Options.MaxUnauthenticated): something other than the job's ranks is
// connecting to its port, another job of the same address or a flood.
func (s *Server) Crowded() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.evicted
}
