package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// Operator is the operator binary, running.
type Operator struct {
	cmd    *exec.Cmd
	probes string
	logs   *LogBuffer
	exited chan struct{}
	err    error
}

// StartOperator starts bin, the operator binary (Binary(t,
// "cmd/tinyhost-operator")), with the kubeconfig, its health probes on a
// free loopback port, its metrics off and args. When the test ends it is
// stopped with SIGTERM and must exit cleanly; its log is printed if the
// test failed.
func StartOperator(t testing.TB, bin, kubeconfig string, args ...string) *Operator {
	t.Helper()
	op := &Operator{probes: freeAddr(t), logs: &LogBuffer{}, exited: make(chan struct{})}
	op.cmd = exec.Command(bin, append([]string{"--health-probe-bind-address=" + op.probes, "--metrics-bind-address=0"}, args...)...)
	op.cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	op.cmd.Stdout, op.cmd.Stderr = op.logs, op.logs
	if err := op.cmd.Start(); err != nil {
		t.Fatalf("start the operator: %v", err)
	}
	go func() { op.err = op.cmd.Wait(); close(op.exited) }()
	t.Cleanup(func() {
		op.Stop(t)
		if t.Failed() {
			t.Logf("operator log (%s):\n%s", kubeconfig, op.logs.String())
		}
	})
	return op
}

// PID is the operator's process id.
func (op *Operator) PID() int { return op.cmd.Process.Pid }

// Log is what the operator has logged so far.
func (op *Operator) Log() string { return op.logs.String() }

// Ready is nil once the operator answers its readiness probe, and an
// error with its log once it has exited.
func (op *Operator) Ready() error {
	select {
	case <-op.exited:
		return fmt.Errorf("the operator exited: %v\n%s", op.err, op.logs.String())
	default:
	}
	resp, err := http.Get("http://" + op.probes + "/readyz")
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("readyz: %s", resp.Status)
	}
	return nil
}

// Stop sends SIGTERM and waits for a clean exit; an operator that has
// already exited is left as it is.
func (op *Operator) Stop(t testing.TB) {
	t.Helper()
	select {
	case <-op.exited:
		return
	default:
	}
	_ = op.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-op.exited:
		if op.err != nil {
			t.Errorf("operator: %v\n%s", op.err, op.logs.String())
		}
	case <-time.After(30 * time.Second):
		_ = op.cmd.Process.Kill()
		<-op.exited
		t.Errorf("the operator ignored SIGTERM for 30s")
	}
}

// Kill sends SIGKILL and waits until the process is gone.
func (op *Operator) Kill(t testing.TB) {
	t.Helper()
	_ = op.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-op.exited:
	case <-time.After(10 * time.Second):
		t.Errorf("the operator outlived SIGKILL for 10s")
	}
}

// freeAddr is a loopback address nothing listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
