package fenceq

// The one file that speaks C: the few libzmq calls this client needs, through
// cgo. Everything above it sees only zsock, its methods and Go errors.
//
// A zsock is not safe for concurrent use (libzmq sockets are not); the
// Client's pool, the shared connection's lock (mux.go), the Subscriber's
// lock and the tests each give a socket to one goroutine at a time. Waiting for a message (waitIn) happens in Go's
// network poller on a duplicate of the socket's ZMQ_FD, so no OS thread
// blocks in libzmq then; only the rare wait for a connection (poll) does,
// up to 50 ms at a time. The process-wide libzmq context is made on first
// use and never terminated (as pyzmq's Context.instance()): every socket is
// closed with linger 0, so nothing waits at exit.

/*
#cgo pkg-config: libzmq
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

static int fq_set_int(void *s, int option, int value) {
	return zmq_setsockopt(s, option, &value, sizeof value);
}

// One frame: its bytes copied into malloc'd memory (the caller frees it).
static int fq_recv_frame(void *s, int flags, void **data, size_t *size, int *more) {
	zmq_msg_t msg;
	if (zmq_msg_init(&msg) != 0) return -1;
	if (zmq_msg_recv(&msg, s, flags) < 0) {
		int e = zmq_errno();
		zmq_msg_close(&msg);
		errno = e;
		return -1;
	}
	*size = zmq_msg_size(&msg);
	*data = malloc(*size ? *size : 1);
	if (*data == NULL) {
		zmq_msg_close(&msg);
		errno = ENOMEM;
		return -1;
	}
	memcpy(*data, zmq_msg_data(&msg), *size);
	*more = zmq_msg_more(&msg);
	zmq_msg_close(&msg);
	return 0;
}

// A request: [payload], one frame and no envelope of ours (PROTOCOL.md: the
// last frame is the payload; the reply comes back as [reply]), without
// blocking. 0, or -1 with errno; EAGAIN (no connection yet, with
// ZMQ_IMMEDIATE, or the socket's queue full) means nothing was queued. One
// frame, not ["", payload]: a frame less to handle for libzmq on both
// sides and for fenceqd, 3-5 us of CPU a call on each side (issue 35).
static int fq_send_request(void *s, void *payload, size_t size) {
	if (zmq_send(s, payload, size, ZMQ_DONTWAIT) < 0) return -1;
	return 0;
}

// The socket's ZMQ_FD (the fd that signals when its state may have
// changed), or -1.
static int fq_fd(void *s) {
	int fd = -1;
	size_t len = sizeof fd;
	if (zmq_getsockopt(s, ZMQ_FD, &fd, &len) != 0) return -1;
	return fd;
}

// zmq_poll on one socket: its revents, or -1.
static int fq_poll1(void *s, short events, long timeout_ms) {
	zmq_pollitem_t item;
	item.socket = s;
	item.fd = 0;
	item.events = events;
	item.revents = 0;
	int n = zmq_poll(&item, 1, timeout_ms);
	if (n < 0) return -1;
	return item.revents;
}
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// Socket kinds and options, as libzmq numbers them.
const (
	zmqSUB    = C.ZMQ_SUB
	zmqDEALER = C.ZMQ_DEALER
	zmqROUTER = C.ZMQ_ROUTER

	zmqLINGER         = C.ZMQ_LINGER
	zmqIMMEDIATE      = C.ZMQ_IMMEDIATE
	zmqSUBSCRIBE      = C.ZMQ_SUBSCRIBE
	zmqCURVESERVERKEY = C.ZMQ_CURVE_SERVERKEY
	zmqCURVEPUBLICKEY = C.ZMQ_CURVE_PUBLICKEY
	zmqCURVESECRETKEY = C.ZMQ_CURVE_SECRETKEY

	zmqPOLLIN  = C.ZMQ_POLLIN
	zmqPOLLOUT = C.ZMQ_POLLOUT

	zmqDONTWAIT = C.ZMQ_DONTWAIT
)

// zmqError is a failed libzmq call: its errno and libzmq's text for it.
type zmqError struct {
	call  string
	errno int
}

func (e *zmqError) Error() string {
	return fmt.Sprintf("%s: %s", e.call, C.GoString(C.zmq_strerror(C.int(e.errno))))
}

// again reports whether the call would have blocked (EAGAIN).
func (e *zmqError) again() bool { return e.errno == int(C.EAGAIN) }

// callError is a failed call's error; errno is what cgo's two-value call
// form read right after the call, on the thread that made it (errno is per
// thread, and a goroutine may be on another thread by its next cgo call).
func callError(call string, errno error) *zmqError {
	e := &zmqError{call: call}
	if n, ok := errno.(syscall.Errno); ok {
		e.errno = int(n)
	}
	return e
}

func isAgain(err error) bool {
	ze, ok := err.(*zmqError)
	return ok && ze.again()
}

func isInterrupted(err error) bool {
	ze, ok := err.(*zmqError)
	return ok && ze.errno == int(C.EINTR)
}

var (
	contextOnce sync.Once
	contextPtr  unsafe.Pointer
)

// zmqContext is the process's libzmq context (nil if libzmq could not make one).
func zmqContext() unsafe.Pointer {
	contextOnce.Do(func() { contextPtr = C.zmq_ctx_new() })
	return contextPtr
}

// zsock is one libzmq socket. f is a duplicate of its ZMQ_FD registered with
// Go's network poller (waitIn), so that a goroutine waiting for a reply
// parks in the Go scheduler instead of blocking an OS thread in libzmq.
type zsock struct {
	p  unsafe.Pointer
	f  *os.File
	rc syscall.RawConn
}

func newZsock(kind int) (*zsock, error) {
	ctx := zmqContext()
	if ctx == nil {
		return nil, &zmqError{call: "zmq_ctx_new", errno: int(C.ENOMEM)}
	}
	p, errno := C.zmq_socket(ctx, C.int(kind))
	if p == nil {
		return nil, callError("zmq_socket", errno)
	}
	return &zsock{p: p}, nil
}

func (s *zsock) setInt(option, value int) error {
	if r, errno := C.fq_set_int(s.p, C.int(option), C.int(value)); r != 0 {
		return callError("zmq_setsockopt", errno)
	}
	return nil
}

func (s *zsock) setBytes(option int, value []byte) error {
	var p unsafe.Pointer
	if len(value) > 0 {
		p = unsafe.Pointer(&value[0])
	}
	if r, errno := C.zmq_setsockopt(s.p, C.int(option), p, C.size_t(len(value))); r != 0 {
		return callError("zmq_setsockopt", errno)
	}
	return nil
}

func (s *zsock) connect(endpoint string) error {
	c := C.CString(endpoint)
	defer C.free(unsafe.Pointer(c))
	for {
		r, errno := C.zmq_connect(s.p, c)
		if r == 0 {
			return nil
		}
		// EINTR: libzmq reads the socket's mailbox inside zmq_connect, and
		// Go's runtime signals its threads (preemption): connect again.
		if err := callError("zmq_connect", errno); !isInterrupted(err) {
			return err
		}
	}
}

// bind is for the tests' stand-in daemons; the client only connects.
func (s *zsock) bind(endpoint string) error {
	c := C.CString(endpoint)
	defer C.free(unsafe.Pointer(c))
	for {
		r, errno := C.zmq_bind(s.p, c)
		if r == 0 {
			return nil
		}
		if err := callError("zmq_bind", errno); !isInterrupted(err) {
			return err // EINTR (Go's runtime signals its threads): bind again
		}
	}
}

// close closes the socket at once, dropping what it has not sent (linger 0
// is set on every socket this package makes). Idempotent.
func (s *zsock) close() {
	if s.f != nil {
		s.f.Close() // the duplicate only: libzmq's fd is closed by zmq_close
		s.f, s.rc = nil, nil
	}
	if s.p != nil {
		C.zmq_close(s.p)
		s.p = nil
	}
}

// send sends one multipart message. With zmqDONTWAIT an EAGAIN before the
// first frame means nothing was queued; libzmq queues a multipart message
// whole or not at all once its first frame is taken.
func (s *zsock) send(frames [][]byte, flags int) error {
	for i, f := range frames {
		fl := C.int(flags)
		if i < len(frames)-1 {
			fl |= C.ZMQ_SNDMORE
		}
		var p unsafe.Pointer
		if len(f) > 0 {
			p = unsafe.Pointer(&f[0])
		}
		for {
			r, errno := C.zmq_send(s.p, p, C.size_t(len(f)), fl)
			if r >= 0 {
				break
			}
			err := callError("zmq_send", errno)
			if isInterrupted(err) {
				continue
			}
			return err
		}
	}
	return nil
}

// sendRequest sends [payload] without blocking (EAGAIN: not queued).
func (s *zsock) sendRequest(payload []byte) error {
	var p unsafe.Pointer
	if len(payload) > 0 {
		p = unsafe.Pointer(&payload[0])
	}
	for {
		r, errno := C.fq_send_request(s.p, p, C.size_t(len(payload)))
		if r == 0 {
			return nil
		}
		if err := callError("zmq_send", errno); !isInterrupted(err) {
			return err
		}
	}
}

// pollable registers a duplicate of the socket's ZMQ_FD with Go's network
// poller (once). ZMQ_FD signals edges, as Go's poller (epoll, edge
// triggered) reports them: see waitIn.
func (s *zsock) pollable() error {
	if s.rc != nil {
		return nil
	}
	fd, errno := C.fq_fd(s.p)
	if fd < 0 {
		return callError("zmq_getsockopt", errno)
	}
	dup, err := syscall.Dup(int(fd))
	if err != nil {
		return err
	}
	syscall.CloseOnExec(dup)
	if err := syscall.SetNonblock(dup, true); err != nil {
		syscall.Close(dup)
		return err
	}
	f := os.NewFile(uintptr(dup), "zmq-fd")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	s.f, s.rc = f, rc
	return nil
}

// waitIn calls try, which must look at the socket without waiting (a
// recv with zmqDONTWAIT; true: it found something, or failed), and while
// try finds nothing, waits parked in Go's network poller, up to timeout, for
// the socket's ZMQ_FD to signal, and tries again. It answers whether try
// said true (false: the timeout passed first).
//
// Why this order is safe: the poller forgets what it saw of the fd before a
// wait begins (internal/poll's prepareRead), and try runs after that. A
// recv that finds nothing processes what the fd signalled (as ZMQ_EVENTS
// would) and leaves the socket's pipes marked empty, so the next message
// sends a command that signals the fd again: an edge after that reset,
// which the wait sees even if it comes before the goroutine parks. A signal
// is no promise of a message: try again, and nothing there, wait again.
func (s *zsock) waitIn(timeout time.Duration, try func() bool) (bool, error) {
	if err := s.pollable(); err != nil {
		return false, err
	}
	return waitFd(s.f, s.rc, timeout, try)
}

// waitFd is waitIn on a ZMQ_FD duplicate taken before (the shared
// connection's receiver holds its own copy, as Close may clear the
// socket's meanwhile: a closed file ends the wait with an error).
func waitFd(f *os.File, rc syscall.RawConn, timeout time.Duration, try func() bool) (bool, error) {
	if timeout <= 0 {
		return try(), nil
	}
	if err := f.SetReadDeadline(time.Now().Add(timeout)); err != nil {
		return false, err
	}
	err := rc.Read(func(uintptr) bool { return try() })
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return false, nil
	}
	return err == nil, err
}

// recvNow receives a whole message without waiting and answers its last
// frame; ok is false when none is there.
func (s *zsock) recvNow() (last []byte, ok bool, err error) {
	frames, err := s.recv(zmqDONTWAIT)
	if isAgain(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	return frames[len(frames)-1], true, nil
}

// recv receives one whole multipart message.
func (s *zsock) recv(flags int) ([][]byte, error) {
	var frames [][]byte
	for {
		var data unsafe.Pointer
		var size C.size_t
		var more C.int
		if r, errno := C.fq_recv_frame(s.p, C.int(flags), &data, &size, &more); r != 0 {
			err := callError("zmq_msg_recv", errno)
			if isInterrupted(err) && len(frames) == 0 {
				continue
			}
			return nil, err
		}
		frames = append(frames, C.GoBytes(data, C.int(size)))
		C.free(data)
		if more == 0 {
			return frames, nil
		}
		flags = 0 // the rest of a message that began to arrive is there
	}
}

// poll waits up to timeout (0: only looks) for events (zmqPOLLIN,
// zmqPOLLOUT) and answers those that are ready.
func (s *zsock) poll(events int, timeout time.Duration) (int, error) {
	ms := timeout.Milliseconds()
	if timeout > 0 && ms == 0 {
		ms = 1
	}
	for {
		r, errno := C.fq_poll1(s.p, C.short(events), C.long(ms))
		if r >= 0 {
			return int(r), nil
		}
		// EINTR: Go's runtime signals its threads (preemption), which
		// interrupts a poll now and then; poll again (a little longer in
		// all than asked: a slice, never the whole call).
		if err := callError("zmq_poll", errno); !isInterrupted(err) {
			return 0, err
		}
	}
}

// z85Decode decodes 40 Z85 characters into a 32-byte key; false when the
// text is not Z85 (libzmq checks each character and group).
func z85Decode(text string) ([]byte, bool) {
	if len(text) != 40 {
		return nil, false
	}
	c := C.CString(text)
	defer C.free(unsafe.Pointer(c))
	var out [32]byte
	if C.zmq_z85_decode((*C.uint8_t)(unsafe.Pointer(&out[0])), c) == nil {
		return nil, false
	}
	return out[:], true
}

// curvePublic derives the Z85 public key of a Z85 secret key.
func curvePublic(secret string) (string, error) {
	c := C.CString(secret)
	defer C.free(unsafe.Pointer(c))
	var out [41]C.char
	if r, errno := C.zmq_curve_public(&out[0], c); r != 0 {
		return "", callError("zmq_curve_public", errno)
	}
	return C.GoString(&out[0]), nil
}

// zmqHas reports whether libzmq was built with a capability ("curve").
func zmqHas(capability string) bool {
	c := C.CString(capability)
	defer C.free(unsafe.Pointer(c))
	return C.zmq_has(c) != 0
}

// zmqVersion is libzmq's version, such as "4.3.4".
func zmqVersion() string {
	var major, minor, patch C.int
	C.zmq_version(&major, &minor, &patch)
	return fmt.Sprintf("%d.%d.%d", major, minor, patch)
}
