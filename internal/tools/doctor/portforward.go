package doctor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// PodDialer opens a connection to a port of a pod. doctor runs where only
// the kubeconfig reaches the cluster, so the real one goes through the API
// server (pods/portforward); tests inject their own.
type PodDialer interface {
	DialPod(ctx context.Context, namespace, pod string, port int32) (net.Conn, error)
}

// PortForwardError is a port-forward the API server did not open (not
// allowed, the node's kubelet unreachable): nothing was learned of the pod.
type PortForwardError struct {
	Namespace, Pod string
	Port           int32
	Err            error
}

func (e *PortForwardError) Error() string {
	return fmt.Sprintf("could not port-forward to port %d of pod %s/%s through the API server: %v", e.Port, e.Namespace, e.Pod, e.Err)
}

func (e *PortForwardError) Unwrap() error { return e.Err }

// Forbidden says the user may not create pods/portforward.
func (e *PortForwardError) Forbidden() bool {
	s := strings.ToLower(e.Err.Error())
	return strings.Contains(s, "forbidden") || strings.Contains(s, "pods/portforward")
}

// portForwarder dials pods through the API server's pods/portforward
// subresource, over WebSockets and, where the server does not take them,
// SPDY (as kubectl port-forward does). Nothing listens locally: each dial is
// one stream pair on its own upgraded connection, closed with the conn.
type portForwarder struct {
	cfg  *rest.Config
	core rest.Interface
}

// NewPortForwardDialer is the PodDialer of cfg's API server.
func NewPortForwardDialer(cfg *rest.Config) (PodDialer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &portForwarder{cfg: cfg, core: cs.CoreV1().RESTClient()}, nil
}

func (p *portForwarder) dialer(u *url.URL) (streamhttp.Dialer, error) {
	rt, upgrader, err := spdy.RoundTripperFor(p.cfg)
	if err != nil {
		return nil, err
	}
	d := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: rt}, http.MethodPost, u)
	ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, p.cfg)
	if err != nil {
		return nil, err
	}
	return portforward.NewFallbackDialerForStreaming(ws, d, func(err error) bool {
		return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
	}), nil
}

// DialPod opens a port-forward to port of pod namespace/name. The dial
// gives up when ctx ends (the upgrade itself takes no context: a late
// connection is closed when it arrives).
func (p *portForwarder) DialPod(ctx context.Context, namespace, pod string, port int32) (net.Conn, error) {
	fail := func(err error) error { return &PortForwardError{Namespace: namespace, Pod: pod, Port: port, Err: err} }
	u := p.core.Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	d, err := p.dialer(u)
	if err != nil {
		return nil, fail(err)
	}
	type dialed struct {
		conn streamhttp.Connection
		err  error
	}
	ch := make(chan dialed, 1)
	go func() {
		c, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
		ch <- dialed{c, err}
	}()
	var sc streamhttp.Connection
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, fail(r.err)
		}
		sc = r.conn
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.conn != nil {
				_ = r.conn.Close()
			}
		}()
		return nil, fail(ctx.Err())
	}
	conn, err := openForward(sc, namespace, pod, port)
	if err != nil {
		_ = sc.Close()
		return nil, fail(err)
	}
	return conn, nil
}

// openForward creates the error and data streams of one forwarded
// connection, as client-go's PortForwarder does for each local connection.
func openForward(sc streamhttp.Connection, namespace, pod string, port int32) (net.Conn, error) {
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	h.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := sc.CreateStream(h)
	if err != nil {
		return nil, fmt.Errorf("creating the error stream: %w", err)
	}
	// Nothing is written to it.
	_ = errStream.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := sc.CreateStream(h)
	if err != nil {
		return nil, fmt.Errorf("creating the data stream: %w", err)
	}
	c := &forwardConn{sc: sc, data: data, errDone: make(chan struct{}), ns: namespace, pod: pod, port: port}
	go func() {
		msg, err := io.ReadAll(errStream)
		if err == nil && len(msg) > 0 {
			c.errMsg = string(msg)
		}
		close(c.errDone)
	}()
	return c, nil
}

// forwardConn is the data stream of a port-forward as a net.Conn. A read or
// write that fails reports the error stream's message when the kubelet sent
// one (the pod's port refused the connection), which is why it failed.
type forwardConn struct {
	sc      streamhttp.Connection
	data    streamhttp.Stream
	errDone chan struct{}
	errMsg  string
	once    sync.Once

	ns, pod string
	port    int32
}

// podError waits briefly for the error stream and returns its message as
// a *PodPortError, or err.
func (c *forwardConn) podError(err error) error {
	select {
	case <-c.errDone:
	case <-time.After(time.Second):
	}
	select {
	case <-c.errDone:
		if c.errMsg != "" {
			return &PodPortError{Namespace: c.ns, Pod: c.pod, Port: c.port, Message: c.errMsg}
		}
	default:
	}
	return err
}

func (c *forwardConn) Read(b []byte) (int, error) {
	n, err := c.data.Read(b)
	if err != nil {
		err = c.podError(err)
		if errors.Is(err, io.EOF) {
			return n, io.EOF
		}
	}
	return n, err
}

func (c *forwardConn) Write(b []byte) (int, error) {
	n, err := c.data.Write(b)
	if err != nil {
		err = c.podError(err)
	}
	return n, err
}

func (c *forwardConn) Close() error {
	c.once.Do(func() {
		_ = c.data.Reset()
		_ = c.sc.Close()
	})
	return nil
}

type pfAddr string

func (a pfAddr) Network() string { return "portforward" }
func (a pfAddr) String() string  { return string(a) }

func (c *forwardConn) LocalAddr() net.Addr { return pfAddr("doctor") }
func (c *forwardConn) RemoteAddr() net.Addr {
	return pfAddr(fmt.Sprintf("pod/%s/%s:%d", c.ns, c.pod, c.port))
}

// Deadlines are not supported by the stream; the TLS handshake is bounded
// by its context, which closes the connection when it ends.
func (c *forwardConn) SetDeadline(time.Time) error      { return nil }
func (c *forwardConn) SetReadDeadline(time.Time) error  { return nil }
func (c *forwardConn) SetWriteDeadline(time.Time) error { return nil }
