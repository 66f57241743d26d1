package fatal

import "testing"

func TestMessage(t *testing.T) {
	after := false
	msg := Message(func(tb testing.TB) {
		tb.Fatalf("gave up after %d tries", 3)
		after = true
	})
	if msg != "gave up after 3 tries" || after {
		t.Errorf("message %q, ran on after Fatalf: %v; want the message and a stop", msg, after)
	}
	if msg := Message(func(testing.TB) {}); msg != "" {
		t.Errorf("a helper that returned gave message %q, want none", msg)
	}
}
