package controller

import "testing"

func TestRecentKeepsTheLastKeys(t *testing.T) {
	var c recent[string, int]
	c.put("a", 1, 2)
	c.put("b", 2, 2)
	c.put("a", 10, 2) // an update does not make a key newer
	if got := c.get("a"); got != 10 {
		t.Fatalf("a = %d, want 10", got)
	}
	c.put("c", 3, 2)
	if got := c.get("a"); got != 0 {
		t.Errorf("a = %d after a third key, want dropped", got)
	}
	if c.get("b") != 2 || c.get("c") != 3 {
		t.Errorf("b, c = %d, %d, want 2, 3", c.get("b"), c.get("c"))
	}
}
